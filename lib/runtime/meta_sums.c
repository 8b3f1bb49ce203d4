/* SPDX-License-Identifier: BSD-3-Clause */
/* meta_sums -- the heap's metadata pages verified against the pool's checksums.  See
 * meta_sums.h. */
#include "runtime/meta_sums.h"

#include "heap/heap.h"

#define HEAP_PAGE_BYTES ((uint64_t)1 << HEAP_PAGE_SHIFT)

/* Heap page hpage, at bytes: verify the pool page around it. */
static int verify(void *ctx, uint64_t hpage, const void *bytes, char *what, size_t len)
{
	const struct pool *p = ctx;
	uint64_t off = hpage * HEAP_PAGE_BYTES;
	const unsigned char *page_start = (const unsigned char *)bytes - off % p->page_size;
	return pool_verify_page(p, off / p->page_size, page_start, what, len);
}

void meta_sums_verify_with(const struct pool *p)
{
	heap_set_page_check(p != NULL ? verify : NULL, (void *)p);
}

void meta_sums_bind(struct pool *p)
{
	meta_sums_verify_with(p);
}
