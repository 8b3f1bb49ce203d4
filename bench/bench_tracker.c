/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_tracker -- what write tracking costs, per backend, against plain
 * memory measured in the same run.
 *
 *   first write   the first store to a page in an epoch (the page was
 *                 written in earlier epochs, so it is populated: the cost is
 *                 the tracking alone), and the first store ever to a
 *                 never-touched page (page allocation included)
 *   collection    tracker_collect_dirty with N pages dirty, N = 0, 1, 64,
 *                 4096, 65536, laid out contiguously and scattered (every
 *                 4th page)
 *
 * The tracked range is 1 GiB, the default heap size.  Each figure is the
 * median of several epochs.  Plain memory and the backends are measured in
 * ROUNDS rounds, in an order that rotates from round to round (so a burst of
 * load on the machine does not fall on one of them only); values are the
 * medians over rounds, ratios the medians of the per-round ratios.
 * Usage: bench_tracker [epochs [rounds]] */
#include "base/log.h"
#include "prim/prim.h"
#include "track/tracker.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_median.h"

#define RANGE_BYTES (1ULL << 30)
#define WRITE_PAGES 16384	/* pages written per first-write epoch */

static size_t page_size;
static size_t range_pages;
static uint64_t *dirty_buf;
static unsigned epochs = 7;

static void touch_pages(unsigned char *base, size_t first, size_t count, size_t stride,
			unsigned char v)
{
	for (size_t i = 0; i < count; i++)
		*(volatile unsigned char *)(base + (first + i * stride) * page_size) = v;
}

/* ns per page of the first write to WRITE_PAGES populated pages in an epoch,
 * and of the first write ever to never-touched ones.  t NULL: plain memory. */
static void first_write_cost(struct tracker *t, unsigned char *base, double *populated,
			     double *fresh)
{
	double v[64];
	/* Never-touched: a fresh slice of the range each epoch. */
	for (unsigned e = 0; e < epochs; e++) {
		size_t first = (size_t)(e + 1) * WRITE_PAGES;
		uint64_t t0 = prim_now_ns();
		touch_pages(base, first, WRITE_PAGES, 1, 1);
		v[e] = (double)(prim_now_ns() - t0) / WRITE_PAGES;
		if (t != NULL)
			tracker_collect_dirty(t, dirty_buf, range_pages);
	}
	*fresh = median(v, epochs);

	/* Populated: the same pages, epoch after epoch. */
	touch_pages(base, 0, WRITE_PAGES, 1, 1);
	if (t != NULL)
		tracker_collect_dirty(t, dirty_buf, range_pages);
	for (unsigned e = 0; e < epochs; e++) {
		uint64_t t0 = prim_now_ns();
		touch_pages(base, 0, WRITE_PAGES, 1, (unsigned char)(e + 2));
		v[e] = (double)(prim_now_ns() - t0) / WRITE_PAGES;
		if (t != NULL)
			tracker_collect_dirty(t, dirty_buf, range_pages);
	}
	*populated = median(v, epochs);
}

/* ns per page of the cheapest page fault there is: a read of a never-touched
 * page, which maps the shared zero page.  No fault-based tracker can be
 * cheaper; on a virtual machine it is much dearer than on bare metal. */
static double minor_fault_floor(void)
{
	double v[64];
	unsigned char *m = shadow_reserve(0, (size_t)WRITE_PAGES * epochs * page_size);
	if (m == NULL)
		return 0;
	for (unsigned e = 0; e < epochs; e++) {
		uint64_t t0 = prim_now_ns();
		for (size_t i = 0; i < WRITE_PAGES; i++)
			(void)*(volatile unsigned char *)(m + ((size_t)e * WRITE_PAGES + i) * page_size);
		v[e] = (double)(prim_now_ns() - t0) / WRITE_PAGES;
	}
	shadow_release(m, (size_t)WRITE_PAGES * epochs * page_size);
	return median(v, epochs);
}

/* Median ns of one collection with n pages dirty, stride apart. */
static double collect_cost(struct tracker *t, unsigned char *base, size_t n, size_t stride,
			   uint64_t *overflows)
{
	double v[64];
	struct tracker_stats st;
	tracker_get_stats(t, &st);
	uint64_t ov0 = st.overflows;
	for (unsigned e = 0; e < epochs; e++) {
		touch_pages(base, 0, n, stride, (unsigned char)e);
		uint64_t t0 = prim_now_ns();
		size_t got = tracker_collect_dirty(t, dirty_buf, range_pages);
		v[e] = (double)(prim_now_ns() - t0);
		/* After an overflow the mprotect backend reports every page
		 * touched, a superset. */
		tracker_get_stats(t, &st);
		bool overflowed = st.overflows != ov0;
		if (overflowed ? got < n : got != n) {
			fprintf(stderr, "bench_tracker: %s collected %zu pages, expected %zu\n",
				tracker_name(t), got, n);
			exit(1);
		}
	}
	tracker_get_stats(t, &st);
	*overflows = st.overflows - ov0;
	return median(v, epochs);
}

