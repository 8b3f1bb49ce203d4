/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The pthread corners, each printing what the calls returned: robust
 * mutexes (EOWNERDEAD, pthread_mutex_consistent), error-checking and
 * recursive mutexes (EDEADLK, EBUSY, EPERM, ETIMEDOUT), pthread_cancel of
 * threads inside a critical section at cancellation points, threads that
 * end (return, pthread_exit) holding a lock, PTHREAD_PROCESS_SHARED locks
 * between processes, and signal handlers that take locks.  Under the
 * preload the FASE depth must follow what each lock call did: a level kept
 * for a failed call, or never given back by a cancelled or finished
 * thread, would stall every later epoch (the test reads the statistics).
 * Between the parts the program idles for a few epoch intervals.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *name(int r)
{
	switch (r) {
	case 0: return "0";
	case EOWNERDEAD: return "EOWNERDEAD";
	case ENOTRECOVERABLE: return "ENOTRECOVERABLE";
	case EDEADLK: return "EDEADLK";
	case EBUSY: return "EBUSY";
	case EPERM: return "EPERM";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EINVAL: return "EINVAL";
	default: return strerror(r);
	}
}

static void idle_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static long *shared_data;	/* malloc'd: the persistent heap in malloc mode */

/* ---- robust ---- */

static pthread_mutex_t robust;

static void *die_holding(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&robust);
	shared_data[0]++;
	return NULL;	/* ends holding it */
}

static void robust_part(void)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&robust, &a);
	pthread_mutexattr_destroy(&a);
	pthread_t th;
	pthread_create(&th, NULL, die_holding, NULL);
	pthread_join(th, NULL);
	int r = pthread_mutex_lock(&robust);
	printf("robust: lock after the owner died: %s\n", name(r));
	shared_data[0]++;
	printf("robust: consistent: %s\n", name(pthread_mutex_consistent(&robust)));
	printf("robust: unlock: %s\n", name(pthread_mutex_unlock(&robust)));
	printf("robust: lock again: %s\n", name(pthread_mutex_lock(&robust)));
	printf("robust: unlock: %s\n", name(pthread_mutex_unlock(&robust)));
	/* Not made consistent: unusable afterwards. */
	pthread_create(&th, NULL, die_holding, NULL);
	pthread_join(th, NULL);
	printf("robust: lock after the next owner died: %s\n", name(pthread_mutex_lock(&robust)));
	printf("robust: unlock without consistent: %s\n", name(pthread_mutex_unlock(&robust)));
	printf("robust: lock now: %s\n", name(pthread_mutex_lock(&robust)));
	printf("robust: trylock now: %s\n", name(pthread_mutex_trylock(&robust)));
	printf("robust: count %ld\n", shared_data[0]);
}

/* ---- error-checking and recursive ---- */

static pthread_mutex_t checked, recursive;

static void *unlock_foreign(void *arg)
{
	(void)arg;
	printf("errorcheck: unlock from another thread: %s\n", name(pthread_mutex_unlock(&checked)));
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += 20 * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	printf("errorcheck: timedlock held elsewhere: %s\n",
	       name(pthread_mutex_timedlock(&checked, &t)));
	printf("errorcheck: trylock held elsewhere: %s\n", name(pthread_mutex_trylock(&checked)));
	printf("recursive: trylock held elsewhere: %s\n", name(pthread_mutex_trylock(&recursive)));
	return NULL;
}

