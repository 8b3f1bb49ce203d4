/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * page_sum -- the checksum of a page copy.  See page_sum.h.
 */
#include "persist/page_sum.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

__extension__ typedef unsigned __int128 u128;

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
	u128 y = (x & PAGE_SUM_P) + (x >> 61);
	uint64_t z = (uint64_t)(y & PAGE_SUM_P) + (uint64_t)(y >> 61);
	return z >= PAGE_SUM_P ? z - PAGE_SUM_P : z;
}

int page_sum_key_init(struct page_sum_key *key, const uint8_t uuid[16], size_t page_size)
{
	key->halves = page_size / 4;
	key->k = malloc(key->halves * sizeof(*key->k));
	if (key->k == NULL)
		return -1;
	key->seed = XXH3_64bits(uuid, 16);
	for (size_t j = 0; j < key->halves; j++)
		key->k[j] = 1 + mix64(key->seed + (j + 1) * UINT64_C(0x9e3779b97f4a7c15)) %
				    (PAGE_SUM_P - 1);
	return 0;
}

void page_sum_key_fini(struct page_sum_key *key)
{
	free(key->k);
	key->k = NULL;
	key->halves = 0;
}

static uint64_t page_offset(const struct page_sum_key *key, uint64_t page)
{
	return mix64(~key->seed ^ (page + 1) * UINT64_C(0xd6e8feb86659fd93)) % PAGE_SUM_P;
}

uint64_t page_sum(const struct page_sum_key *key, uint64_t page, const void *bytes)
{
	const unsigned char *b = bytes;
	const uint64_t *k = key->k;
	/* Two chains, so the adds of one overlap the multiplies of the other;
	 * 2 * 2^93 * (page_size / 8) stays far below 2^128 for any page size. */
	u128 acc0 = page_offset(key, page), acc1 = 0;
	for (size_t w = 0; w < key->halves / 2; w++) {
		uint64_t x;
		memcpy(&x, b + 8 * w, 8);
		acc0 += (u128)(uint32_t)x * k[2 * w];
		acc1 += (u128)(x >> 32) * k[2 * w + 1];
	}
	return mod_p(mod_p(acc0) + (u128)mod_p(acc1)) + 1;
}

uint64_t page_sum_update(uint64_t recorded, page_sum_delta d)
{
	uint64_t h = recorded - 1;
	uint64_t c = d >= 0 ? mod_p((u128)d) : (PAGE_SUM_P - mod_p((u128)-d)) % PAGE_SUM_P;
	h += c;
	if (h >= PAGE_SUM_P)
		h -= PAGE_SUM_P;
	return h + 1;
}
