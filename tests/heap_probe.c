/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap_probe -- for tests/test_corrupt.cpp: where the heap's structures are
 * in a heap image, so that a test can corrupt exactly one of them in a real
 * pool.  C, because the heap's layout header is C (stdatomic).
 */
#include "heap_probe.h"

#include "heap/heap_layout.h"

#include <pmthreads.h>

#include <stddef.h>
#include <string.h>

static uint64_t pagemap_off(void)
{
	return (sizeof(struct heap_hdr) + HEAP_PAGE - 1) & ~(uint64_t)(HEAP_PAGE - 1);
}

int64_t heap_probe(const unsigned char *img, size_t len, enum probe_target t)
{
	const struct heap_hdr *h = (const void *)img;
	const uint32_t *pm = (const void *)(img + pagemap_off());
	(void)len;
	switch (t) {
	case PROBE_HDR_HWM:
		return (int64_t)offsetof(struct heap_hdr, hwm);
	case PROBE_HDR_MAGIC:
		return (int64_t)offsetof(struct heap_hdr, magic);
	case PROBE_PAGEMAP_FIRST:
		return (int64_t)(pagemap_off() + h->data_start * sizeof(uint32_t));
	case PROBE_SPAN_HEADER:
	case PROBE_SPAN_FREE_LIST:
		for (uint64_t pg = h->data_start; pg < h->hwm; pg++) {
			if (pm_kind(pm[pg]) != PM_SPAN || pm_span_pgoff(pm[pg]) != 0)
				continue;
			const struct heap_span *sp = (const void *)(img + (pg << HEAP_PAGE_SHIFT));
			if (t == PROBE_SPAN_HEADER)
				return (int64_t)((pg << HEAP_PAGE_SHIFT) + offsetof(struct heap_span, bump));
			if (sp->free_head != 0)
				return (int64_t)((pg << HEAP_PAGE_SHIFT) +
						 offsetof(struct heap_span, free_head));
		}
		return -1;
	case PROBE_PARTIAL_LIST:
		for (unsigned c = 0; c < HEAP_NCLASSES; c++)
			if (h->classes[c].partial != 0)
				return (int64_t)(offsetof(struct heap_hdr, classes) +
						 c * sizeof(struct heap_class_state) +
						 offsetof(struct heap_class_state, partial));
		return -1;
	case PROBE_NAME_NODE: {
		if (h->name_buckets == 0)
			return -1;
		const uint64_t *b = (const void *)(img + (h->name_buckets << HEAP_PAGE_SHIFT));
		for (uint64_t i = 0; i < h->name_nbuckets; i++)
			if (b[i] != 0)
				return (int64_t)(b[i] + offsetof(struct heap_name_node, obj));
		return -1;
	}
	case PROBE_NAME_BUCKETS:
		return (int64_t)offsetof(struct heap_hdr, name_nbuckets);
	case PROBE_HDR_IN_USE:
		return (int64_t)offsetof(struct heap_hdr, in_use_shared);
	case PROBE_PAGEMAP_ABOVE_HWM:
		return h->hwm < h->npages ? (int64_t)(pagemap_off() + h->hwm * sizeof(uint32_t)) : -1;
	case PROBE_CACHE_BIN:
		for (unsigned i = 0; i <= HEAP_NSLOTS; i++)
			for (unsigned c = 0; c < HEAP_NCLASSES; c++)
				if (h->slots[i].bins[c].count != 0)
					return (int64_t)(offsetof(struct heap_hdr, slots) +
							 i * sizeof(struct heap_slot) +
							 offsetof(struct heap_slot, bins) +
							 c * sizeof(struct heap_bin));
		return -1;
	case PROBE_NAME_BUCKET_EMPTY: {
		if (h->name_buckets == 0)
			return -1;
		const uint64_t *b = (const void *)(img + (h->name_buckets << HEAP_PAGE_SHIFT));
		for (uint64_t i = 0; i < 2 * h->name_nbuckets; i++)
			if (b[i] == 0)
				return (int64_t)((h->name_buckets << HEAP_PAGE_SHIFT) + i * sizeof(uint64_t));
		return -1;
	}
	}
	return -1;
}
