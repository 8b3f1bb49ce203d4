/* SPDX-License-Identifier: BSD-3-Clause */
/* heap_probe -- heap offsets of the heap's structures in an image (see
 * heap_probe.c). */
#ifndef PMT_TESTS_HEAP_PROBE_H
#define PMT_TESTS_HEAP_PROBE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum probe_target {
	PROBE_HDR_MAGIC,	/* the header's magic */
	PROBE_HDR_HWM,		/* the header's high-water mark */
	PROBE_PAGEMAP_FIRST,	/* the page-map entry of the first data page */
	PROBE_SPAN_HEADER,	/* the bump count of the first span */
	PROBE_SPAN_FREE_LIST,	/* the free-list head of a span that has one */
	PROBE_PARTIAL_LIST,	/* the partial-list head of a class that has one */
	PROBE_NAME_NODE,	/* the object offset of a name node */
	PROBE_NAME_BUCKETS,	/* the name table's bucket count */
	/* Fields a structural check cannot doubt, for the checksums' tests: */
	PROBE_HDR_IN_USE,	/* the header's byte counter of released slots */
	PROBE_PAGEMAP_ABOVE_HWM,/* the page-map entry of the page at hwm (unused) */
	PROBE_NAME_BUCKET_EMPTY,/* an empty bucket in the name table's bucket run */
	PROBE_CACHE_BIN,	/* a thread cache's bin that holds blocks (its head) */
};

/* Heap offset of target t in the image, -1 when the heap has none. */
int64_t heap_probe(const unsigned char *img, size_t len, enum probe_target t);

#ifdef __cplusplus
}
#endif

#endif
