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
 * median of several epochs.  Usage: bench_tracker [epochs] */
#include "log.h"
#include "prim/prim.h"
#include "tracker.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RANGE_BYTES (1ULL << 30)
#define WRITE_PAGES 16384	/* pages written per first-write epoch */

static size_t page_size;
static size_t range_pages;
static uint64_t *dirty_buf;
static unsigned epochs = 7;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

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
	uint64_t ov0 = t->stats.overflows;
	for (unsigned e = 0; e < epochs; e++) {
		touch_pages(base, 0, n, stride, (unsigned char)e);
		uint64_t t0 = prim_now_ns();
		size_t got = tracker_collect_dirty(t, dirty_buf, range_pages);
		v[e] = (double)(prim_now_ns() - t0);
		/* After an overflow the mprotect backend reports every page
		 * touched, a superset. */
		bool overflowed = t->stats.overflows != ov0;
		if (overflowed ? got < n : got != n) {
			fprintf(stderr, "bench_tracker: %s collected %zu pages, expected %zu\n",
				t->ops->name, got, n);
			exit(1);
		}
	}
	*overflows = t->stats.overflows - ov0;
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

int main(int argc, char **argv)
{
	if (argc > 1)
		epochs = (unsigned)atoi(argv[1]);
	if (epochs < 1 || epochs > 64) {
		fprintf(stderr, "usage: bench_tracker [epochs 1..64]\n");
		return 2;
	}
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	range_pages = RANGE_BYTES / page_size;
	dirty_buf = malloc(range_pages * sizeof(uint64_t));
	if (dirty_buf == NULL)
		return 1;

	printf("bench_tracker: range %llu MiB, %u epochs per figure (median), uffd %s%s\n",
	       RANGE_BYTES >> 20, epochs,
	       tracker_uffd_supported() ? "supported" : "unsupported: ",
	       tracker_uffd_unsupported_reason());

	/* Plain memory: the baseline. */
	double plain_populated, plain_fresh;
	unsigned char *plain = shadow_reserve(0, RANGE_BYTES);
	if (plain == NULL) {
		fprintf(stderr, "bench_tracker: %s\n", err_get());
		return 1;
	}
	first_write_cost(NULL, plain, &plain_populated, &plain_fresh);
	shadow_release(plain, RANGE_BYTES);
	double floor_ns = minor_fault_floor();

	struct backend_result res[2];
	memset(res, 0, sizeof(res));
	run_backend(TRACKER_UFFD, &res[0]);
	run_backend(TRACKER_MPROTECT, &res[1]);

	printf("\nfirst write to a page in an epoch (%d pages, ns/page; x = ratio to plain)\n",
	       WRITE_PAGES);
	printf("  %-9s %10s %8s   %14s %8s\n", "", "populated", "x", "never-touched", "x");
	printf("  %-9s %10.0f %8s   %14.0f %8s\n", "plain", plain_populated, "1.0", plain_fresh,
	       "1.0");
	printf("  %-9s %10.0f   (a read of a never-touched page: the floor for any fault)\n",
	       "minor", floor_ns);
	for (int b = 0; b < 2; b++)
		if (res[b].ran)
			printf("  %-9s %10.0f %8.1f   %14.0f %8.1f\n", res[b].name,
			       res[b].populated_ns, res[b].populated_ns / plain_populated,
			       res[b].fresh_ns, res[b].fresh_ns / plain_fresh);

	for (int s = 0; s < 2; s++) {
		printf("\ncollection with N dirty pages, %s (us per call)\n",
		       strides[s] == 1 ? "contiguous" : "scattered: every 4th page");
		printf("  %-9s", "N");
		for (int i = 0; i < 5; i++)
			printf(" %10zu", collect_sizes[i]);
		printf("\n");
		for (int b = 0; b < 2; b++) {
			if (!res[b].ran)
				continue;
			printf("  %-9s", res[b].name);
			for (int i = 0; i < 5; i++)
				printf(" %9.1f%s", res[b].collect_ns[s][i] / 1000,
				       res[b].overflows[s][i] ? "*" : " ");
			printf("\n");
		}
		if (res[0].ran && res[1].ran) {
			printf("  %-9s", "mp/uffd");
			for (int i = 0; i < 5; i++)
				printf(" %9.1fx", res[1].collect_ns[s][i] / res[0].collect_ns[s][i]);
			printf("\n");
		}
	}
	printf("  (* = over the mprotect run budget of %d: range unprotected, pagemap read)\n",
	       TRACKER_MPROTECT_MAX_RUNS);

	if (res[0].ran && res[1].ran) {
		double u = res[0].populated_ns, m = res[1].populated_ns;
		printf("\ntargets: uffd first write %.2f us (<= 1.5: %s); mprotect/uffd %.1fx "
		       "(>= 4: %s)\n", u / 1000, u <= 1500 ? "met" : "MISSED", m / u,
		       m / u >= 4 ? "met" : "MISSED");
	}
	free(dirty_buf);
	return 0;
}
