/* SPDX-License-Identifier: BSD-3-Clause */
/* A program that runs with signals blocked, as xz and zstd do: its threads
 * are created with every signal blocked and write their heap buffers that
 * way, a signal handler whose mask is every signal writes the heap, and the
 * mask it reads back must be the one it set.  Under the mprotect tracker a
 * heap write with SIGSEGV blocked used to end the process. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 3
#define BUF (2u << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long total;
static unsigned char *handler_buf;
static volatile sig_atomic_t handled;

static void *work(void *arg)
{
	unsigned seed = (unsigned)(unsigned long)arg;
	sigset_t cur;
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	if (!sigismember(&cur, SIGSEGV) || !sigismember(&cur, SIGUSR1)) {
		fprintf(stderr, "worker %u: the inherited mask lost a signal\n", seed);
		exit(3);
	}
	for (int round = 0; round < 20; round++) {
		unsigned char *b = malloc(BUF);
		if (b == NULL)
			exit(4);
		for (size_t i = 0; i < BUF; i += 512)
			b[i] = (unsigned char)(i * seed + (unsigned)round);
		unsigned long long sum = 0;
		for (size_t i = 0; i < BUF; i += 512)
			sum += b[i];
		pthread_mutex_lock(&lock);
		total += sum;
		pthread_mutex_unlock(&lock);
		free(b);
		usleep(2000);
	}
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
	/* With every signal blocked by the handler's own mask. */
	for (size_t i = 0; i < BUF; i += 4096)
		handler_buf[i] = (unsigned char)(i >> 12);
	handled = 1;
}

int main(void)
{
	handler_buf = malloc(BUF);
	if (handler_buf == NULL)
		return 4;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		return 5;

	sigset_t all, old, back;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t th[THREADS];
	for (unsigned t = 0; t < THREADS; t++)
		if (pthread_create(&th[t], NULL, work, (void *)(unsigned long)(t + 1)) != 0)
			return 6;
	/* The main thread writes too while everything is blocked. */
	unsigned char *own = malloc(BUF);
	if (own == NULL)
		return 4;
	memset(own, 7, BUF);
	sigprocmask(SIG_SETMASK, NULL, &back);
	if (!sigismember(&back, SIGSEGV)) {
		fprintf(stderr, "sigprocmask does not report SIGSEGV blocked\n");
		return 7;
	}
	for (unsigned t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	sigprocmask(SIG_SETMASK, NULL, &back);
	if (sigismember(&back, SIGSEGV)) {
		fprintf(stderr, "SIGSEGV still reported blocked after the mask was restored\n");
		return 8;
	}
	raise(SIGUSR1);
	unsigned long long hsum = 0;
	for (size_t i = 0; i < BUF; i += 4096)
		hsum += handler_buf[i];
	printf("total %llu own %d handled %d handler %llu\n", total, own[BUF - 1], (int)handled,
	       hsum);
	return 0;
}