static void kinds_part(void)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&checked, &a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&recursive, &a);
	pthread_mutexattr_destroy(&a);

	printf("errorcheck: lock: %s\n", name(pthread_mutex_lock(&checked)));
	printf("errorcheck: lock again: %s\n", name(pthread_mutex_lock(&checked)));
	printf("errorcheck: trylock again: %s\n", name(pthread_mutex_trylock(&checked)));
	printf("recursive: lock x3, trylock: %s %s %s %s\n", name(pthread_mutex_lock(&recursive)),
	       name(pthread_mutex_lock(&recursive)), name(pthread_mutex_lock(&recursive)),
	       name(pthread_mutex_trylock(&recursive)));
	shared_data[1]++;
	pthread_t th;
	pthread_create(&th, NULL, unlock_foreign, NULL);
	pthread_join(th, NULL);
	for (int i = 0; i < 4; i++)
		printf("recursive: unlock %d: %s\n", i + 1, name(pthread_mutex_unlock(&recursive)));
	printf("recursive: unlock once too often: %s\n", name(pthread_mutex_unlock(&recursive)));
	printf("errorcheck: unlock: %s\n", name(pthread_mutex_unlock(&checked)));
	printf("errorcheck: unlock again: %s\n", name(pthread_mutex_unlock(&checked)));
}

/* ---- cancellation ---- */

static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER, outer = PTHREAD_MUTEX_INITIALIZER,
		       leaked = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pipe_fd[2];
static volatile int waiting;

static void unlock_cleanup(void *m) { pthread_mutex_unlock(m); }

/* Written only here, on a page of its own: under PMTHREADS_CHECK its first
 * write is checked, and it is inside outer's critical section. */
static long *cleanup_data;

static void unlock_outer_cleanup(void *m)
{
	cleanup_data[0]++;
	pthread_mutex_unlock(m);
}

static void *cancelled_in_cond_wait(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&outer);
	pthread_cleanup_push(unlock_outer_cleanup, &outer);
	pthread_mutex_lock(&cm);
	pthread_cleanup_push(unlock_cleanup, &cm);
	shared_data[2]++;
	__atomic_store_n(&waiting, 1, __ATOMIC_SEQ_CST);
	for (;;)
		pthread_cond_wait(&cv, &cm);	/* never signalled */
	pthread_cleanup_pop(1);
	pthread_cleanup_pop(1);
	return NULL;
}

static void *cancelled_in_sleep(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&outer);
	pthread_cleanup_push(unlock_cleanup, &outer);
	shared_data[2]++;
	__atomic_store_n(&waiting, 1, __ATOMIC_SEQ_CST);
	for (;;)
		idle_ms(1000);
	pthread_cleanup_pop(1);
	return NULL;
}

/* No cleanup handler: the mutex stays locked, as natively. */
static void *cancelled_in_read(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&leaked);
	shared_data[2]++;
	__atomic_store_n(&waiting, 1, __ATOMIC_SEQ_CST);
	char c;
	for (;;)
		if (read(pipe_fd[0], &c, 1) < 0)
			break;
	return NULL;
}

static void cancel_one(void *(*fn)(void *), const char *what)
{
	__atomic_store_n(&waiting, 0, __ATOMIC_SEQ_CST);
	pthread_t th;
	pthread_create(&th, NULL, fn, NULL);
	while (!__atomic_load_n(&waiting, __ATOMIC_SEQ_CST))
		idle_ms(1);
	idle_ms(20);	/* into the wait */
	pthread_cancel(th);
	void *ret;
	pthread_join(th, &ret);
	printf("cancel %s: %s\n", what, ret == PTHREAD_CANCELED ? "cancelled" : "returned");
}

static void cancel_part(void)
{
	if (pipe(pipe_fd) != 0)
		exit(3);
	cancel_one(cancelled_in_cond_wait, "in pthread_cond_wait under two locks");
	printf("cancel: outer lock free again: %s\n", name(pthread_mutex_trylock(&outer)));
	pthread_mutex_unlock(&outer);
	printf("cancel: condition mutex free again: %s\n", name(pthread_mutex_trylock(&cm)));
	pthread_mutex_unlock(&cm);
	cancel_one(cancelled_in_sleep, "in nanosleep under a lock");
	cancel_one(cancelled_in_read, "in read under a lock, no cleanup handler");
	printf("cancel: that lock stays taken: %s\n", name(pthread_mutex_trylock(&leaked)));
}

/* ---- threads that end holding a lock ---- */

