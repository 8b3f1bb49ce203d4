/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool_sum -- the checksum of a page copy (pool format 5, the sum table of
 * pool.h).
 *
 * Owns: the function and its keys.  The write-back keeps a copy's checksum
 * current from the lines it rewrites instead of rehashing the whole page:
 * a random-access program changes a fifth of a page's lines per epoch, and
 * hashing 4 KiB per dirty page cost bank a fifth of its throughput (format 4,
 * XXH3 of the page).
 *
 * The function: split the page into 32-bit halves a_j of its 64-bit words
 * (the low half of word w is a_2w, the high half a_2w+1: the same on any byte
 * order) and take
 *     h = (s_page + sum_j a_j * k_j) mod P,   P = 2^61 - 1,
 * with keys k_j in [1, 2^60) and the page's offset s_page derived from the
 * pool's UUID (and the page index).  Stored as h + 1, so that a recorded sum
 * is never 0 (0: "none recorded").
 *
 * Why this one: it is linear, so rewriting a line changes h by
 * sum_j (new_j - old_j) * k_j over that line's 16 halves -- a multiply per
 * half of the changed lines only, from bytes the write-back's diff already
 * loaded.  And it detects any change: for a fixed nonzero difference
 * (every |new_j - old_j| < 2^32 < P, so some term is nonzero mod P) the keys
 * that miss it are at most a 2^-56 fraction (POOL_SUM_KEY_PART_MAX) -- no
 * error pattern is weaker than
 * another, unlike a sum of words modulo 2^64, where flips of the top bit of
 * two words cancel.  The page offset makes a page's bytes stored as another
 * page's, or another pool's page, fail too.
 *
 * An update is only as right as the sum it starts from: the write-back
 * updates a copy's recorded sum only when that sum describes the copy
 * (persist.c says when), and otherwise computes it afresh.
 */
#ifndef PMT_POOL_SUM_H
#define PMT_POOL_SUM_H

#include "persist/nvm.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define POOL_SUM_P ((UINT64_C(1) << 61) - 1)
/* Each key is hi * 2^32 + lo with lo in [1, 2^28), hi in [0, 2^28): below
 * 2^60 < P and never 0, 2^56 possible keys -- any fixed difference is missed
 * by at most a 2^-56 fraction of them. */
#define POOL_SUM_KEY_PART_MAX ((UINT32_C(1) << 28) - 1)

/* The keys of one pool: derived from its UUID, the same in every process. */
struct pool_sum_key {
	/* page_size / 4 keys, one per half-word, as their low and high 32
	 * bits: the whole-page sum then needs only 32x32-bit multiplies,
	 * which vectorise (pool_sum.c). */
	uint32_t *lo, *hi;
	size_t halves;
	uint64_t seed;		/* for the per-page offsets */
};

/* A change being summed: sum of (new - old) * k over the changed halves.
 * A line adds less than 2^97 in magnitude (pool_sum_delta_line), so no
 * page's worth can overflow. */
__extension__ typedef __int128 pool_sum_delta;

/* 0, or -1 (ENOMEM) with nothing allocated. */
int pool_sum_key_init(struct pool_sum_key *key, const uint8_t uuid[16], size_t page_size);
void pool_sum_key_fini(struct pool_sum_key *key);

/* The recorded form (never 0) of the checksum of page_size bytes as page
 * `page` of the pool the key belongs to. */
uint64_t pool_sum_of_page(const struct pool_sum_key *key, uint64_t page, const void *bytes);
/* The same of src, copied to dst (a page, not overlapping) in the same
 * pass: the sum is of the very bytes stored at dst, however src changes
 * meanwhile (a live page the program writes). */
uint64_t pool_sum_copy_page(const struct pool_sum_key *key, uint64_t page, void *dst,
			    const void *src);

/* Add to *d the change of line `line` (NVM_LINE bytes, 8-byte aligned) from
 * was to now.  Inline: the write-back calls it for every line it rewrites. */
static inline void pool_sum_delta_line(const struct pool_sum_key *key, size_t line,
				       const unsigned char *was_line,
				       const unsigned char *now_line, pool_sum_delta *d)
{
	const uint32_t *lo = key->lo + line * (NVM_LINE / 4), *hi = key->hi + line * (NVM_LINE / 4);
	/* A half's change times a key part is below 2^32 * 2^28 = 2^60 in
	 * magnitude, so the 8 even and the 8 odd halves of a line sum in 64
	 * bits apart (below 2^63): single multiplies, no carries.  Only the
	 * words that changed: a program's store rewrites a word or two of a
	 * line, and the multiplies are the cost. */
	int64_t lo_even = 0, lo_odd = 0, hi_even = 0, hi_odd = 0;
	for (int w = 0; w < NVM_LINE / 8; w++) {
		uint64_t now, was;
		memcpy(&now, now_line + 8 * w, 8);
		memcpy(&was, was_line + 8 * w, 8);
		if (now == was)
			continue;
		int64_t a = (int64_t)(uint32_t)now - (int64_t)(uint32_t)was;
		int64_t b = (int64_t)(now >> 32) - (int64_t)(was >> 32);
		lo_even += a * (int64_t)lo[2 * w];
		hi_even += a * (int64_t)hi[2 * w];
		lo_odd += b * (int64_t)lo[2 * w + 1];
		hi_odd += b * (int64_t)hi[2 * w + 1];
	}
	*d += (pool_sum_delta)lo_even + lo_odd +
	      ((pool_sum_delta)hi_even + hi_odd) * ((pool_sum_delta)1 << 32);
}

/* The recorded sum of a copy whose recorded sum was `recorded` (nonzero,
 * describing the copy's bytes) after the changes summed in d. */
uint64_t pool_sum_update(uint64_t recorded, pool_sum_delta d);

#endif
