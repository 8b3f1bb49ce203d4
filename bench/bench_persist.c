/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_persist -- what an epoch and a recovery cost, against the naive
 * scheme measured in the same run.
 *
 *   persist    persist_epoch with N = 1, 64, 4096 dirty pages, each with 1
 *              line, 25 % or 100 % of its 64-byte lines changed: time per
 *              page, fences per epoch, NVM bytes written vs bytes changed.
 *              The same lines change every epoch (a hot field), so the copy
 *              being overwritten (two epochs old) differs in exactly those.
 *              Baseline: memcpy of each whole dirty page to a mapping of a
 *              file beside the pool, then one pmem_persist (pmem) or
 *              pmem_msync (ordinary file) per page -- a fence per page.
 *   sums       the checksum of every page copy (pool.h's sum table): the
 *              same epochs as persist (1 line changed per page),
 *              alternately with the checksums skipped (the test hook
 *              PERSIST_FAULT_SKIP_SUMS) and made, pair by pair: the median
 *              extra time per page.
 *   pipeline   the real epoch pipeline (epoch.c) over a real tracked heap
 *              of PIPELINE_HEAP_PAGES pages: N = 1 ... 10,000 dirty pages
 *              spread over it (one line changed in each), epoch_pause then
 *              epoch_writeback while a thread of the "program" keeps
 *              writing a tenth of those pages, the same ones every epoch
 *              (so they conflict with the live read-back until they are
 *              hot and copied in the pause).  Per tracker, the live
 *              pipeline and the copy-in-pause one alternate epoch by epoch
 *              in one run, each pipeline kept open across its epochs (its
 *              hot pages and carried attempts are state): pause p50/p99
 *              (what the program waits for beyond the gate), write-back
 *              time, pages copied in the pause, conflicts, write-backs
 *              carried over.
 *   recovery   pool_open + recovery_restore_image of a pool of CAPACITY (default
 *              1 GiB) with 25 % of its pages written (every 4th page; half
 *              of them in two epochs, so both copies are live) and a sparse
 *              one with 1 %, scaled to per GiB of pool.  First with the
 *              file's page cache dropped (POSIX_FADV_DONTNEED: real reads on
 *              an ordinary file; no effect on tmpfs), then again warm.
 *              Baseline: memcpy of the same pages from the pool's mapping
 *              into fresh memory.
 *   restore    restore.h's two paths as the runtime takes them, for heaps
 *              of 100 MiB and 1 GiB in use (every page persisted): eager
 *              copy / lazy / lazy without the background pass, interleaved
 *              round by round, medians of RESTORE_ROUNDS: time to a usable
 *              heap (restore_open: invalidation, scan, tracker attach, and
 *              the copy or the userfaultfd registration), the time to read
 *              one byte of every page afterwards, and for lazy the time
 *              until the background pass completed (the pool is open
 *              already; the recovery section times pool_open).
 *
 * Usage: bench_persist DIR [CAPACITY [SECTION...]]  (persist, sums, pipeline,
 * recovery, restore; default all)
 *   DIR on /dev/shm with PMEM_IS_PMEM_FORCE=1 exercises the pmem path
 *   (cache-line flushes); DIR on an ordinary file system the msync path.
 *   The backend used is printed.  Scratch files are removed at exit.
 *   PMTHREADS_NVM_LATENCY_NS=N adds N ns per written 64-byte line to both
 *   the pool and the naive baseline (a model of NVM write cost: DRAM
 *   standing in for pmem makes every written byte nearly free). */
#include "base/config.h"
#include "epoch/epoch.h"
#include "base/log.h"
#include "persist/persist.h"
#include "recovery/recovery.h"
#include "persist/pool.h"
#include "prim/prim.h"
#include "recovery/restore.h"
#include "track/tracker.h"

#include <fcntl.h>
#include <libpmem.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PERSIST_POOL_PAGES 4096u	/* the largest dirty set */
#define BENCH_SHADOW_BASE 0x500000000000ULL
#define PIPELINE_HEAP_PAGES 40000u	/* 156 MiB: room to scatter 10,000 */

static size_t page_size;
static char dir[PATH_MAX];
static unsigned latency_ns;	/* PMTHREADS_NVM_LATENCY_NS, per written line */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

