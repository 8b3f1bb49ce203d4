/* SPDX-License-Identifier: BSD-3-Clause */
/* Producer/consumer over a bounded buffer with condition variables (no
 * pmthreads link; run natively and under LD_PRELOAD).  Prints the number of
 * items and their sum, which do not depend on the interleaving. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define CAP 16
#define PRODUCERS 3
#define CONSUMERS 3
#define ITEMS 40000 /* per producer */

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER, not_empty = PTHREAD_COND_INITIALIZER;
static long *buf;
static int head, count, producers_left = PRODUCERS;
static long consumed, sum;

static void *produce(void *arg)
{
	long base = (long)arg * ITEMS;
	for (long i = 0; i < ITEMS; i++) {
		pthread_mutex_lock(&m);
		while (count == CAP)
			pthread_cond_wait(&not_full, &m);
		buf[(head + count++) % CAP] = base + i;
		pthread_cond_signal(&not_empty);
		pthread_mutex_unlock(&m);
	}
	pthread_mutex_lock(&m);
	producers_left--;
	pthread_cond_broadcast(&not_empty);
	pthread_mutex_unlock(&m);
	return NULL;
}

static void *consume(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&m);
		while (count == 0 && producers_left > 0)
			pthread_cond_wait(&not_empty, &m);
		if (count == 0) {
			pthread_mutex_unlock(&m);
			return NULL;
		}
		long v = buf[head];
		head = (head + 1) % CAP;
		count--;
		consumed++;
		sum += v;
		pthread_cond_signal(&not_full);
		pthread_mutex_unlock(&m);
	}
}

int main(void)
{
	buf = calloc(CAP, sizeof(*buf));
	pthread_t p[PRODUCERS], c[CONSUMERS];
	for (long i = 0; i < PRODUCERS; i++)
		pthread_create(&p[i], NULL, produce, (void *)i);
	for (int i = 0; i < CONSUMERS; i++)
		pthread_create(&c[i], NULL, consume, NULL);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(p[i], NULL);
	for (int i = 0; i < CONSUMERS; i++)
		pthread_join(c[i], NULL);
	printf("consumed %ld sum %ld\n", consumed, sum);
	free(buf);
	return 0;
}