struct backend_result {
	const char *name;
	bool ran;
	double populated_ns, fresh_ns;
	double collect_ns[2][5];
	uint64_t overflows[2][5];
};

static const size_t collect_sizes[5] = { 0, 1, 64, 4096, 65536 };
static const size_t strides[2] = { 1, 4 };

static void run_backend(enum tracker_kind kind, struct backend_result *r)
{
	r->name = config_tracker_name(kind);
	unsigned char *base = shadow_reserve(0, RANGE_BYTES);
	struct tracker *t = NULL;
	if (base == NULL || tracker_open(&t, kind, base, RANGE_BYTES) != 0) {
		printf("%-9s unavailable: %s\n", r->name, err_get());
		shadow_release(base, RANGE_BYTES);
		return;
	}
	first_write_cost(t, base, &r->populated_ns, &r->fresh_ns);
	tracker_close(t);
	shadow_release(base, RANGE_BYTES);

	/* A new range for the collections, so that the first-write runs
	 * leave nothing populated that the scans would have to walk. */
	base = shadow_reserve(0, RANGE_BYTES);
	if (base == NULL || tracker_open(&t, kind, base, RANGE_BYTES) != 0) {
		printf("%-9s unavailable: %s\n", r->name, err_get());
		shadow_release(base, RANGE_BYTES);
		return;
	}
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < 5; i++)
			r->collect_ns[s][i] =
				collect_cost(t, base, collect_sizes[i], strides[s], &r->overflows[s][i]);
	tracker_close(t);
	shadow_release(base, RANGE_BYTES);
	r->ran = true;
}

struct round {
	double plain_populated, plain_fresh;
	struct backend_result res[2];
};

#define MAX_ROUNDS 15

/* Median over the rounds of f(round), skipping rounds where it is < 0. */
static double over_rounds(const struct round *rs, unsigned n, double (*f)(const struct round *, int, int),
			  int a, int b)
{
	double v[MAX_ROUNDS];
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++) {
		double x = f(&rs[i], a, b);
		if (x >= 0)
			v[k++] = x;
	}
	return k ? median(v, k) : -1;
}

static double f_populated(const struct round *r, int b, int unused)
{
	(void)unused;
	return b < 0 ? r->plain_populated : r->res[b].ran ? r->res[b].populated_ns : -1;
}

static double f_fresh(const struct round *r, int b, int unused)
{
	(void)unused;
	return b < 0 ? r->plain_fresh : r->res[b].ran ? r->res[b].fresh_ns : -1;
}

static double f_populated_x(const struct round *r, int b, int unused)
{
	(void)unused;
	return r->res[b].ran ? r->res[b].populated_ns / r->plain_populated : -1;
}

static double f_fresh_x(const struct round *r, int b, int unused)
{
	(void)unused;
	return r->res[b].ran ? r->res[b].fresh_ns / r->plain_fresh : -1;
}

static double f_mp_over_uffd(const struct round *r, int unused, int unused2)
{
	(void)unused;
	(void)unused2;
	return r->res[0].ran && r->res[1].ran ? r->res[1].populated_ns / r->res[0].populated_ns : -1;
}

/* collect: a = stride index * 5 + size index, b = backend; b = 2: mp/uffd */
static double f_collect(const struct round *r, int a, int b)
{
	int s = a / 5, i = a % 5;
	if (b == 2)
		return r->res[0].ran && r->res[1].ran
			       ? r->res[1].collect_ns[s][i] / r->res[0].collect_ns[s][i]
			       : -1;
	return r->res[b].ran ? r->res[b].collect_ns[s][i] : -1;
}