static void fill_random(unsigned char *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	for (size_t i = 0; i + 8 <= len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
}

static void die(const char *what)
{
	fprintf(stderr, "bench_persist: %s: %s\n", what, err_get());
	exit(1);
}

static struct pool *open_pool(const char *path, uint64_t capacity, bool create)
{
	struct pool_open_options o;
	memset(&o, 0, sizeof(o));
	o.path = path;
	o.capacity = capacity;
	o.shadow_base = BENCH_SHADOW_BASE;
	o.creator = "bench_persist";
	o.create = create;
	o.nvm = NVM_AUTO;
	o.latency_ns = latency_ns;
	struct pool *p;
	if (pool_open(&p, &o) != 0)
		die("pool_open");
	return p;
}

/* ---- persist ---------------------------------------------------------- */

struct change {
	const char *name;
	unsigned lines;		/* changed lines per page (of page_size / 64) */
};

/* The same emulated write cost as the nvm layer's: busy-wait per line. */
static void emulate_latency(size_t lines)
{
	if (latency_ns == 0)
		return;
	uint64_t end = prim_now_ns() + (uint64_t)latency_ns * lines;
	while (prim_now_ns() < end)
		prim_cpu_relax();
}

/* The naive scheme: every dirty page copied whole and made durable on its
 * own, one fence per page. */
static uint64_t naive_epoch(unsigned char *map, bool is_pmem, const unsigned char *shadow,
			    unsigned npages)
{
	uint64_t t0 = prim_now_ns();
	for (unsigned i = 0; i < npages; i++) {
		unsigned char *dst = map + (size_t)i * page_size;
		memcpy(dst, shadow + (size_t)i * page_size, page_size);
		if (is_pmem)
			pmem_persist(dst, page_size);
		else
			pmem_msync(dst, page_size);
		emulate_latency(page_size / NVM_LINE);
	}
	return prim_now_ns() - t0;
}

/* Change `lines` evenly spread lines of each of the first npages pages:
 * every byte of each such line gets a new value. */
/* In each of the first npages pages, `words` 8-byte words of `lines` lines
 * spread over it get new bytes. */
static void change_words(unsigned char *shadow, unsigned npages, unsigned lines, unsigned words,
			 unsigned rep)
{
	const unsigned per_page = (unsigned)(page_size / NVM_LINE);
	for (unsigned i = 0; i < npages; i++)
		for (unsigned k = 0; k < lines; k++) {
			unsigned line = (unsigned)((uint64_t)k * per_page / lines);
			memset(shadow + (size_t)i * page_size + (size_t)line * NVM_LINE,
			       (int)(rep * 7 + 1), 8 * (size_t)words);
		}
}

static void change_lines(unsigned char *shadow, unsigned npages, unsigned lines, unsigned rep)
{
	change_words(shadow, npages, lines, NVM_LINE / 8, rep);
}

static void bench_persist_epochs(void)
{
	char path[PATH_MAX + 32], naive_path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/bench_persist.pool", dir);
	snprintf(naive_path, sizeof(naive_path), "%s/bench_persist.naive", dir);
	unlink(path);
	struct pool *p = open_pool(path, (uint64_t)PERSIST_POOL_PAGES * page_size, true);
	printf("backend: %s  (pool %s)\n\n", nvm_name(p->nvm), path);

	size_t len = (size_t)PERSIST_POOL_PAGES * page_size;
	unsigned char *shadow = prim_map_any(len);
	if (shadow == NULL)
		die("shadow memory");
	fill_random(shadow, len, 1);
	uint64_t *pages = malloc(PERSIST_POOL_PAGES * sizeof(*pages));
	for (unsigned i = 0; i < PERSIST_POOL_PAGES; i++)
		pages[i] = i;
	/* Both copies of every page equal to the shadow. */
	persist_epoch(p, shadow, pages, PERSIST_POOL_PAGES, NULL);
	persist_epoch(p, shadow, pages, PERSIST_POOL_PAGES, NULL);

	size_t naive_len;
	int naive_is_pmem;
	unsigned char *naive = pmem_map_file(naive_path, len, PMEM_FILE_CREATE, 0600, &naive_len,
					     &naive_is_pmem);
	if (naive == NULL) {
		perror("bench_persist: pmem_map_file");
		exit(1);
	}
	memset(naive, 0, len);
	pmem_msync(naive, len);

	static const unsigned dirty_counts[] = { 1, 64, 4096 };
	const unsigned per_page = (unsigned)(page_size / NVM_LINE);
	const struct change changes[] = {
		{ "1 line", 1 },
		{ "25 %", per_page / 4 },
		{ "100 %", per_page },
	};
	printf("persist: median of the epochs; bytes changed = every byte of the changed lines;\n"
	       "naive = memcpy of each whole page + one %s per page\n\n",
	       naive_is_pmem ? "pmem_persist" : "pmem_msync");
	printf("%6s %7s | %10s %9s %7s %11s %11s %6s | %10s %7s %11s | %7s\n", "dirty", "changed",
	       "epoch", "per page", "fences", "NVM bytes", "bytes", "writ./", "naive", "naive",
	       "naive", "speedup");
	printf("%6s %7s | %10s %9s %7s %11s %11s %6s | %10s %7s %11s | %7s\n", "pages", "/page",
	       "time", "", "/epoch", "written", "changed", "chg.", "per page", "fences",
	       "bytes", "");
	for (size_t d = 0; d < sizeof(dirty_counts) / sizeof(dirty_counts[0]); d++) {
		unsigned n = dirty_counts[d];
		unsigned reps = n == 1 ? 301 : n == 64 ? 101 : 15;
		uint64_t *t = malloc(reps * sizeof(*t)), *tn = malloc(reps * sizeof(*tn));
		/* naive / epoch of the same rep, x1000: the speedup of a pair */
		uint64_t *sp = malloc(reps * sizeof(*sp));
		for (size_t c = 0; c < sizeof(changes) / sizeof(changes[0]); c++) {
			struct persist_stats total;
			memset(&total, 0, sizeof(total));
			uint64_t changed_bytes = (uint64_t)n * changes[c].lines * NVM_LINE;
			/* Two warm-up epochs bring the copy being overwritten in
			 * step with this pattern of changes. */
			for (unsigned r = 0; r < reps + 2; r++) {
				change_lines(shadow, n, changes[c].lines, r + (unsigned)c * 1000);
				struct persist_stats st;
				memset(&st, 0, sizeof(st));
				uint64_t t0 = prim_now_ns();
				persist_epoch(p, shadow, pages, n, &st);
				uint64_t dt = prim_now_ns() - t0;
				uint64_t dn = naive_epoch(naive, naive_is_pmem, shadow, n);
				if (r < 2)
					continue;
				t[r - 2] = dt;
				tn[r - 2] = dn;
				sp[r - 2] = dt ? dn * 1000 / dt : 0;
				persist_stats_add(&total, &st);
			}
			double epoch_us = (double)median(t, reps) / 1e3;
			double naive_us = (double)median(tn, reps) / 1e3;
			double written = (double)total.bytes_written / reps;
			printf("%6u %7s | %8.1fus %7.2fus %7.1f %11.0f %11llu %6.2f | %8.2fus %7u %11llu | "
			       "%6.1fx\n",
			       n, changes[c].name, epoch_us, epoch_us / n, (double)total.fences / reps,
			       written, (unsigned long long)changed_bytes, written / (double)changed_bytes,
			       naive_us / n, n, (unsigned long long)n * page_size,
			       (double)median(sp, reps) / 1000);
		}
		free(t);
		free(tn);
		free(sp);
	}
	pmem_unmap(naive, naive_len);
	unlink(naive_path);
	prim_unmap(shadow, len);
	free(pages);
	pool_close(p);
	unlink(path);
}

/* ---- sums -------------------------------------------------------------- */

static void bench_sums(void)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/bench_sums.pool", dir);
	unlink(path);
	struct pool *p = open_pool(path, (uint64_t)PERSIST_POOL_PAGES * page_size, true);
	size_t len = (size_t)PERSIST_POOL_PAGES * page_size;
	unsigned char *shadow = prim_map_any(len);
	if (shadow == NULL)
		die("shadow memory");
	fill_random(shadow, len, 2);
	uint64_t *pages = malloc(PERSIST_POOL_PAGES * sizeof(*pages));
	for (unsigned i = 0; i < PERSIST_POOL_PAGES; i++)
		pages[i] = i;
	persist_epoch(p, shadow, pages, PERSIST_POOL_PAGES, NULL);
	persist_epoch(p, shadow, pages, PERSIST_POOL_PAGES, NULL);
	printf("\nsums (%s): epochs of N dirty pages, W words of L lines of each changed, "
	       "alternately with the page\nchecksums skipped (PERSIST_FAULT_SKIP_SUMS) and made (updated from the "
	       "changed lines); medians of %s\n\n", nvm_name(p->nvm), "the pairs");
	printf("%6s %3s %2s | %10s %10s | %12s\n", "dirty", "L", "W", "no sums", "with sums",
	       "extra/page");
	/* 13 lines, a word or two of each: what examples/bank changes per dirty
	 * page and epoch. */
	static const unsigned dirty_counts[] = { 1, 16, 64, 1024, 1024, 1024, 1024 };
	static const unsigned changed[] = { 1, 1, 1, 1, 13, 13, 64 };
	static const unsigned words_changed[] = { 8, 8, 8, 8, 1, 2, 8 };
	for (size_t d = 0; d < sizeof(dirty_counts) / sizeof(dirty_counts[0]); d++) {
		unsigned n = dirty_counts[d], lines = changed[d], words = words_changed[d];
		unsigned reps = n >= 1024 ? 31 : 201;
		uint64_t *t0 = malloc(reps * sizeof(uint64_t)), *t1 = malloc(reps * sizeof(uint64_t));
		int64_t *diff = malloc(reps * sizeof(int64_t));
		/* Two warm-up pairs: both copies of every page get a checksum
		 * entry of each kind once. */
		for (unsigned r = 0; r < reps + 2; r++) {
			uint64_t dt[2];
			for (int summed = 0; summed < 2; summed++) {
				persist_set_fault(summed ? PERSIST_FAULT_NONE : PERSIST_FAULT_SKIP_SUMS);
				change_words(shadow, n, lines, words, 2 * r + (unsigned)summed);
				uint64_t a = prim_now_ns();
				persist_epoch(p, shadow, pages, n, NULL);
				dt[summed] = prim_now_ns() - a;
			}
			if (r < 2)
				continue;
			t0[r - 2] = dt[0];
			t1[r - 2] = dt[1];
			diff[r - 2] = (int64_t)dt[1] - (int64_t)dt[0];
		}
		/* median of the signed differences */
		for (unsigned i = 1; i < reps; i++)
			for (unsigned j = i; j > 0 && diff[j - 1] > diff[j]; j--) {
				int64_t x = diff[j];
				diff[j] = diff[j - 1];
				diff[j - 1] = x;
			}
		printf("%6u %3u %2u | %8.2fus %8.2fus | %10.3fus\n", n, lines, words,
		       (double)median(t0, reps) / 1e3,
		       (double)median(t1, reps) / 1e3, (double)diff[reps / 2] / 1e3 / n);
		free(t0);
		free(t1);
		free(diff);
	}
	persist_set_fault(PERSIST_FAULT_NONE);

	/* What restore, check and a copy's first write pay: the whole-page
	 * sum, against format 4's XXH3 of the page. */
	uint64_t best[2] = { UINT64_MAX, UINT64_MAX }, sink = 0;
	for (int r = 0; r < 5; r++)
		for (int f = 0; f < 2; f++) {
			uint64_t a = prim_now_ns();
			for (unsigned i = 0; i < PERSIST_POOL_PAGES; i++)
				sink += f == 0 ? pool_page_sum(p, i, shadow + (size_t)i * page_size)
					       : pool_page_sum_v4(p->uuid, page_size, i,
								  shadow + (size_t)i * page_size);
			uint64_t dt = prim_now_ns() - a;
			if (dt < best[f])
				best[f] = dt;
		}
	printf("\nwhole-page sum (restore, check, a copy's first write), %u pages in cache, best of 5:\n"
	       "  %.3f us per page; format 4's XXH3-64 of the page %.3f us (%s)\n",
	       PERSIST_POOL_PAGES, (double)best[0] / 1e3 / PERSIST_POOL_PAGES,
	       (double)best[1] / 1e3 / PERSIST_POOL_PAGES, sink != 0 ? "sums made" : "-");
	prim_unmap(shadow, len);
	free(pages);
	pool_close(p);
	unlink(path);
}

