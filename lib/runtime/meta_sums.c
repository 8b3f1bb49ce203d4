/* SPDX-License-Identifier: BSD-3-Clause */
/* meta_sums -- the heap's metadata pages checksummed by the pool.  See
 * meta_sums.h. */
#include "runtime/meta_sums.h"

#include "heap/heap.h"

#define HEAP_PAGE_BYTES ((uint64_t)1 << HEAP_PAGE_SHIFT)

/* The pool pages holding heap metadata pages. */
static size_t summed(void *ctx, struct pool_range *r)
{
	const struct pool *p = ctx;
	uint64_t h[2][2];
	size_t n = heap_meta_ranges(h);
	for (size_t i = 0; i < n; i++) {
		r[i].first = h[i][0] * HEAP_PAGE_BYTES / p->page_size;
		r[i].end = (h[i][1] * HEAP_PAGE_BYTES + p->page_size - 1) / p->page_size;
	}
	return n;
}

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
	if (p == NULL) {
		heap_set_page_check(NULL, NULL);
		return;
	}
	pool_set_summed(p, summed, p);
	heap_set_page_check(verify, p);
}
