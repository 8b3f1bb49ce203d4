/* SPDX-License-Identifier: BSD-3-Clause */
/* Readers and writers over a table guarded by a rwlock (timed and try
 * variants included).  Writers keep every row's two halves equal; readers
 * count rows where they differ (must be 0).  Prints the final totals. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROWS 64
#define WRITERS 2
#define READERS 3
#define WRITES 20000

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static long (*table)[2];
static long torn;
static pthread_mutex_t torn_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int done;

static void *writer(void *arg)
{
	unsigned seed = (unsigned)(long)arg;
	for (int i = 0; i < WRITES; i++) {
		int r = (int)(rand_r(&seed) % ROWS);
		if (i % 3 == 0) {
			struct timespec t;
			clock_gettime(CLOCK_REALTIME, &t);
			t.tv_sec += 5;
			if (pthread_rwlock_timedwrlock(&rw, &t) != 0)
				abort();
		} else if (i % 3 == 1) {
			while (pthread_rwlock_trywrlock(&rw) != 0)
				;
		} else {
			pthread_rwlock_wrlock(&rw);
		}
		table[r][0]++;
		table[r][1]++;
		pthread_rwlock_unlock(&rw);
	}
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	long bad = 0;
	while (!done) {
		if (pthread_rwlock_tryrdlock(&rw) != 0)
			pthread_rwlock_rdlock(&rw);
		for (int r = 0; r < ROWS; r++)
			bad += table[r][0] != table[r][1];
		pthread_rwlock_unlock(&rw);
		/* glibc's default rwlock prefers readers: three readers
		 * re-locking back to back on two cores can starve the writers
		 * for minutes.  A short rest between reads lets them in. */
		struct timespec rest = { 0, 20000 };
		nanosleep(&rest, NULL);
	}
	pthread_mutex_lock(&torn_lock);
	torn += bad;
	pthread_mutex_unlock(&torn_lock);
	return NULL;
}

int main(void)
{
	table = calloc(ROWS, sizeof(*table));
	pthread_t w[WRITERS], r[READERS];
	for (int i = 0; i < READERS; i++)
		pthread_create(&r[i], NULL, reader, NULL);
	for (long i = 0; i < WRITERS; i++)
		pthread_create(&w[i], NULL, writer, (void *)(i + 1));
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	done = 1;
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	long total = 0;
	for (int i = 0; i < ROWS; i++)
		total += table[i][0];
	printf("writes %ld torn %ld\n", total, torn);
	free(table);
	return 0;
}