/* ---- pipeline ---------------------------------------------------------- */

struct rewriter {
	unsigned char *heap;
	const uint64_t *pages;	/* the dirty set */
	unsigned n;
	atomic_bool run;
	atomic_bool stop;
};

/* The program running during the write-back: rewrites every tenth page of
 * the dirty set, again and again, until told to stop. */
static void *rewrite_main(void *arg)
{
	struct rewriter *w = arg;
	unsigned round = 0;
	while (!atomic_load(&w->stop)) {
		if (!atomic_load(&w->run)) {
			/* Asleep, like a thread waiting at the gate: a spinning
			 * thread would turn every TLB flush of the collection
			 * into an IPI to its core. */
			prim_sleep_ns(20000);
			continue;
		}
		for (unsigned k = 0; k < w->n && atomic_load(&w->run); k += 10)
			w->heap[w->pages[k] * page_size + 64 + round % 64] = (unsigned char)round;
		round++;
	}
	return NULL;
}

static uint64_t percentile99(uint64_t *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	unsigned i = (n * 99 + 99) / 100;
	return v[i > 0 ? i - 1 : 0];
}

struct pipe_mode {
	const char *name;
	bool copy_in_pause;
	uint64_t *pause, *wb;
	uint64_t saved;
	uint64_t conflicts;	/* pages read live and rewritten meanwhile */
	unsigned carried;	/* write-backs not published */
};

