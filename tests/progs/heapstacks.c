/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory the program hands to the kernel as a stack: thread stacks from
 * posix_memalign and malloc given to pthread_attr_setstack, an alternate
 * signal stack from malloc, and the threads glibc starts itself for
 * SIGEV_THREAD timers.  In malloc mode all of it is persistent heap; under
 * the mprotect tracker a clean heap page is read-only, and the kernel cannot
 * deliver the fault of a write to a stack on that very stack (clone, signal
 * frames), so the process died.  Each part runs across many epochs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STACK_SIZE (256 * 1024)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long total;

static void nap_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000L };
	nanosleep(&ts, NULL);
}

/* Uses a good part of its stack, across epochs. */
static long deep(int depth)
{
	volatile char frame[2048];
	memset((char *)frame, depth, sizeof(frame));
	if (depth % 16 == 0)
		nap_ms(2);
	return depth == 0 ? frame[7] : frame[depth % 2048] + deep(depth - 1);
}

static void *worker(void *arg)
{
	long r = deep(64);
	pthread_mutex_lock(&lock);
	total += r + (long)(intptr_t)arg;
	pthread_mutex_unlock(&lock);
	return NULL;
}

static int run_on_stack(void *stack, long id)
{
	pthread_attr_t a;
	pthread_attr_init(&a);
	if (pthread_attr_setstack(&a, stack, STACK_SIZE) != 0)
		return -1;
	pthread_t th;
	int e = pthread_create(&th, &a, worker, (void *)(intptr_t)id);
	pthread_attr_destroy(&a);
	if (e != 0)
		return -1;
	return pthread_join(th, NULL);
}

static char *altstack;
static size_t altstack_size;
static volatile sig_atomic_t on_altstack, handled;

static void on_usr1(int sig)
{
	(void)sig;
	volatile char buf[1024];
	memset((char *)buf, 1, sizeof(buf));
	if ((char *)buf >= altstack && (char *)buf < altstack + altstack_size)
		on_altstack++;
	handled++;
}

static long timer_calls;

static void on_timer(union sigval v)
{
	char *p = malloc(64);
	if (p != NULL)
		memset(p, 1, 64);
	pthread_mutex_lock(&lock);
	timer_calls++;
	total += v.sival_int;
	pthread_mutex_unlock(&lock);
	free(p);
}

int main(void)
{
	/* Thread stacks in the heap, each reused after its thread is joined,
	 * then freed. */
	void *a = NULL;
	if (posix_memalign(&a, 4096, STACK_SIZE) != 0)
		return 1;
	char *b = malloc(STACK_SIZE + 4096);
	void *b_aligned = (void *)(((uintptr_t)b + 4095) & ~(uintptr_t)4095);
	for (long round = 0; round < 4; round++) {
		if (run_on_stack(a, round) != 0 || run_on_stack(b_aligned, round) != 0)
			return 2;
		memset(a, 0, 4096);	/* the program's own use of the memory after the join */
		nap_ms(5);
	}
	free(a);
	free(b);
	printf("threads on heap stacks: total %ld\n", total);

	/* An alternate signal stack in the heap, used across epochs. */
	altstack_size = 64 * 1024;
	altstack = malloc(altstack_size);
	stack_t ss = { .ss_sp = altstack, .ss_size = altstack_size, .ss_flags = 0 };
	if (sigaltstack(&ss, NULL) != 0)
		return 3;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < 20; i++) {
		raise(SIGUSR1);
		nap_ms(3);
	}
	stack_t off = { .ss_flags = SS_DISABLE };
	sigaltstack(&off, NULL);
	free(altstack);
	raise(SIGUSR1);	/* on the thread's own stack now */
	printf("signals %d, on the alternate stack %d\n", (int)handled, (int)on_altstack);

	/* SIGEV_THREAD: glibc's helper thread and the threads it starts. */
	timer_t t;
	struct sigevent ev;
	memset(&ev, 0, sizeof(ev));
	ev.sigev_notify = SIGEV_THREAD;
	ev.sigev_notify_function = on_timer;
	ev.sigev_value.sival_int = 1;
	if (timer_create(CLOCK_MONOTONIC, &ev, &t) != 0)
		return 4;
	struct itimerspec its = { { 0, 4000000 }, { 0, 4000000 } };
	timer_settime(t, 0, &its, NULL);
	for (int i = 0; i < 200; i++) {
		pthread_mutex_lock(&lock);
		long calls = timer_calls;
		pthread_mutex_unlock(&lock);
		if (calls >= 20)
			break;
		nap_ms(5);
	}
	timer_delete(t);
	nap_ms(20);
	pthread_mutex_lock(&lock);
	printf("timer callbacks: at least 20: %s\n", timer_calls >= 20 ? "yes" : "no");
	pthread_mutex_unlock(&lock);
	return 0;
}
