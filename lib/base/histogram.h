/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * histogram -- log-linear histograms of durations, for percentiles.
 *
 * Owns: the bucket layout shared by the pause, period and hold-time
 * statistics.  Each power of two [2^e, 2^(e+1)) is split into HIST_SUB equal
 * sub-buckets, so a percentile read from it is within 1/8 (12.5 %) of the
 * true value -- a plain power-of-two histogram could only say "somewhere in
 * 2..4 ms", which makes a p99 useless against a 1 ms target.  Values below
 * HIST_SUB get one bucket each.  The caller owns the counts and their lock.
 */
#ifndef PMT_HISTOGRAM_H
#define PMT_HISTOGRAM_H

#include <stdint.h>

#define HIST_SUB_BITS 3
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS (HIST_SUB + (64 - HIST_SUB_BITS) * HIST_SUB)

/* The bucket of value v. */
unsigned hist_bucket_of(uint64_t v);
/* The smallest value above every value of bucket b (saturating). */
uint64_t hist_bucket_upper(unsigned b);
/* The pct-th percentile (nearest rank) of the total values counted in
 * hist[HIST_BUCKETS], as the upper bound of its bucket, capped at max (the
 * largest value seen); 0 when total is 0. */
uint64_t hist_percentile(const uint64_t *hist, uint64_t total, unsigned pct, uint64_t max);

#endif