static void bench_pipeline_tracker(enum tracker_kind kind)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/bench_pipeline.pool", dir);
	unlink(path);
	struct pool *p = open_pool(path, (uint64_t)PIPELINE_HEAP_PAGES * page_size, true);
	size_t len = (size_t)PIPELINE_HEAP_PAGES * page_size;
	unsigned char *heap = shadow_reserve(p->shadow_base, len);
	if (heap == NULL)
		die("shadow_reserve");
	struct tracker *t;
	if (tracker_open(&t, kind, heap, len) != 0)
		die("tracker_open");
	/* The whole heap resident and persisted once, as in a program that
	 * has been running for a while. */
	fill_random(heap, len, 3);
	struct epoch_pipeline *ep;
	struct epoch_options first = { .copy_in_pause = true };
	if (epoch_pipeline_open(&ep, p, t, heap, NULL, &first) != 0)
		die("epoch_pipeline_open");
	epoch_writeback(ep, epoch_pause(ep, false), NULL);
	epoch_pipeline_close(ep);

	const unsigned reps = 21;
	printf("\npipeline, tracker %s, heap %u pages (%u MiB): %u epochs per mode and size, "
	       "the modes alternating;\na thread rewrites a tenth of the dirty pages during each "
	       "write-back\n\n", tracker_name(t), PIPELINE_HEAP_PAGES, (unsigned)(len >> 20), reps);
	printf("%6s | %-28s | %9s %9s | %10s %9s | %8s %9s %7s\n", "dirty", "mode", "pause", "pause",
	       "write-back", "per page", "copied", "conflicts", "carried");
	printf("%6s | %-28s | %9s %9s | %10s %9s | %8s %9s %7s\n", "pages", "", "p50", "p99", "p50", "",
	       "/epoch", "/epoch", "");

	struct pipe_mode modes[2] = { { .name = "live (hot pages in pause)", .copy_in_pause = false },
				      { .name = "copy in pause (baseline)", .copy_in_pause = true } };
	static const unsigned counts[] = { 1, 64, 1000, 4096, 10000 };
	uint64_t *pages = malloc(10000 * sizeof(*pages));
	struct rewriter w = { .heap = heap };
	pthread_t th;
	pthread_create(&th, NULL, rewrite_main, &w);
	for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
		unsigned n = counts[ci];
		/* Spread evenly over the heap, ascending. */
		for (unsigned k = 0; k < n; k++)
			pages[k] = (uint64_t)k * PIPELINE_HEAP_PAGES / n;
		w.pages = pages;
		w.n = n;
		for (int m = 0; m < 2; m++) {
			modes[m].pause = calloc(reps, sizeof(uint64_t));
			modes[m].wb = calloc(reps, sizeof(uint64_t));
			modes[m].saved = 0;
			modes[m].conflicts = 0;
			modes[m].carried = 0;
		}
		struct epoch_pipeline *eps[2];
		for (int m = 0; m < 2; m++) {
			struct epoch_options eo = { .copy_in_pause = modes[m].copy_in_pause };
			if (epoch_pipeline_open(&eps[m], p, t, heap, NULL, &eo) != 0)
				die("epoch_pipeline_open");
		}
		for (unsigned r = 0; r < reps + 1; r++) {
			for (int m = 0; m < 2; m++) {
				ep = eps[m];
				/* Settle whatever the rewriter left dirty. */
				epoch_writeback(ep, epoch_pause(ep, false), NULL);
				for (unsigned k = 0; k < n; k++)
					heap[pages[k] * page_size + (r % 64) * NVM_LINE] ^= 0x5a;
				uint64_t t0 = prim_now_ns();
				struct epoch_batch *b = epoch_pause(ep, false);
				uint64_t t1 = prim_now_ns();
				atomic_store(&w.run, true);
				struct epoch_result res;
				bool durable = epoch_writeback(ep, b, &res);
				uint64_t t2 = prim_now_ns();
				atomic_store(&w.run, false);
				if (r == 0)
					continue;	/* warm-up */
				modes[m].pause[r - 1] = t1 - t0;
				modes[m].wb[r - 1] = t2 - t1;
				modes[m].saved += res.pages_saved;
				modes[m].conflicts += res.conflicts;
				modes[m].carried += !durable;
			}
		}
		for (int m = 0; m < 2; m++)
			epoch_pipeline_close(eps[m]);
		for (int m = 0; m < 2; m++) {
			double wb = (double)median(modes[m].wb, reps) / 1e3;
			double p50 = (double)median(modes[m].pause, reps) / 1e3;
			double p99 = (double)percentile99(modes[m].pause, reps) / 1e3;
			printf("%6u | %-28s | %7.1fus %7.1fus | %8.1fus %7.2fus | %8.1f %9.1f %3u/%-3u\n",
			       n, modes[m].name, p50, p99, wb, wb / n, (double)modes[m].saved / reps,
			       (double)modes[m].conflicts / reps, modes[m].carried, reps);
			free(modes[m].pause);
			free(modes[m].wb);
		}
	}
	atomic_store(&w.stop, true);
	pthread_join(th, NULL);
	free(pages);
	tracker_close(t);
	shadow_release(heap, len);
	pool_close(p);
	unlink(path);
}

