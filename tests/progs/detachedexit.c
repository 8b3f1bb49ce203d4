/* SPDX-License-Identifier: BSD-3-Clause */
/* Detached threads that exit while the malloc heap is clean (write-protected
 * under the mprotect tracker) and glibc's stack cache is full.  A detached
 * thread frees its own stack in start_thread with all signals blocked, and
 * that frees the DTVs of the cached stacks it pushes over the cache limit:
 * had those DTVs come from the persistent heap, the free wrote a read-only
 * heap page with SIGSEGV blocked and the process died.  Prints the count. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#define ROUNDS 12
#define JOINED 6 /* 6 x 8 MiB stacks: more than glibc's 40 MiB cache */

static atomic_int release_detached, detached_done;

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

static void *joined_entry(void *arg)
{
	return arg;
}

static void *detached_entry(void *arg)
{
	while (!atomic_load(&release_detached))
		sleep_ms(1);
	atomic_fetch_add(&detached_done, 1);
	return arg;
}

int main(void)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 8u << 20);
	for (int r = 0; r < ROUNDS; r++) {
		atomic_store(&release_detached, 0);
		pthread_t d, t[JOINED];
		pthread_create(&d, &attr, detached_entry, NULL);
		pthread_detach(d);
		for (int i = 0; i < JOINED; i++)
			pthread_create(&t[i], &attr, joined_entry, NULL);
		/* The joins fill the stack cache up to its limit. */
		for (int i = 0; i < JOINED; i++)
			pthread_join(t[i], NULL);
		/* Let epochs pass: each leaves the heap's pages write-protected. */
		sleep_ms(40);
		atomic_store(&release_detached, 1);
		while (atomic_load(&detached_done) <= r)
			sleep_ms(1);
		sleep_ms(5); /* the detached thread finishes start_thread */
	}
	printf("detached %d\n", atomic_load(&detached_done));
	return 0;
}
