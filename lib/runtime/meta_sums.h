/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * meta_sums -- the heap's metadata pages verified against the pool's
 * checksums.
 *
 * Owns: the binding of the hook that makes it happen, for the runtime,
 * pmthreads-recover and the fuzzer alike: the pool records a checksum of
 * every page copy an epoch writes (pool.h), and the heap asks the pool to
 * verify each metadata page it adopts (heap_set_page_check), so that a
 * damaged metadata page is named by what it is (page map, name table...).
 * Converts between the heap's 4 KiB pages and the pool's pages.
 */
#ifndef PMT_META_SUMS_H
#define PMT_META_SUMS_H

#include "persist/pool.h"

/* Bind the heap's metadata verification to pool p (NULL: unbind). */
void meta_sums_bind(struct pool *p);
/* The same, for tools on a pool opened read-only: heap adoption and
 * heap_validate_image check the metadata pages against p's checksums. */
void meta_sums_verify_with(const struct pool *p);

#endif
