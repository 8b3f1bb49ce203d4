/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap_image -- the persistent heap inside a pool's consistent image: adopt
 * it, list its named objects, check its structures.
 *
 * The heap module adopts the image exactly as a recovering program would
 * (heap_init with fresh == false), but over the tool's private copy: what
 * adoption changes (blocks left in dead threads' caches go back to the
 * shared lists) changes only that copy, never the pool.  The heap refers to
 * its own contents by offsets, so the copy need not sit at the recorded
 * address; addresses are reported as the program would see them.
 *
 * Built without the heap module (PMT_TOOL_HAVE_HEAP undefined), there is
 * never a heap to adopt, and the reason says so.
 */
#include "tool.h"

#include "base/log.h"

#ifdef PMT_TOOL_HAVE_HEAP
#include "heap/heap.h"
#include "runtime/meta_sums.h"
#endif

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum heap_image_state heap_image_adopt(struct image *img, const struct pool *p, char *why,
				       size_t why_len)
{
#ifndef PMT_TOOL_HAVE_HEAP
	(void)img;
	(void)p;
	snprintf(why, why_len, "this build of " TOOL_NAME " has no heap module");
	return HEAP_IMAGE_NONE;
#else
	/* The heap's header is at the start of page 0: until that page is
	 * persisted, a recovering program formats a new, empty heap. */
	if (pool_valid_copy(p, 0) < 0) {
		snprintf(why, why_len, "no heap has been persisted yet");
		return HEAP_IMAGE_NONE;
	}
	err_clear();
	meta_sums_verify_with(p);
	if (heap_init(img->base, img->len, false) != 0) {
		snprintf(why, why_len, "the image does not hold a valid heap (%s); the program "
			 "would refuse to start with this pool",
			 err_get()[0] != '\0' ? err_get() : "no reason given");
		return HEAP_IMAGE_INVALID;
	}
	return HEAP_IMAGE_ADOPTED;
#endif
}

#ifdef PMT_TOOL_HAVE_HEAP
struct collect {
	struct named_objects *out;
	const unsigned char *base;
	uint64_t recorded_base;
	size_t cap;
	bool out_of_memory;
};

/* Runs under the name table's lock: only copies. */
static void collect_one(const char *name, void *ptr, size_t size, void *arg)
{
	struct collect *c = arg;
	if (c->out_of_memory)
		return;
	if (c->out->n == c->cap) {
		size_t cap = c->cap == 0 ? 16 : 2 * c->cap;
		struct named_object *v = realloc(c->out->v, cap * sizeof(*v));
		if (v == NULL) {
			c->out_of_memory = true;
			return;
		}
		c->out->v = v;
		c->cap = cap;
	}
	struct named_object *o = &c->out->v[c->out->n++];
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->address = c->recorded_base + (uint64_t)((const unsigned char *)ptr - c->base);
	o->size = size;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct named_object *)a)->name,
		      ((const struct named_object *)b)->name);
}
#endif

int heap_image_names(const struct image *img, const struct pool *p, struct named_objects *out)
{
	memset(out, 0, sizeof(*out));
#ifndef PMT_TOOL_HAVE_HEAP
	(void)img;
	(void)p;
	return 0;
#else
	struct collect c = { .out = out, .base = img->base, .recorded_base = p->shadow_base };
	heap_name_foreach(collect_one, &c);
	if (c.out_of_memory) {
		tool_error("out of memory listing the heap's named objects");
		heap_image_names_free(out);
		return -1;
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(out->v[0]), by_name);
	return 0;
#endif
}

void heap_image_names_free(struct named_objects *o)
{
	free(o->v);
	o->v = NULL;
	o->n = 0;
}

unsigned heap_image_check(struct image *img, const struct pool *p, char *summary,
			  size_t summary_len, void (*report)(const char *msg, void *arg), void *arg)
{
#ifndef PMT_TOOL_HAVE_HEAP
	(void)img;
	(void)p;
	(void)report;
	(void)arg;
	snprintf(summary, summary_len, "not checked: this build of " TOOL_NAME " has no heap module");
	return 0;
#else
	struct heap_validate_report rep;
	memset(&rep, 0, sizeof(rep));
	meta_sums_verify_with(p);
	unsigned n = heap_validate_image(img->base, img->len, &rep, report, arg);
	if (n != 0) {
		snprintf(summary, summary_len, "%u problem%s", n, n == 1 ? "" : "s");
		return n;
	}
	snprintf(summary, summary_len,
		 "%" PRIu64 " named objects, %" PRIu64 " held for nvrecover, %" PRIu64 " bytes in use, "
		 "%" PRIu64 " spans (%" PRIu64 " pages), %" PRIu64 " large pages, %" PRIu64
		 " free pages in %" PRIu64 " extents",
		 rep.names, rep.held, rep.user_bytes, rep.spans, rep.span_pages, rep.large_pages,
		 rep.free_pages, rep.free_extents);
	return 0;
#endif
}
