/* SPDX-License-Identifier: BSD-3-Clause */
/* Blocking waits while holding a lock: a semaphore wait and a join under a
 * mutex (the runtime must not deadlock, and counts them), and a barrier
 * outside any lock (never delays an epoch).  Prints the same on every run. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static sem_t ready;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t barrier;
static long *counter;

static void *poster(void *arg)
{
	(void)arg;
	usleep(60000);
	sem_post(&ready);
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	usleep(60000);
	return NULL;
}

static void *at_barrier(void *arg)
{
	for (int i = 0; i < 5; i++) {
		pthread_mutex_lock(&m);
		*counter += (long)(intptr_t)arg;
		pthread_mutex_unlock(&m);
		pthread_barrier_wait(&barrier);
		usleep(5000);
	}
	return NULL;
}

int main(void)
{
	counter = calloc(1, sizeof(*counter));
	sem_init(&ready, 0, 0);
	pthread_t t;
	pthread_create(&t, NULL, poster, NULL);
	pthread_mutex_lock(&m);
	sem_wait(&ready);		/* blocks ~60 ms holding m */
	*counter += 100;
	pthread_mutex_unlock(&m);
	pthread_join(t, NULL);

	pthread_create(&t, NULL, sleeper, NULL);
	pthread_mutex_lock(&m);
	pthread_join(t, NULL);		/* blocks ~60 ms holding m */
	*counter += 100;
	pthread_mutex_unlock(&m);

	pthread_barrier_init(&barrier, NULL, 2);
	pthread_t a, b;
	pthread_create(&a, NULL, at_barrier, (void *)1);
	pthread_create(&b, NULL, at_barrier, (void *)2);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("counter %ld\n", *counter);
	return 0;
}
