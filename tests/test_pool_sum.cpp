/* SPDX-License-Identifier: BSD-3-Clause */
// pool_sum (lib/persist/pool_sum.c): the checksum of a page copy.  What the
// write-back relies on: a sum updated from changed lines equals the sum of
// the new page; what restore relies on: every change of a page's bytes, its
// index or its pool changes the sum.
#include <catch2/catch.hpp>

extern "C" {
#include "persist/pool_sum.h"
}

#include <cstring>
#include <random>
#include <unistd.h>
#include <vector>

namespace {

const size_t kPage = 4096;

struct keyed {
	pool_sum_key key{};
	explicit keyed(uint8_t tag, size_t page = kPage)
	{
		uint8_t uuid[16];
		for (int i = 0; i < 16; i++)
			uuid[i] = (uint8_t)(tag * 31 + i);
		REQUIRE(pool_sum_key_init(&key, uuid, page) == 0);
	}
	~keyed() { pool_sum_key_fini(&key); }
	keyed(const keyed &) = delete;
	keyed &operator=(const keyed &) = delete;
};

std::vector<unsigned char> random_page(std::mt19937_64 &rng, size_t len = kPage)
{
	std::vector<unsigned char> p(len);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t x = rng();
		memcpy(&p[i], &x, 8);
	}
	return p;
}

// What the write-back does for one page: every line that differs adds its
// change to the delta, and the recorded sum is updated with it.
uint64_t updated(const pool_sum_key &key, uint64_t recorded, const std::vector<unsigned char> &was,
		 const std::vector<unsigned char> &now)
{
	pool_sum_delta d = 0;
	for (size_t l = 0; l < was.size() / NVM_LINE; l++) {
		if (memcmp(&was[l * NVM_LINE], &now[l * NVM_LINE], NVM_LINE) != 0)
			pool_sum_delta_line(&key, l, &was[l * NVM_LINE], &now[l * NVM_LINE], &d);
	}
	return pool_sum_update(recorded, d);
}

} // namespace

TEST_CASE("pool_sum: an update from the changed lines equals the sum of the new page", "[pool_sum]")
{
	keyed k(1);
	std::mt19937_64 rng(2411);
	std::vector<unsigned char> page = random_page(rng);
	uint64_t sum = pool_sum_of_page(&k.key, 7, page.data());
	for (int round = 0; round < 2000; round++) {
		std::vector<unsigned char> next = page;
		// Some lines changed: single bytes, whole words, whole lines,
		// words set to 0 or all ones (the extremes of a half-word).
		int changes = 1 + (int)(rng() % 12);
		for (int c = 0; c < changes; c++) {
			size_t off = rng() % kPage;
			switch (rng() % 4) {
			case 0: next[off] ^= (unsigned char)(1u << (rng() % 8)); break;
			case 1: memset(&next[off & ~size_t(7)], 0, 8); break;
			case 2: memset(&next[off & ~size_t(7)], 0xff, 8); break;
			default: {
				auto line = random_page(rng, NVM_LINE);
				memcpy(&next[off & ~size_t(NVM_LINE - 1)], line.data(), NVM_LINE);
			}
			}
		}
		uint64_t up = updated(k.key, sum, page, next);
		uint64_t full = pool_sum_of_page(&k.key, 7, next.data());
		INFO("round " << round);
		REQUIRE(up == full);
		REQUIRE(up != 0);
		page = next;
		sum = up;
	}
	// Back to all zeros and to all ones, through updates.
	std::vector<unsigned char> zeros(kPage, 0), ones(kPage, 0xff);
	uint64_t z = updated(k.key, sum, page, zeros);
	CHECK(z == pool_sum_of_page(&k.key, 7, zeros.data()));
	CHECK(updated(k.key, z, zeros, ones) == pool_sum_of_page(&k.key, 7, ones.data()));
}

