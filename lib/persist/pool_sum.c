/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool_sum -- the checksum of a page copy.  See pool_sum.h.
 */
/* The whole-page sum's loop vectorises only with the dynamic cost model
 * (-O2's "very cheap" one refuses it): half the time per page. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include "persist/pool_sum.h"

#include "prim/prim.h"

#include <string.h>
#include <xxhash.h>

__extension__ typedef unsigned __int128 u128;

/* Half j of the page is the low (even j) or high (odd j) half of 64-bit word
 * j / 2, whatever the byte order; in memory that is the 4 bytes at 4 * j on
 * a little-endian host, at 4 * (j ^ 1) on a big-endian one. */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define POOL_SUM_HALF_SWAP 1
#else
#define POOL_SUM_HALF_SWAP 0
#endif

/* A 64-bit mixer (the splitmix64 finaliser's constants): the keys are
 * pseudo-random functions of the seed and their index, the same on every
 * host and byte order. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= UINT64_C(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64_C(0x94d049bb133111eb);
	x ^= x >> 31;
	return x;
}

/* x mod P for x < 2^122: 2^61 = 1 (mod P), so the bits above 61 fold down. */
static uint64_t mod_p(u128 x)
{
	u128 y = (x & POOL_SUM_P) + (x >> 61);
	uint64_t z = (uint64_t)(y & POOL_SUM_P) + (uint64_t)(y >> 61);
	return z >= POOL_SUM_P ? z - POOL_SUM_P : z;
}

int pool_sum_key_init(struct pool_sum_key *key, const uint8_t uuid[16], size_t page_size)
{
	key->halves = page_size / 4;
	/* The runtime's memory, not malloc's: inside the library malloc is
	 * our wrapper, and in malloc mode the persistent heap's. */
	key->lo = prim_map_any(key->halves * sizeof(*key->lo));
	key->hi = prim_map_any(key->halves * sizeof(*key->hi));
	if (key->lo == NULL || key->hi == NULL) {
		pool_sum_key_fini(key);
		return -1;
	}
	key->seed = XXH3_64bits(uuid, 16);
	for (size_t j = 0; j < key->halves; j++) {
		uint64_t r = mix64(key->seed + (j + 1) * UINT64_C(0x9e3779b97f4a7c15));
		key->lo[j] = 1 + (uint32_t)(r % POOL_SUM_KEY_PART_MAX);
		key->hi[j] = (uint32_t)((r >> 32) % (POOL_SUM_KEY_PART_MAX + 1));
	}
	return 0;
}

void pool_sum_key_fini(struct pool_sum_key *key)
{
	if (key->lo != NULL)
		prim_unmap(key->lo, key->halves * sizeof(*key->lo));
	if (key->hi != NULL)
		prim_unmap(key->hi, key->halves * sizeof(*key->hi));
	key->lo = key->hi = NULL;
	key->halves = 0;
}

static uint64_t page_offset(const struct pool_sum_key *key, uint64_t page)
{
	return mix64(~key->seed ^ (page + 1) * UINT64_C(0xd6e8feb86659fd93)) % POOL_SUM_P;
}

/* The sum of the halves the loop reads from b, each stored at d as well
 * when d is not NULL (one pass: copied and summed from the same load). */
static inline __attribute__((always_inline)) uint64_t
sum_page(const struct pool_sum_key *key, uint64_t page, unsigned char *restrict d,
	 const unsigned char *restrict b)
{
	const uint32_t *lo = key->lo, *hi = key->hi;
	/* a * k = a * lo + (a * hi) << 32, each product below 2^60, so a
	 * line's 16 of each sum in 64 bits; the line sums are split into
	 * 32-bit halves summed apart, which no page can overflow.  The inner
	 * loop is 32x32-bit multiplies and 64-bit adds: it vectorises. */
	uint64_t s0 = 0, s32a = 0, s32b = 0, s64 = 0;
	for (size_t j0 = 0; j0 < key->halves; j0 += NVM_LINE / 4) {
		uint64_t sl = 0, sh = 0;
		for (size_t j = j0; j < j0 + NVM_LINE / 4; j++) {
			uint32_t a;
			memcpy(&a, b + 4 * (j ^ POOL_SUM_HALF_SWAP), 4);
			if (d != NULL)
				memcpy(d + 4 * (j ^ POOL_SUM_HALF_SWAP), &a, 4);
			sl += (uint64_t)a * lo[j];
			sh += (uint64_t)a * hi[j];
		}
		s0 += sl & 0xffffffff;
		s32a += sl >> 32;
		s32b += sh & 0xffffffff;
		s64 += sh >> 32;
	}
	/* 2^64 = 2^3 (mod P) */
	u128 total = (u128)page_offset(key, page) + s0 + ((u128)(s32a + s32b) << 32) +
		     ((u128)s64 << 3);
	return mod_p(total) + 1;
}

PRIM_VECTOR_CLONES uint64_t pool_sum_of_page(const struct pool_sum_key *key, uint64_t page,
					    const void *bytes)
{
	return sum_page(key, page, NULL, bytes);
}

PRIM_VECTOR_CLONES uint64_t pool_sum_copy_page(const struct pool_sum_key *key, uint64_t page,
					      void *dst, const void *src)
{
	return sum_page(key, page, dst, src);
}

uint64_t pool_sum_update(uint64_t recorded, pool_sum_delta d)
{
	uint64_t h = recorded - 1;
	uint64_t c = d >= 0 ? mod_p((u128)d) : (POOL_SUM_P - mod_p((u128)-d)) % POOL_SUM_P;
	h += c;
	if (h >= POOL_SUM_P)
		h -= POOL_SUM_P;
	return h + 1;
}
