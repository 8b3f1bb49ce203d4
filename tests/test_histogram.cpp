/* SPDX-License-Identifier: BSD-3-Clause */
// base/histogram: every value falls in a bucket whose upper bound is above it
// and within 1/8 of it, and percentiles are nearest-rank.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

extern "C" {
#include "base/histogram.h"
}

TEST_CASE("a value's bucket bounds it from above within an eighth", "[histogram]")
{
	std::mt19937_64 rng(42);
	for (int i = 0; i < 200000; i++) {
		uint64_t v = rng() >> (rng() % 64);
		unsigned b = hist_bucket_of(v);
		REQUIRE(b < HIST_BUCKETS);
		uint64_t up = hist_bucket_upper(b);
		INFO("value " << v << " bucket " << b << " upper " << up);
		REQUIRE(up > v);
		if (v >= HIST_SUB && up != UINT64_MAX)
			REQUIRE(up - v <= v / 8 + 1);
		// The bucket below ends at or under v (the top buckets'
		// bounds saturate).
		if (b > 0 && hist_bucket_upper(b - 1) != UINT64_MAX)
			REQUIRE(hist_bucket_upper(b - 1) <= v);
	}
	CHECK(hist_bucket_of(0) == 0);
	CHECK(hist_bucket_upper(hist_bucket_of(UINT64_MAX)) == UINT64_MAX);
}

TEST_CASE("percentiles are nearest-rank, capped at the largest value", "[histogram]")
{
	std::vector<uint64_t> hist(HIST_BUCKETS, 0);
	CHECK(hist_percentile(hist.data(), 0, 99, 0) == 0);
	// 99 values of 1000 ns and one of 1,000,000 ns.
	hist[hist_bucket_of(1000)] += 99;
	hist[hist_bucket_of(1000000)] += 1;
	uint64_t p50 = hist_percentile(hist.data(), 100, 50, 1000000);
	uint64_t p99 = hist_percentile(hist.data(), 100, 99, 1000000);
	uint64_t p100 = hist_percentile(hist.data(), 100, 100, 1000000);
	CHECK(p50 > 1000);
	CHECK(p50 <= 1000 + 1000 / 8 + 1);
	CHECK(p99 == p50);		// the 99th of 100 is still 1000 ns
	CHECK(p100 == 1000000);	// capped at the maximum seen
}
