/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kmeans -- a Phoenix-style iterative job written for NVthreads: its means,
 * its cluster assignment and the number of iterations done live in nvmalloc
 * objects; after a crash it recovers them (nvmalloc, then nvrecover) and
 * resumes from the iteration it had reached.  Like Phoenix's kmeans in
 * NVthreads' tree it has a global `bool crashed` of its own.  Built as C and
 * as C++ (kmeans.cpp).
 *
 *   kmeans ITERATIONS [DIE]   prints "resuming at iteration I" or
 *                       "starting", "iteration I done" once each iteration
 *                       is durable, and at the end "result HEX" (a hash of
 *                       the means).  DIE: SIGKILL itself halfway through
 *                       the iteration after iteration DIE is done.
 *
 * Points are generated from a fixed seed, so a run that is killed and
 * restarted must end with the result of one that was not.
 */
#include "nvrecovery.h"

#include <signal.h>
#include <stdint.h>

#define NUM_POINTS 4000
#define NUM_MEANS 6
#define DIM 3
#define GRID 1000
#define NUM_THREADS 2

bool crashed;	/* the program's own, as in Phoenix kmeans */

static pthread_mutex_t gm = PTHREAD_MUTEX_INITIALIZER;
static uint64_t points[NUM_POINTS * DIM];
static uint64_t *means, *clusters, *iterations;
static uint64_t die_in = UINT64_MAX, current;

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 33;
}

static uint64_t dist2(const uint64_t *a, const uint64_t *b)
{
	uint64_t d = 0;
	for (int k = 0; k < DIM; k++) {
		int64_t x = (int64_t)a[k] - (int64_t)b[k];
		d += (uint64_t)(x * x);
	}
	return d;
}

/* Assign each point of the thread's share to its nearest mean. */
static void *assign(void *arg)
{
	long t = (long)arg;
	for (long i = t; i < NUM_POINTS; i += NUM_THREADS) {
		uint64_t best = UINT64_MAX, which = 0;
		for (uint64_t m = 0; m < NUM_MEANS; m++) {
			uint64_t d = dist2(&points[i * DIM], &means[m * DIM]);
			if (d < best) {
				best = d;
				which = m;
			}
		}
		clusters[i] = which;
		if (current == die_in && t == 0 && i >= NUM_POINTS / 2)
			raise(SIGKILL);	/* a crash in the middle of an iteration */
	}
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t total = argc > 1 ? strtoull(argv[1], NULL, 10) : 10, start_at = 0;
	if (argc > 2)
		die_in = strtoull(argv[2], NULL, 10) + 1;
	uint64_t seed = 42;
	for (int i = 0; i < NUM_POINTS * DIM; i++)
		points[i] = lcg(&seed) % GRID;

	crashed = isCrashed();
	means = (uint64_t *)nvmalloc(sizeof(uint64_t) * NUM_MEANS * DIM, (char *)"means");
	clusters = (uint64_t *)nvmalloc(sizeof(uint64_t) * NUM_POINTS, (char *)"clusters");
	iterations = (uint64_t *)nvmalloc(sizeof(uint64_t), (char *)"iterations");
	if (means == NULL || clusters == NULL || iterations == NULL) {
		fprintf(stderr, "kmeans: nvmalloc: %s\n", pmthreads_errormsg());
		return 1;
	}
	if (crashed) {
		nvrecover(means, sizeof(uint64_t) * NUM_MEANS * DIM, (char *)"means");
		nvrecover(clusters, sizeof(uint64_t) * NUM_POINTS, (char *)"clusters");
		nvrecover(iterations, sizeof(uint64_t), (char *)"iterations");
		start_at = *iterations;
		printf("resuming at iteration %llu\n", (unsigned long long)start_at);
	} else {
		memcpy(means, points, sizeof(uint64_t) * NUM_MEANS * DIM);
		memset(clusters, 0xff, sizeof(uint64_t) * NUM_POINTS);
		*iterations = 0;
		printf("starting\n");
	}
	fflush(stdout);

	for (uint64_t it = start_at; it < total; it++) {
		current = it + 1;
		pthread_t tid[NUM_THREADS];
		for (long t = 0; t < NUM_THREADS; t++)
			pthread_create(&tid[t], NULL, assign, (void *)t);
		for (int t = 0; t < NUM_THREADS; t++)
			pthread_join(tid[t], NULL);
		uint64_t sum[NUM_MEANS * DIM], count[NUM_MEANS];
		memset(sum, 0, sizeof(sum));
		memset(count, 0, sizeof(count));
		for (int i = 0; i < NUM_POINTS; i++) {
			count[clusters[i]]++;
			for (int k = 0; k < DIM; k++)
				sum[clusters[i] * DIM + k] += points[i * DIM + k];
		}
		/* The new means and the iteration count change together: one
		 * critical section, made durable before it is reported. */
		pthread_mutex_lock(&gm);
		for (int m = 0; m < NUM_MEANS; m++)
			for (int k = 0; k < DIM; k++)
				if (count[m] != 0)
					means[m * DIM + k] = sum[m * DIM + k] / count[m];
		*iterations = it + 1;
		pthread_mutex_unlock(&gm);
		nvcheckpoint();
		printf("iteration %llu done\n", (unsigned long long)(it + 1));
		fflush(stdout);
	}
	uint64_t h = 0xcbf29ce484222325ULL;
	for (int i = 0; i < NUM_MEANS * DIM; i++)
		h = (h ^ means[i]) * 0x100000001b3ULL;
	printf("result %016llx after %llu iterations\n", (unsigned long long)h,
	       (unsigned long long)*iterations);
	return 0;
}