static void bench_pipeline(void)
{
	if (tracker_uffd_supported())
		bench_pipeline_tracker(TRACKER_UFFD);
	else
		printf("\npipeline: uffd tracking unsupported here (%s)\n",
		       tracker_uffd_unsupported_reason());
	bench_pipeline_tracker(TRACKER_MPROTECT);
}

/* ---- recovery --------------------------------------------------------- */

/* Write every stride-th page of a new pool of the given capacity with random
 * data, half of them again in a later epoch (both copies live). */
static void populate(const char *path, uint64_t capacity, unsigned stride, uint64_t *written)
{
	unlink(path);
	struct pool *p = open_pool(path, capacity, true);
	size_t len = (size_t)(p->npages * page_size);
	unsigned char *shadow = prim_map_any(len);
	if (shadow == NULL)
		die("shadow memory");
	const size_t batch = 16384;
	uint64_t *pages = malloc(batch * sizeof(*pages));
	*written = 0;
	for (int round = 0; round < 2; round++) {
		size_t n = 0;
		for (uint64_t i = 0; i < p->npages; i += stride) {
			if (round == 1 && (i / stride) % 2 != 0)
				continue;
			fill_random(shadow + i * page_size, page_size, i * 2 + (uint64_t)round + 1);
			pages[n++] = i;
			if (round == 0)
				(*written)++;
			if (n == batch) {
				persist_epoch(p, shadow, pages, n, NULL);
				n = 0;
			}
		}
		if (n > 0)
			persist_epoch(p, shadow, pages, n, NULL);
	}
	free(pages);
	prim_unmap(shadow, len);
	pool_set_clean(p, true);
	/* Durable, then out of the page cache (where the file system allows). */
	fsync(p->fd);
	posix_fadvise(p->fd, 0, 0, POSIX_FADV_DONTNEED);
	pool_close(p);
}