TEST_CASE("pool_sum: every single bit flipped changes the sum", "[pool_sum]")
{
	keyed k(2);
	std::mt19937_64 rng(7);
	std::vector<unsigned char> page = random_page(rng);
	const uint64_t sum = pool_sum_of_page(&k.key, 3, page.data());
	for (size_t bit = 0; bit < kPage * 8; bit++) {
		page[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		bool differs = pool_sum_of_page(&k.key, 3, page.data()) != sum;
		page[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		if (!differs)
			FAIL("bit " << bit << " flipped leaves the sum unchanged");
	}
}

TEST_CASE("pool_sum: the patterns a sum of words misses are caught", "[pool_sum]")
{
	keyed k(3);
	std::mt19937_64 rng(11);
	std::vector<unsigned char> page = random_page(rng);
	const uint64_t sum = pool_sum_of_page(&k.key, 0, page.data());
	SECTION("the top bit of two words (cancels modulo 2^64)")
	{
		for (size_t a = 0; a < 16; a++) {
			std::vector<unsigned char> q = page;
			q[8 * a + 7] ^= 0x80;
			q[8 * (a + 100) + 7] ^= 0x80;
			CHECK(pool_sum_of_page(&k.key, 0, q.data()) != sum);
		}
	}
	SECTION("two lines swapped")
	{
		std::vector<unsigned char> q = page;
		memcpy(&q[0], &page[5 * NVM_LINE], NVM_LINE);
		memcpy(&q[5 * NVM_LINE], &page[0], NVM_LINE);
		CHECK(pool_sum_of_page(&k.key, 0, q.data()) != sum);
	}
	SECTION("the two halves of a word swapped")
	{
		std::vector<unsigned char> q = page;
		memcpy(&q[40], &page[44], 4);
		memcpy(&q[44], &page[40], 4);
		CHECK(pool_sum_of_page(&k.key, 0, q.data()) != sum);
	}
	SECTION("a word +1 and the next -1")
	{
		std::vector<unsigned char> q = page;
		uint64_t a, b;
		memcpy(&a, &q[64], 8);
		memcpy(&b, &q[72], 8);
		a += 1;
		b -= 1;
		memcpy(&q[64], &a, 8);
		memcpy(&q[72], &b, 8);
		CHECK(pool_sum_of_page(&k.key, 0, q.data()) != sum);
	}
	SECTION("all zeros and all ones are distinct and never 0")
	{
		std::vector<unsigned char> zeros(kPage, 0), ones(kPage, 0xff);
		uint64_t z = pool_sum_of_page(&k.key, 0, zeros.data()), o = pool_sum_of_page(&k.key, 0, ones.data());
		CHECK(z != o);
		CHECK(z != 0);
		CHECK(o != 0);
	}
}

TEST_CASE("pool_sum: the same bytes as another page, or of another pool, do not pass", "[pool_sum]")
{
	keyed a(4), b(5);
	std::mt19937_64 rng(13);
	std::vector<unsigned char> page = random_page(rng);
	std::vector<unsigned char> zeros(kPage, 0);
	for (uint64_t i = 0; i < 64; i++) {
		CHECK(pool_sum_of_page(&a.key, i, page.data()) != pool_sum_of_page(&a.key, i + 1, page.data()));
		CHECK(pool_sum_of_page(&a.key, i, zeros.data()) != pool_sum_of_page(&a.key, i + 1, zeros.data()));
		CHECK(pool_sum_of_page(&a.key, i, page.data()) != pool_sum_of_page(&b.key, i, page.data()));
	}
}

TEST_CASE("pool_sum: the keys are a function of the UUID alone", "[pool_sum]")
{
	// What a later process recomputes must match what this one recorded.
	std::mt19937_64 rng(17);
	std::vector<unsigned char> page = random_page(rng);
	uint64_t s1, s2;
	{
		keyed k(6);
		s1 = pool_sum_of_page(&k.key, 9, page.data());
	}
	{
		keyed k(6);
		s2 = pool_sum_of_page(&k.key, 9, page.data());
	}
	CHECK(s1 == s2);
}

TEST_CASE("pool_sum: larger pages (64 KiB, as on some aarch64 kernels)", "[pool_sum]")
{
	const size_t big = 65536;
	keyed k(7, big);
	std::mt19937_64 rng(19);
	std::vector<unsigned char> page = random_page(rng, big), ones(big, 0xff);
	uint64_t sum = pool_sum_of_page(&k.key, 1, ones.data());
	CHECK(updated(k.key, sum, ones, page) == pool_sum_of_page(&k.key, 1, page.data()));
}