int main(int argc, char **argv)
{
	unsigned rounds = 3;
	if (argc > 1)
		epochs = (unsigned)atoi(argv[1]);
	if (argc > 2)
		rounds = (unsigned)atoi(argv[2]);
	if (epochs < 1 || epochs > 64 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: bench_tracker [epochs 1..64 [rounds 1..%d]]\n", MAX_ROUNDS);
		return 2;
	}
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	range_pages = RANGE_BYTES / page_size;
	dirty_buf = malloc(range_pages * sizeof(uint64_t));
	if (dirty_buf == NULL)
		return 1;

	printf("bench_tracker: range %llu MiB, %u epochs per figure (median), %u rounds "
	       "(order rotating; medians over rounds), uffd %s%s\n",
	       RANGE_BYTES >> 20, epochs, rounds,
	       tracker_uffd_supported() ? "supported" : "unsupported: ",
	       tracker_uffd_unsupported_reason());

	static struct round rs[MAX_ROUNDS];
	memset(rs, 0, sizeof(rs));
	for (unsigned r = 0; r < rounds; r++) {
		for (unsigned k = 0; k < 3; k++) {
			switch ((k + r) % 3) {
			case 0: {	/* plain memory: the baseline */
				unsigned char *plain = shadow_reserve(0, RANGE_BYTES);
				if (plain == NULL) {
					fprintf(stderr, "bench_tracker: %s\n", err_get());
					return 1;
				}
				first_write_cost(NULL, plain, &rs[r].plain_populated,
						 &rs[r].plain_fresh);
				shadow_release(plain, RANGE_BYTES);
				break;
			}
			case 1:
				run_backend(TRACKER_UFFD, &rs[r].res[0]);
				break;
			default:
				run_backend(TRACKER_MPROTECT, &rs[r].res[1]);
				break;
			}
		}
	}
	double floor_ns = minor_fault_floor();
	const char *names[2] = { config_tracker_name(TRACKER_UFFD),
				 config_tracker_name(TRACKER_MPROTECT) };
	bool ran[2] = { false, false };
	for (unsigned r = 0; r < rounds; r++)
		for (int b = 0; b < 2; b++)
			ran[b] |= rs[r].res[b].ran;

	printf("\nfirst write to a page in an epoch (%d pages, ns/page; x = ratio to plain)\n",
	       WRITE_PAGES);
	printf("  %-9s %10s %8s   %14s %8s\n", "", "populated", "x", "never-touched", "x");
	printf("  %-9s %10.0f %8s   %14.0f %8s\n", "plain", over_rounds(rs, rounds, f_populated, -1, 0),
	       "1.0", over_rounds(rs, rounds, f_fresh, -1, 0), "1.0");
	printf("  %-9s %10.0f   (a read of a never-touched page: the floor for any fault)\n",
	       "minor", floor_ns);
	for (int b = 0; b < 2; b++)
		if (ran[b])
			printf("  %-9s %10.0f %8.1f   %14.0f %8.1f\n", names[b],
			       over_rounds(rs, rounds, f_populated, b, 0),
			       over_rounds(rs, rounds, f_populated_x, b, 0),
			       over_rounds(rs, rounds, f_fresh, b, 0),
			       over_rounds(rs, rounds, f_fresh_x, b, 0));

	bool overflowed = false;
	for (int s = 0; s < 2; s++) {
		printf("\ncollection with N dirty pages, %s (us per call)\n",
		       strides[s] == 1 ? "contiguous" : "scattered: every 4th page");
		printf("  %-9s", "N");
		for (int i = 0; i < 5; i++)
			printf(" %10zu", collect_sizes[i]);
		printf("\n");
		for (int b = 0; b < 2; b++) {
			if (!ran[b])
				continue;
			printf("  %-9s", names[b]);
			for (int i = 0; i < 5; i++) {
				bool ov = false;
				for (unsigned r = 0; r < rounds; r++)
					ov |= rs[r].res[b].overflows[s][i] != 0;
				overflowed |= ov;
				printf(" %9.1f%s", over_rounds(rs, rounds, f_collect, s * 5 + i, b) / 1000,
				       ov ? "*" : " ");
			}
			printf("\n");
		}
		if (ran[0] && ran[1]) {
			printf("  %-9s", "mp/uffd");
			for (int i = 0; i < 5; i++)
				printf(" %9.1fx", over_rounds(rs, rounds, f_collect, s * 5 + i, 2));
			printf("\n");
		}
	}
	if (overflowed)
		printf("  (* = over the mprotect run budget of %d: range unprotected, pagemap read)\n",
		       TRACKER_MPROTECT_MAX_RUNS);

	if (ran[0] && ran[1]) {
		double u = over_rounds(rs, rounds, f_populated, 0, 0);
		double x = over_rounds(rs, rounds, f_mp_over_uffd, 0, 0);
		printf("\ntargets: uffd first write %.2f us (<= 1.5: %s); mprotect/uffd %.1fx "
		       "(>= 4: %s)\n", u / 1000, u <= 1500 ? "met" : "MISSED", x,
		       x >= 4 ? "met" : "MISSED");
	}
	free(dirty_buf);
	return 0;
}
