/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * meta_sums -- the heap's metadata pages checksummed by the pool.
 *
 * Owns: the binding of the two hooks that make it happen, for the runtime,
 * pmthreads-recover and the fuzzer alike: the pool asks the heap which pages
 * are metadata (pool_set_summed; the epoch asks at the quiescent point) and
 * records a checksum of each copy it writes of them; the heap asks the pool
 * to verify each metadata page it adopts (heap_set_page_check).  Converts
 * between the heap's 4 KiB pages and the pool's pages.
 */
#ifndef PMT_META_SUMS_H
#define PMT_META_SUMS_H

#include "persist/pool.h"

/* Bind the heap to pool p (NULL: unbind both hooks). */
void meta_sums_bind(struct pool *p);
/* Only the verification (tools, on a pool opened read-only): heap adoption
 * and heap_validate_image check the metadata pages against p's checksums. */
void meta_sums_verify_with(const struct pool *p);

#endif
