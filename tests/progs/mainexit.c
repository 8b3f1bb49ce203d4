/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * main calls pthread_exit while its threads still work: the process must end
 * when the last of them does (exit status 0, atexit handlers run), under the
 * preload as natively -- the runtime's own threads must not keep it alive.
 * Two joinable threads and one detached thread update a malloc'd ledger
 * under a mutex; the last one to finish reports it from an atexit handler.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 200

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long *ledger;

static void nap_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000L };
	nanosleep(&ts, NULL);
}

static void *worker(void *arg)
{
	long id = (long)arg;
	for (int i = 0; i < ROUNDS; i++) {
		pthread_mutex_lock(&lock);
		ledger[id]++;
		ledger[3]++;
		pthread_mutex_unlock(&lock);
		if (i % 20 == 0)
			nap_ms(5);
	}
	return NULL;
}

static void report(void)
{
	pthread_mutex_lock(&lock);
	printf("at exit: %ld %ld %ld total %ld\n", ledger[0], ledger[1], ledger[2], ledger[3]);
	pthread_mutex_unlock(&lock);
	fflush(stdout);
}

int main(void)
{
	ledger = calloc(4, sizeof(long));
	if (ledger == NULL || atexit(report) != 0)
		return 1;
	pthread_t th[3];
	pthread_attr_t detached;
	pthread_attr_init(&detached);
	pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
	for (long i = 0; i < 3; i++)
		if (pthread_create(&th[i], i == 2 ? &detached : NULL, worker, (void *)i) != 0)
			return 1;
	pthread_attr_destroy(&detached);
	printf("main: threads started, leaving with pthread_exit\n");
	fflush(stdout);
	pthread_exit(NULL);
}
