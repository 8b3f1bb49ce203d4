/* SPDX-License-Identifier: BSD-3-Clause */
/* Many short-lived threads, each allocating, locking and exiting (half by
 * return, half by pthread_exit), some detached.  Prints the total. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAVES 50
#define PER_WAVE 8

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long total, detached_left;

static void *work(void *arg)
{
	long id = (long)arg;
	char *p = malloc(64 + (size_t)id);
	memset(p, (int)id, 64);
	pthread_mutex_lock(&m);
	total += id + p[0];
	pthread_mutex_unlock(&m);
	free(p);
	if (id % 2)
		pthread_exit(NULL);
	return NULL;
}

static void *detached_entry(void *arg)
{
	pthread_mutex_lock(&m);
	total += 1;
	detached_left--;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&m);
	return arg;
}

int main(void)
{
	for (int w = 0; w < WAVES; w++) {
		pthread_t t[PER_WAVE];
		for (long i = 0; i < PER_WAVE; i++)
			pthread_create(&t[i], NULL, work, (void *)(i + 1));
		for (int i = 0; i < PER_WAVE; i++)
			pthread_join(t[i], NULL);
		pthread_t d;
		pthread_mutex_lock(&m);
		detached_left++;
		pthread_mutex_unlock(&m);
		pthread_create(&d, NULL, detached_entry, NULL);
		pthread_detach(d);
	}
	pthread_mutex_lock(&m);
	while (detached_left > 0)
		pthread_cond_wait(&cv, &m);
	pthread_mutex_unlock(&m);
	printf("total %ld\n", total);
	return 0;
}
