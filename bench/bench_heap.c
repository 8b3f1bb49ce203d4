/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_heap -- throughput of the persistent allocator (heap_malloc /
 * heap_free, what nvmalloc/nvfree reduce to) against glibc malloc/free,
 * measured in the same run, with 1 and 2 threads and three size mixes.
 *
 * Each thread keeps a window of live blocks and repeatedly frees one and
 * allocates a replacement of a pre-drawn size (writing its first byte), so
 * the allocator sees a steady state with reuse rather than a pure bump.
 * Prints pairs (one free + one allocation) per second and the ratio
 * heap / glibc (higher is better for the heap): glibc and heap runs
 * alternate (ROUNDS pairs, which one goes first alternating too), the rates
 * are medians and the ratio is the median of the per-pair ratios, with the
 * smallest and largest.
 * Every heap operation includes its fase_enter/fase_leave (quiesce/gate.c); no
 * epoch thread runs, so this is the allocator's cost, not persistence's.
 *
 * Usage: bench_heap [pairs-per-thread-in-thousands]   (default 2000)
 */
#include "heap/heap.h"
#include "prim/prim.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_median.h"

#define HEAP_LEN (4ULL << 30)
#define NSIZES 4096

struct mix {
	const char *name;
	size_t lo, hi;		/* sizes uniform in [lo, hi] */
	unsigned window;	/* live blocks per thread */
	unsigned scale;		/* divide the pair count by this */
};

static const struct mix mixes[] = {
	{ "16-256 B", 16, 256, 1024, 1 },
	{ "16 B-4 KiB", 16, 4096, 1024, 2 },
	{ "64 KiB", 65536, 65536, 128, 10 },
};

struct job {
	const struct mix *mix;
	bool use_heap;
	unsigned long pairs;
	unsigned seed;
	pthread_barrier_t *start;
	uint64_t ns;
};

static void *run(void *arg)
{
	struct job *j = arg;
	size_t sizes[NSIZES];
	unsigned s = j->seed;
	for (unsigned i = 0; i < NSIZES; i++) {
		s = s * 1103515245u + 12345u;
		sizes[i] = j->mix->lo + (s >> 8) % (j->mix->hi - j->mix->lo + 1);
	}
	void **win = calloc(j->mix->window, sizeof(void *));
	unsigned w = j->mix->window;
	for (unsigned i = 0; i < w; i++) {
		win[i] = j->use_heap ? heap_malloc(sizes[i % NSIZES]) : malloc(sizes[i % NSIZES]);
		*(volatile char *)win[i] = 1;
	}
	pthread_barrier_wait(j->start);
	uint64_t t0 = prim_now_ns();
	unsigned k = 0;
	if (j->use_heap) {
		for (unsigned long i = 0; i < j->pairs; i++) {
			unsigned slot = (unsigned)(i * 7919u) % w;
			heap_free(win[slot]);
			win[slot] = heap_malloc(sizes[k++ % NSIZES]);
			*(volatile char *)win[slot] = 1;
		}
	} else {
		for (unsigned long i = 0; i < j->pairs; i++) {
			unsigned slot = (unsigned)(i * 7919u) % w;
			free(win[slot]);
			win[slot] = malloc(sizes[k++ % NSIZES]);
			*(volatile char *)win[slot] = 1;
		}
	}
	j->ns = prim_now_ns() - t0;
	for (unsigned i = 0; i < w; i++)
		j->use_heap ? heap_free(win[i]) : free(win[i]);
	if (j->use_heap)
		heap_thread_exit();
	free(win);
	return NULL;
}

/* pairs per second over all threads, one run */
static double measure(const struct mix *m, bool use_heap, unsigned nthreads, unsigned long pairs,
		      unsigned rep)
{
	pthread_t t[2];
	struct job jobs[2];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, nthreads);
	for (unsigned i = 0; i < nthreads; i++) {
		jobs[i] = (struct job){ m, use_heap, pairs, 17u + i * 7u + rep, &start, 0 };
		pthread_create(&t[i], NULL, run, &jobs[i]);
	}
	uint64_t ns = 0;
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		if (jobs[i].ns > ns)
			ns = jobs[i].ns;
	}
	pthread_barrier_destroy(&start);
	return (double)pairs * nthreads / ((double)ns / 1e9);
}

#define ROUNDS 5

int main(int argc, char **argv)
{
	unsigned long kpairs = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
	void *base = prim_map_any(HEAP_LEN);
	if (base == NULL || heap_init(base, HEAP_LEN, true) != 0) {
		fprintf(stderr, "bench_heap: cannot set up a %llu-byte heap\n", HEAP_LEN);
		return 1;
	}
	printf("%u paired rounds (glibc and heap alternating); medians, ratio = median of the "
	       "per-round ratios [min-max]\n", ROUNDS);
	printf("%-12s %7s %16s %16s %8s %11s\n", "sizes", "threads", "glibc pairs/s", "heap pairs/s",
	       "heap/glibc", "range");
	for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++) {
		for (unsigned nt = 1; nt <= 2; nt++) {
			unsigned long pairs = kpairs * 1000 / mixes[i].scale;
			double g[ROUNDS], h[ROUNDS], ratio[ROUNDS];
			for (unsigned r = 0; r < ROUNDS; r++) {
				if (r % 2 == 0) {
					g[r] = measure(&mixes[i], false, nt, pairs, r);
					h[r] = measure(&mixes[i], true, nt, pairs, r);
				} else {
					h[r] = measure(&mixes[i], true, nt, pairs, r);
					g[r] = measure(&mixes[i], false, nt, pairs, r);
				}
				ratio[r] = h[r] / g[r];
			}
			double rm = median(ratio, ROUNDS);
			printf("%-12s %7u %16.3e %16.3e %8.2f %5.2f-%.2f\n", mixes[i].name, nt,
			       median(g, ROUNDS), median(h, ROUNDS), rm, ratio[0], ratio[ROUNDS - 1]);
			fflush(stdout);
		}
	}
	struct heap_stats st;
	heap_get_stats(&st);
	printf("heap high-water mark after the runs: %.1f MiB\n", (double)st.bytes_mapped / (1 << 20));
	prim_unmap(base, HEAP_LEN);
	return 0;
}