struct recovery_times {
	uint64_t open_ns, recover_ns, restored, baseline_ns;
};

static struct recovery_times recover_once(const char *path, uint64_t capacity, bool cold)
{
	struct recovery_times r;
	if (cold) {
		int fd = open(path, O_RDONLY);
		if (fd >= 0) {
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			close(fd);
		}
	}
	uint64_t t0 = prim_now_ns();
	struct pool *p = open_pool(path, capacity, false);
	uint64_t t1 = prim_now_ns();
	size_t len = (size_t)(p->npages * page_size);
	unsigned char *shadow = prim_map_any(len);
	if (shadow == NULL)
		die("shadow memory");
	uint64_t t2 = prim_now_ns();
	r.restored = recovery_restore_image(p, shadow);
	uint64_t t3 = prim_now_ns();
	r.open_ns = t1 - t0;
	r.recover_ns = t3 - t2;
	prim_unmap(shadow, len);

	/* Baseline: the same pages, copied plainly into fresh memory. */
	shadow = prim_map_any(len);
	if (shadow == NULL)
		die("shadow memory");
	t0 = prim_now_ns();
	for (uint64_t i = 0; i < p->npages; i++) {
		int c = pool_valid_copy(p, i);
		if (c >= 0)
			memcpy(shadow + i * page_size, pool_copy(p, i, c), page_size);
	}
	r.baseline_ns = prim_now_ns() - t0;
	prim_unmap(shadow, len);
	pool_close(p);
	return r;
}

