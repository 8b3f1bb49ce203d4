/* SPDX-License-Identifier: BSD-3-Clause */
/* For the FASE checker under frequent epochs (PMTHREADS_CHECK=1,
 * PMTHREADS_INTERVAL_MS of a few ms): four threads write 90 distinct call
 * sites without a lock, each site its own page, with a locked store between
 * them so that epochs keep closing the gate while the checker's reports
 * unwind in the fault handler.  A report that waited at the gate there would
 * hang the program (the epoch's collection waits for the handler).  Prints
 * "done" at the end. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define PAGE 4096
#define THREADS 4
#define ROUNDS 20

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *buf;

/* Each its own function, so each store is a call site of its own. */
#define SITE(n) \
	__attribute__((noinline, noclone)) void unlocked_site_##n(long *p) { *(volatile long *)p += n; }
#define SITES10(a) \
	SITE(a##0) SITE(a##1) SITE(a##2) SITE(a##3) SITE(a##4) \
	SITE(a##5) SITE(a##6) SITE(a##7) SITE(a##8) SITE(a##9)
SITES10(1) SITES10(2) SITES10(3) SITES10(4) SITES10(5) SITES10(6) SITES10(7) SITES10(8) SITES10(9)
#define ROW(a) \
	unlocked_site_##a##0, unlocked_site_##a##1, unlocked_site_##a##2, unlocked_site_##a##3, \
	unlocked_site_##a##4, unlocked_site_##a##5, unlocked_site_##a##6, unlocked_site_##a##7, \
	unlocked_site_##a##8, unlocked_site_##a##9
static void (*const sites[])(long *) = { ROW(1), ROW(2), ROW(3), ROW(4), ROW(5),
					 ROW(6), ROW(7), ROW(8), ROW(9) };
#define NSITES (sizeof(sites) / sizeof(sites[0]))

static void *work(void *arg)
{
	long t = (long)arg;
	for (int round = 0; round < ROUNDS; round++)
		for (unsigned i = 0; i < NSITES; i++) {
			sites[(i + (unsigned)t * 7) % NSITES](
				(long *)(buf + ((i * 4 + (unsigned)t) % (NSITES * 4)) * PAGE));
			pthread_mutex_lock(&lock);
			buf[(NSITES * 4 + (unsigned)t) * PAGE] ^= 1;
			pthread_mutex_unlock(&lock);
		}
	return NULL;
}

int main(void)
{
	buf = calloc(NSITES * 4 + THREADS, PAGE);
	if (buf == NULL)
		return 1;
	pthread_t th[THREADS];
	for (long t = 0; t < THREADS; t++)
		if (pthread_create(&th[t], NULL, work, (void *)t) != 0)
			return 1;
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	printf("done\n");
	free(buf);
	return 0;
}