static pthread_mutex_t kept = PTHREAD_MUTEX_INITIALIZER, kept2 = PTHREAD_MUTEX_INITIALIZER;

static void *return_holding(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&kept);
	shared_data[3]++;
	return NULL;
}

static void *exit_holding(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&kept2);
	shared_data[3]++;
	pthread_exit(NULL);
}

static void ending_part(void)
{
	pthread_t a, b;
	pthread_create(&a, NULL, return_holding, NULL);
	pthread_create(&b, NULL, exit_holding, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("ended holding: %s %s, count %ld\n", name(pthread_mutex_trylock(&kept)),
	       name(pthread_mutex_trylock(&kept2)), shared_data[3]);
}

/* ---- process-shared ---- */

struct shared_area {
	pthread_mutex_t m, robust_m;
	pthread_cond_t c;
	long counter;
	int turn;
};

static void shared_part(void)
{
	struct shared_area *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s == MAP_FAILED)
		exit(4);
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&s->m, &a);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&s->robust_m, &a);
	pthread_mutexattr_destroy(&a);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	pthread_cond_init(&s->c, &ca);
	pthread_condattr_destroy(&ca);

	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 200; i++) {
			pthread_mutex_lock(&s->m);
			while (s->turn != 1)
				pthread_cond_wait(&s->c, &s->m);
			s->counter++;
			s->turn = 0;
			pthread_cond_broadcast(&s->c);
			pthread_mutex_unlock(&s->m);
		}
		pthread_mutex_lock(&s->robust_m);
		_exit(0);	/* holding it */
	}
	for (int i = 0; i < 200; i++) {
		pthread_mutex_lock(&s->m);
		while (s->turn != 0)
			pthread_cond_wait(&s->c, &s->m);
		s->counter++;
		shared_data[4]++;
		s->turn = 1;
		pthread_cond_broadcast(&s->c);
		pthread_mutex_unlock(&s->m);
	}
	int st;
	waitpid(pid, &st, 0);
	printf("process-shared: counter %ld, child exit %d\n", s->counter,
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	int r = pthread_mutex_lock(&s->robust_m);
	printf("process-shared robust: lock after the child died: %s\n", name(r));
	if (r == EOWNERDEAD)
		pthread_mutex_consistent(&s->robust_m);
	printf("process-shared robust: unlock: %s\n", name(pthread_mutex_unlock(&s->robust_m)));
}

/* ---- signal handlers that lock ---- */

static pthread_mutex_t in_handler = PTHREAD_MUTEX_INITIALIZER, held = PTHREAD_MUTEX_INITIALIZER;
static volatile long handled;

static void on_usr1(int sig)
{
	(void)sig;
	pthread_mutex_lock(&in_handler);
	shared_data[5]++;
	handled++;
	pthread_mutex_unlock(&in_handler);
}

static void *signalled_under_lock(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20; i++) {
		pthread_mutex_lock(&held);
		pthread_kill(pthread_self(), SIGUSR1);	/* handled inside this FASE */
		shared_data[5]++;
		pthread_mutex_unlock(&held);
		pthread_kill(pthread_self(), SIGUSR1);	/* and outside any */
		idle_ms(2);
	}
	return NULL;
}

static void signal_part(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t th;
	pthread_create(&th, NULL, signalled_under_lock, NULL);
	pthread_join(th, NULL);
	printf("signal handlers that lock: handled %ld, count %ld\n", handled, shared_data[5]);
}

int main(void)
{
	shared_data = calloc(8, sizeof(long));
	cleanup_data = aligned_alloc(4096, 4096);
	if (shared_data == NULL || cleanup_data == NULL)
		return 1;
	robust_part();
	idle_ms(60);
	kinds_part();
	idle_ms(60);
	cancel_part();
	idle_ms(60);
	ending_part();
	idle_ms(60);
	shared_part();
	idle_ms(60);
	signal_part();
	/* Epochs must still happen now: every level taken above was given
	 * back (or dropped with its thread). */
	idle_ms(200);
	printf("done\n");
	return 0;
}
