/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_fill -- a program that writes a lot of memory: the issue-47
 * reproducer as a benchmark's subject.  Built without any link to
 * pmthreads: run natively, or under `pmthreads run --heap malloc` (every
 * malloc persistent), and compare the whole processes.
 *
 *   bench_fill MIB [ROUNDS]
 *
 * mallocs MIB MiB and, inside one critical section, writes every page of it;
 * then ROUNDS more times (default 0), each inside a critical section,
 * rewrites every 64-byte line of every page (the whole region changes, as a
 * program streaming through buffers does), calling pmthreads_sync() after
 * each where the runtime is loaded (a weak reference: natively it is not),
 * so that each round is one epoch of whole pages.  Prints
 *   fill_s=...  rounds_s=...  checksum=...
 * (wall time of the fill, of the rounds; a checksum of the last round).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int pmthreads_sync(void) __attribute__((weak));

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: bench_fill MIB [ROUNDS]\n");
		return 2;
	}
	size_t len = (size_t)strtoull(argv[1], NULL, 10) << 20;
	long rounds = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
	if (len == 0 || rounds < 0) {
		fprintf(stderr, "bench_fill: MIB must be > 0 and ROUNDS >= 0\n");
		return 2;
	}
	double t0 = now();
	pthread_mutex_lock(&lock);
	unsigned char *p = malloc(len);
	if (p == NULL) {
		pthread_mutex_unlock(&lock);
		fprintf(stderr, "bench_fill: cannot allocate %zu bytes\n", len);
		return 1;
	}
	for (size_t i = 0; i < len; i += 4096)
		memset(p + i, (int)((i >> 12) | 1), len - i < 4096 ? len - i : 4096);
	pthread_mutex_unlock(&lock);
	double t1 = now();
	for (long r = 1; r <= rounds; r++) {
		pthread_mutex_lock(&lock);
		for (size_t i = 0; i + 8 <= len; i += 64) {
			uint64_t v = (uint64_t)r * 0x9e3779b97f4a7c15ULL ^ i;
			memcpy(p + i, &v, 8);
		}
		pthread_mutex_unlock(&lock);
		if (pmthreads_sync != NULL && pmthreads_sync() != 0) {
			fprintf(stderr, "bench_fill: pmthreads_sync failed\n");
			return 1;
		}
	}
	double t2 = now();
	uint64_t ck = 1469598103934665603ULL;
	for (size_t i = 0; i < len; i += 4096)
		ck = (ck ^ p[i]) * 1099511628211ULL;
	printf("fill_s=%.6f rounds_s=%.6f checksum=%016llx\n", t1 - t0, t2 - t1,
	       (unsigned long long)ck);
	return 0;
}
