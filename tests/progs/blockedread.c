/* SPDX-License-Identifier: BSD-3-Clause */
/* One thread is parked in read() on a pipe for the whole run while workers
 * lock and allocate for RUN_MS milliseconds; epochs must keep happening
 * (the test reads the stats).  Prints a result independent of timing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define RUN_MS 400
#define WORKERS 2

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static int pipefd[2];
static volatile int stop;

static void *parked(void *arg)
{
	(void)arg;
	char *buf = malloc(4096);
	ssize_t n = read(pipefd[0], buf, 4096); /* returns when main writes */
	printf("parked reader got %zd bytes: %.5s\n", n, buf);
	free(buf);
	return NULL;
}

static void *worker(void *arg)
{
	(void)arg;
	long mine = 0;
	while (!stop) {
		pthread_mutex_lock(&m);
		counter++;
		pthread_mutex_unlock(&m);
		mine++;
	}
	return (void *)mine;
}

int main(void)
{
	if (pipe(pipefd) != 0)
		return 1;
	pthread_t r, w[WORKERS];
	pthread_create(&r, NULL, parked, NULL);
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&w[i], NULL, worker, NULL);
	struct timespec t = { 0, RUN_MS * 1000000L };
	nanosleep(&t, NULL);
	stop = 1;
	long sum = 0;
	for (int i = 0; i < WORKERS; i++) {
		void *v;
		pthread_join(w[i], &v);
		sum += (long)v;
	}
	if (write(pipefd[1], "hello", 5) != 5)
		return 1;
	pthread_join(r, NULL);
	printf("counter matches: %s\n", sum == counter ? "yes" : "no");
	return 0;
}
