/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * image -- the pool's consistent heap image, copied into the tool's own
 * memory so it can be examined (the heap's name table) or written out.
 *
 * Only the pages that were ever persisted are copied; the rest of the fresh
 * anonymous mapping stays zero, exactly like the never-written pages of the
 * heap, and costs no memory.  The copy goes at the recorded shadow base when
 * that range is free, where pointers the program stored in its heap point
 * into the copy.
 */
#include "tool.h"

#include "prim/prim.h"

#include <errno.h>
#include <string.h>

int64_t image_last_used_page(const struct pool *p)
{
	for (uint64_t i = p->seq_pages; i > 0; i--)
		if (pool_valid_copy(p, i - 1) >= 0)
			return (int64_t)(i - 1);
	return -1;
}

int image_load(const struct pool *p, struct image *img)
{
	memset(img, 0, sizeof(*img));
	img->len = (size_t)(p->npages * p->page_size);
	void *base = prim_map_fixed((void *)(uintptr_t)p->shadow_base, img->len);
	if (base == NULL)
		base = prim_map_any(img->len);
	if (base == NULL) {
		tool_error("cannot reserve %zu bytes of memory for the heap image: %s "
			   "(raise the address-space limit, ulimit -v)",
			   img->len, strerror(errno));
		return -1;
	}
	img->base = base;
	for (uint64_t i = 0; i < p->seq_pages; i++) {
		if (pool_valid_copy(p, i) < 0)
			continue;
		recovery_read_page(p, i, img->base + i * p->page_size);
		img->pages_restored++;
	}
	return 0;
}

void image_free(struct image *img)
{
	if (img->base != NULL)
		prim_unmap(img->base, img->len);
	img->base = NULL;
}
