/* SPDX-License-Identifier: BSD-3-Clause */
/* Nested locking, hand-over-hand traversal of a linked list, trylock,
 * timedlock and spinlocks, from several threads.  Prints the list's sum and
 * the counters, which do not depend on the interleaving. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NODES 32
#define THREADS 4
#define ROUNDS 3000

struct node {
	pthread_mutex_t lock;
	long value;
	struct node *next;
};

static struct node *list;
static pthread_mutex_t outer = PTHREAD_MUTEX_INITIALIZER, inner = PTHREAD_MUTEX_INITIALIZER;
static pthread_spinlock_t spin;
static long nested, spun, tried;

static void *work(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		/* hand over hand: add 1 to every node */
		pthread_mutex_lock(&list->lock);
		for (struct node *n = list; n != NULL;) {
			n->value++;
			struct node *next = n->next;
			if (next != NULL)
				pthread_mutex_lock(&next->lock);
			pthread_mutex_unlock(&n->lock);
			n = next;
		}
		/* nested */
		pthread_mutex_lock(&outer);
		pthread_mutex_lock(&inner);
		nested++;
		pthread_mutex_unlock(&inner);
		pthread_mutex_unlock(&outer);
		/* trylock until it works, a timed lock */
		while (pthread_mutex_trylock(&inner) == EBUSY)
			;
		tried++;
		pthread_mutex_unlock(&inner);
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += 5;
		if (pthread_mutex_timedlock(&outer, &t) != 0)
			abort();
		pthread_spin_lock(&spin);
		spun++;
		pthread_spin_unlock(&spin);
		pthread_mutex_unlock(&outer);
	}
	return NULL;
}

int main(void)
{
	pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
	for (int i = 0; i < NODES; i++) {
		struct node *n = malloc(sizeof(*n));
		pthread_mutex_init(&n->lock, NULL);
		n->value = i;
		n->next = list;
		list = n;
	}
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, work, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	long sum = 0;
	while (list != NULL) {
		struct node *n = list;
		sum += n->value;
		list = n->next;
		pthread_mutex_destroy(&n->lock);
		free(n);
	}
	printf("sum %ld nested %ld tried %ld spun %ld\n", sum, nested, tried, spun);
	return 0;
}
