/* SPDX-License-Identifier: BSD-3-Clause */
/* histogram -- log-linear histograms of durations.  See histogram.h. */
#include "base/histogram.h"

unsigned hist_bucket_of(uint64_t v)
{
	if (v < HIST_SUB)
		return (unsigned)v;
	unsigned e = 63 - (unsigned)__builtin_clzll(v);	/* >= HIST_SUB_BITS */
	unsigned shift = e - HIST_SUB_BITS;
	/* The HIST_SUB_BITS bits below the leading one pick the sub-bucket. */
	unsigned sub = (unsigned)(v >> shift) & (HIST_SUB - 1);
	return HIST_SUB + shift * HIST_SUB + sub;
}

uint64_t hist_bucket_upper(unsigned b)
{
	if (b < HIST_SUB)
		return b + 1;
	unsigned shift = (b - HIST_SUB) / HIST_SUB;
	uint64_t mant = HIST_SUB + (b - HIST_SUB) % HIST_SUB + 1;	/* 9..16 */
	if (shift >= 64 - (HIST_SUB_BITS + 1))
		return UINT64_MAX;
	return mant << shift;
}

uint64_t hist_percentile(const uint64_t *hist, uint64_t total, unsigned pct, uint64_t max)
{
	if (total == 0)
		return 0;
	uint64_t want = (total * pct + 99) / 100, seen = 0;
	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		seen += hist[b];
		if (seen >= want) {
			uint64_t upper = hist_bucket_upper(b);
			return upper < max ? upper : max;
		}
	}
	return max;
}