static void bench_recovery(uint64_t capacity)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/bench_recover.pool", dir);
	double gib = (double)capacity / (double)(1ULL << 30);
	printf("\nrecovery: pool of %.2f GiB (%llu pages); open = pool_open (header and layout "
	       "checks);\nrecover = recovery_restore_image into fresh memory; baseline = memcpy of the same "
	       "pages\n\n", gib, (unsigned long long)(capacity / page_size));
	printf("%-12s %-5s %9s | %9s %10s %12s %11s | %10s %7s\n", "pool", "cache", "restored",
	       "open", "recover", "per GiB", "restored", "baseline", "ratio");
	printf("%-12s %-5s %9s | %9s %10s %12s %11s | %10s %7s\n", "", "", "pages", "", "",
	       "of pool", "GiB/s", "memcpy", "");
	static const struct {
		const char *name;
		unsigned stride;
	} kinds[] = { { "25 % written", 4 }, { "1 % written", 100 } };
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		uint64_t written;
		populate(path, capacity, kinds[k].stride, &written);
		for (int warm = 0; warm < 2; warm++) {
			struct recovery_times r = recover_once(path, capacity, !warm);
			if (r.restored != written) {
				fprintf(stderr, "bench_persist: restored %llu pages, wrote %llu\n",
					(unsigned long long)r.restored, (unsigned long long)written);
				exit(1);
			}
			double total_ms = (double)(r.open_ns + r.recover_ns) / 1e6;
			double gbs = (double)(r.restored * page_size) / (double)(1ULL << 30) /
				     ((double)r.recover_ns / 1e9);
			printf("%-12s %-5s %9llu | %7.2fms %8.1fms %10.1fms %11.2f | %8.1fms %6.2fx\n",
			       kinds[k].name, warm ? "warm" : "cold", (unsigned long long)r.restored,
			       (double)r.open_ns / 1e6, (double)r.recover_ns / 1e6, total_ms / gib, gbs,
			       (double)r.baseline_ns / 1e6,
			       (double)r.recover_ns / (double)r.baseline_ns);
		}
	}
	unlink(path);
}

#define RESTORE_ROUNDS 5

enum restore_kind { R_EAGER, R_LAZY, R_LAZY_NOBG, R_KINDS };
static const char *const restore_kind_names[R_KINDS] = { "eager copy", "lazy",
							 "lazy, no bg pass" };

/* One start-up of the given kind: usable, touch-all and completion times. */
static void restore_once(const char *path, uint64_t capacity, enum restore_kind kind,
			 uint64_t *usable, uint64_t *touch, uint64_t *complete)
{
	struct pool *p = open_pool(path, capacity, false);
	size_t len = (size_t)(p->npages * page_size);
	unsigned char *heap = shadow_reserve(0, len);
	if (heap == NULL)
		die("shadow memory");
	struct restore_options o = { .policy = kind == R_EAGER ? RESTORE_EAGER : RESTORE_LAZY,
				     .no_background = kind == R_LAZY_NOBG };
	struct restore *r;
	struct tracker *t;
	uint64_t t0 = prim_now_ns();
	if (restore_open(&r, &t, p, heap, len, TRACKER_UFFD, &o) != 0)
		die("restore_open");
	uint64_t t1 = prim_now_ns();
	volatile unsigned char sink = 0;
	for (size_t off = 0; off < len; off += page_size)
		sink += heap[off];
	(void)sink;
	uint64_t t2 = prim_now_ns();
	struct restore_stats st;
	restore_get_stats(r, &st);
	while (kind == R_LAZY && st.complete_ns == 0) {
		prim_sleep_ns(100000);
		restore_get_stats(r, &st);
	}
	*usable = t1 - t0;
	*touch = t2 - t1;
	*complete = kind == R_EAGER ? *usable : st.complete_ns;
	restore_close(r);
	tracker_close(t);
	shadow_release(heap, len);
	pool_close(p);
}

