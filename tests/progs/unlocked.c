/* SPDX-License-Identifier: BSD-3-Clause */
/* For the FASE checker (PMTHREADS_CHECK=1): two threads write a malloc'd
 * buffer, each round once under a mutex (store_under_mutex) and once holding
 * no lock (store_without_lock), with pauses so that several epochs pass and
 * the unlocked store faults again and again.  Under the checker the unlocked
 * store must be reported exactly once and the locked one never.  Prints a
 * sum that does not depend on the interleaving. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define THREADS 2
#define ROUNDS 40
#define PAGE 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *buf;

/* noinline, noclone: each must stay a function of its own name, as the
 * checker's report names it. */
__attribute__((noinline, noclone)) void store_under_mutex(long *p, long v)
{
	pthread_mutex_lock(&lock);
	*(volatile long *)p += v;
	pthread_mutex_unlock(&lock);
}

__attribute__((noinline, noclone)) void store_without_lock(long *p, long v)
{
	*(volatile long *)p += v;
}

static void *work(void *arg)
{
	long t = (long)arg;
	/* Each thread its own two pages, so that the locked store never
	 * dirties the page the unlocked one writes (only first writes to a
	 * page in an epoch are seen). */
	long *locked = (long *)(buf + (2 * t) * PAGE);
	long *unlocked = (long *)(buf + (2 * t + 1) * PAGE);
	for (int i = 0; i < ROUNDS; i++) {
		store_under_mutex(locked, 1);
		store_without_lock(unlocked, 2);
		usleep(3000);
	}
	return NULL;
}

int main(void)
{
	/* calloc: the zeroing happens inside the allocator. */
	buf = calloc(2 * THREADS, PAGE);
	if (buf == NULL)
		return 1;
	pthread_t th[THREADS];
	for (long t = 0; t < THREADS; t++)
		if (pthread_create(&th[t], NULL, work, (void *)t) != 0)
			return 1;
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	long sum = 0;
	for (int t = 0; t < THREADS; t++)
		sum += *(long *)(buf + 2 * t * PAGE) + *(long *)(buf + (2 * t + 1) * PAGE);
	printf("sum %ld\n", sum);
	free(buf);
	return 0;
}
