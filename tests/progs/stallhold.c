/* SPDX-License-Identifier: BSD-3-Clause */
/* A main thread that holds a mutex for a long time (as Redis holds its module
 * GIL) while another thread does FASEs: no quiescent point is possible while
 * it holds it.  Never linked with pmthreads; pmthreads_sync is looked up
 * under the preload.  Modes:
 *   life     main holds the lock to the end and exits holding it; the worker
 *            does FASEs for 3 s (a second past the stall report's first
 *            bound), then calls pmthreads_sync
 *   release  the worker's pmthreads_sync times out while main holds the
 *            lock; main then releases it and the worker's second sync
 *            succeeds
 *   exit     main takes the lock and exits holding it
 *   other    another thread takes the lock and keeps it (sleeping); main
 *            exits while it holds it
 *   tail     as release, the lock taken by take_big_tail, which ends in a
 *            tail call to pthread_mutex_lock (as Redis' moduleAcquireGIL
 *            does): the lock call's return address is in main
 * Prints the holder's thread id and each sync's outcome. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t big = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t small = PTHREAD_MUTEX_INITIALIZER;
static long *counter;
static atomic_int synced_once;

/* The function whose lock is the "global lock": exported (the program is
 * linked with -rdynamic), so PMTHREADS_NOT_FASE can name it. */
__attribute__((noinline)) void hold_big_lock(void)
{
	pthread_mutex_lock(&big);
	__asm__ volatile("" ::: "memory");
}

/* Optimised whatever the build, so that the lock call is a jump. */
__attribute__((noinline, optimize("O2"))) int take_big_tail(void)
{
	return pthread_mutex_lock(&big);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fases_for(double seconds)
{
	double end = now_s() + seconds;
	while (now_s() < end) {
		pthread_mutex_lock(&small);
		(*counter)++;
		pthread_mutex_unlock(&small);
		usleep(1000);
	}
}

static void sync_and_say(void)
{
	int (*sync)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "pmthreads_sync");
	if (sync == NULL) {
		printf("sync absent\n");
		return;
	}
	int r = sync();
	printf("sync %s\n", r == 0 ? "ok" : errno == ETIMEDOUT ? "ETIMEDOUT" : strerror(errno));
	fflush(stdout);
}

static void *worker(void *arg)
{
	const char *mode = arg;
	if (strcmp(mode, "life") == 0) {
		fases_for(3.0);
		sync_and_say();
	} else {
		fases_for(0.3);
		sync_and_say();
		atomic_store(&synced_once, 1);
		while (atomic_load(&synced_once) != 2)
			usleep(1000);
		fases_for(0.1);
		sync_and_say();
	}
	return NULL;
}

static void *hold_and_sleep(void *unused)
{
	(void)unused;
	hold_big_lock();
	printf("holder tid %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	atomic_store(&synced_once, 1);
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "life";
	counter = calloc(1, sizeof(*counter));
	if (strcmp(mode, "other") == 0) {
		pthread_t t;
		pthread_create(&t, NULL, hold_and_sleep, NULL);
		while (atomic_load(&synced_once) != 1)
			usleep(1000);
		pthread_mutex_lock(&small);
		*counter = 1;
		pthread_mutex_unlock(&small);
		exit(0);
	}
	if (strcmp(mode, "tail") == 0)
		take_big_tail();
	else
		hold_big_lock();
	printf("holder tid %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	if (strcmp(mode, "exit") == 0) {
		*counter = 1;
		exit(0);
	}
	pthread_t t;
	pthread_create(&t, NULL, worker, (void *)mode);
	if (strcmp(mode, "release") == 0 || strcmp(mode, "tail") == 0) {
		while (atomic_load(&synced_once) != 1)
			usleep(1000);
		pthread_mutex_unlock(&big);
		atomic_store(&synced_once, 2);
	}
	pthread_join(t, NULL);
	printf("counter positive %d\n", *counter > 0);
	exit(0);
}