static void bench_restore(void)
{
	if (!tracker_uffd_supported()) {
		printf("\nrestore: uffd unsupported here (%s)\n", tracker_uffd_unsupported_reason());
		return;
	}
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/bench_restore.pool", dir);
	printf("\nrestore: time to a usable heap (restore_open, pool already open) and to read "
	       "one byte of\nevery page afterwards; every page of the heap persisted; medians of "
	       "%d interleaved rounds\n\n", RESTORE_ROUNDS);
	printf("%-9s %-17s | %10s %11s | %10s %11s | %10s\n", "in use", "path", "usable",
	       "per 100MB", "touch all", "per 100MB", "complete");
	static const uint64_t sizes[] = { 100ULL << 20, 1ULL << 30 };
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint64_t written;
		populate(path, sizes[s], 1, &written);
		uint64_t usable[R_KINDS][RESTORE_ROUNDS], touch[R_KINDS][RESTORE_ROUNDS],
			complete[R_KINDS][RESTORE_ROUNDS];
		for (int round = 0; round < RESTORE_ROUNDS; round++)
			for (int k = 0; k < R_KINDS; k++) {
				int kk = (k + round) % R_KINDS;	/* rotate the order */
				restore_once(path, sizes[s], (enum restore_kind)kk,
					     &usable[kk][round], &touch[kk][round],
					     &complete[kk][round]);
			}
		double per100 = 100e6 / (double)(written * page_size);
		for (int k = 0; k < R_KINDS; k++) {
			double u = (double)median(usable[k], RESTORE_ROUNDS) / 1e6;
			double tt = (double)median(touch[k], RESTORE_ROUNDS) / 1e6;
			double c = (double)median(complete[k], RESTORE_ROUNDS) / 1e6;
			printf("%6lluMiB %-17s | %8.2fms %9.2fms | %8.2fms %9.2fms | %8.1fms\n",
			       (unsigned long long)(written * page_size >> 20), restore_kind_names[k],
			       u, u * per100, tt, tt * per100, k == R_LAZY_NOBG ? 0.0 : c);
		}
	}
	unlink(path);
}

static bool has_arg(int argc, char **argv, const char *what)
{
	for (int a = 3; a < argc; a++)
		if (strcmp(argv[a], what) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: bench_persist DIR [CAPACITY [SECTION...]]\n"
				"  DIR: where the scratch pools go (/dev/shm with PMEM_IS_PMEM_FORCE=1 "
				"for the pmem path,\n  an ordinary file system for the msync path); "
				"CAPACITY: recovery pool size, default 1G;\n  SECTION: persist, "
				"sums, pipeline, recovery, restore (default: all)\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	uint64_t capacity = 1ULL << 30;
	if (argc >= 3 && (config_parse_size(argv[2], &capacity) != 0 || capacity < (1ULL << 20))) {
		fprintf(stderr, "bench_persist: CAPACITY '%s' is not a size of at least 1M "
				"(K/M/G suffixes)\n", argv[2]);
		return 2;
	}
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	struct config cfg;
	if (config_from_env(&cfg) != 0) {
		fprintf(stderr, "bench_persist: %s\n", err_get());
		return 2;
	}
	latency_ns = cfg.nvm_latency_ns;
	const char *force = getenv("PMEM_IS_PMEM_FORCE");
	printf("bench_persist: DIR %s, PMEM_IS_PMEM_FORCE=%s, emulated NVM write latency %u ns "
	       "per line,\npage %zu bytes, line %d bytes\n",
	       dir, force ? force : "(unset)", latency_ns, page_size, NVM_LINE);
	bool all = argc < 4;
	for (int a = 3; a < argc; a++)
		if (strcmp(argv[a], "persist") != 0 && strcmp(argv[a], "pipeline") != 0 &&
		    strcmp(argv[a], "sums") != 0 &&
		    strcmp(argv[a], "recovery") != 0 && strcmp(argv[a], "restore") != 0) {
			fprintf(stderr, "bench_persist: unknown section '%s' (persist, sums, pipeline, "
					"recovery, restore)\n", argv[a]);
			return 2;
		}
	if (all || has_arg(argc, argv, "persist"))
		bench_persist_epochs();
	if (all || has_arg(argc, argv, "sums"))
		bench_sums();
	if (all || has_arg(argc, argv, "pipeline"))
		bench_pipeline();
	if (all || has_arg(argc, argv, "recovery"))
		bench_recovery(capacity);
	if (all || has_arg(argc, argv, "restore"))
		bench_restore();
	return 0;
}
