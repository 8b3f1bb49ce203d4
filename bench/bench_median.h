/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_median -- the median the benchmarks report (of paired ratios, of
 * rounds); one definition for all of them. */
#ifndef PMT_BENCH_MEDIAN_H
#define PMT_BENCH_MEDIAN_H

#include <stdlib.h>

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median of n > 0 values (sorts v). */
static inline double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
