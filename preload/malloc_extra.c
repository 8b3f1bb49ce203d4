/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * malloc_extra -- the malloc family beyond the C standard's: jemalloc's
 * extended interface, which a program linked with jemalloc calls by name,
 * and the statistics.
 *
 * jemalloc's mallocx, rallocx, xallocx, sallocx, dallocx, sdallocx and
 * nallocx take or size blocks, so they must never see one of the heap's:
 * in malloc mode they allocate from the heap, and a block is told by its
 * address as in malloc.c; outside it they are jemalloc's own (the next
 * definitions), or, in a process without jemalloc, built on the next
 * allocator.  mallctl and malloc_stats_print only describe jemalloc and
 * are not wrapped.  mallinfo, mallinfo2, malloc_stats and malloc_info
 * describe the persistent heap (plus the next allocator's blocks) in malloc
 * mode.  mallopt and malloc_trim are not wrapped: they tune and trim the
 * blocks outside the heap; the heap has no tunables and its pages are the
 * pool's.
 */
#include "base/export.h"
#include "malloc_next.h"
#include "preload.h"
#include "runtime/interpose.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* jemalloc's flags (jemalloc.h): the alignment's log2 in the low six bits,
 * and zeroing; the tcache and arena bits mean nothing to the heap. */
#define MALLOCX_LG_ALIGN_MASK 0x3f
#define MALLOCX_ZERO_FLAG 0x40

static size_t flags_align(int flags)
{
	int lg = flags & MALLOCX_LG_ALIGN_MASK;
	return lg == 0 ? 0 : (size_t)1 << lg;
}

/* One allocator's primitives, for building jemalloc's calls on it. */
struct alloc_ops {
	void *(*aligned)(size_t align, size_t n);	/* align 0: any */
	void *(*resize)(void *p, size_t n);
	void (*release)(void *p);
	size_t (*usable)(void *p);
};

static void *heap_aligned(size_t align, size_t n) { return heap_memalign(align ? align : 1, n); }
static size_t heap_usable(void *p) { return heap_usable_size(p); }
static const struct alloc_ops heap_ops = { heap_aligned, heap_realloc, heap_free, heap_usable };

static void *next_resize(void *p, size_t n) { return malloc_next()->realloc(p, n); }
static void next_release(void *p) { malloc_next()->free(p); }
static size_t next_usable(void *p)
{
	size_t (*usable)(void *) = malloc_next()->usable_size;
	return usable != NULL ? usable(p) : 0;
}
static const struct alloc_ops next_ops = { malloc_next_aligned, next_resize, next_release,
					   next_usable };

static void *mallocx_on(const struct alloc_ops *o, size_t size, int flags)
{
	void *p = o->aligned(flags_align(flags), size);
	if (p != NULL && (flags & MALLOCX_ZERO_FLAG))
		memset(p, 0, o->usable(p));
	return p;
}

/* p (o's, not NULL) resized to size with flags' alignment; newly usable
 * bytes zeroed when asked.  On failure p is untouched. */
static void *rallocx_on(const struct alloc_ops *o, void *p, size_t size, int flags)
{
	size_t align = flags_align(flags);
	size_t old = o->usable(p);
	void *q;
	if (align > 16) {
		if (((uintptr_t)p & (align - 1)) == 0 && size <= old)
			return p;
		q = o->aligned(align, size);
		if (q == NULL)
			return NULL;
		memcpy(q, p, old < size ? old : size);
		o->release(p);
	} else {
		q = o->resize(p, size);
		if (q == NULL)
			return NULL;
	}
	size_t now = o->usable(q);
	if ((flags & MALLOCX_ZERO_FLAG) && now > old)
		memset((char *)q + old, 0, now - old);
	return q;
}

/* A block outside the heap and the boot arena: the next allocator's. */
static bool next_block(const void *p)
{
	return !heap_contains(p) && !malloc_boot_contains(p);
}

static size_t block_size(void *p)
{
	if (heap_contains(p))
		return heap_usable_size(p);
	if (malloc_boot_contains(p))
		return malloc_boot_size(p);
	return next_usable(p);
}

PMT_EXPORT void *mallocx(size_t size, int flags)
{
	if (malloc_from_heap())
		return mallocx_on(&heap_ops, size, flags);
	const struct malloc_next *a = malloc_next();
	return a->mallocx != NULL ? a->mallocx(size, flags) : mallocx_on(&next_ops, size, flags);
}

PMT_EXPORT void *rallocx(void *p, size_t size, int flags)
{
	/* size 0 is undefined for jemalloc; realloc would free the block */
	if (size == 0)
		size = 1;
	if (heap_contains(p))
		return rallocx_on(&heap_ops, p, size, flags);
	bool heap = malloc_from_heap();
	const struct malloc_next *a = malloc_next();
	if (!heap && !malloc_boot_contains(p))
		return a->rallocx != NULL ? a->rallocx(p, size, flags)
					  : rallocx_on(&next_ops, p, size, flags);
	/* a boot block, or (malloc mode) the next allocator's moved into
	 * the heap, as realloc does */
	void *q = heap ? mallocx_on(&heap_ops, size, flags) : mallocx(size, flags);
	if (q == NULL)
		return NULL;
	size_t old = block_size(p);
	memcpy(q, p, old < size ? old : size);
	if (!malloc_boot_contains(p))
		a->free(p);
	return q;
}

PMT_EXPORT size_t xallocx(void *p, size_t size, size_t extra, int flags)
{
	/* The heap never resizes in place for this: the size stays, which
	 * jemalloc's contract allows ("cannot be grown in place"). */
	const struct malloc_next *a;
	if (next_block(p) && (a = malloc_next())->xallocx != NULL)
		return a->xallocx(p, size, extra, flags);
	return block_size(p);
}

PMT_EXPORT size_t sallocx(const void *p, int flags)
{
	const struct malloc_next *a;
	if (next_block(p) && (a = malloc_next())->sallocx != NULL)
		return a->sallocx(p, flags);
	return block_size((void *)p);
}

PMT_EXPORT void dallocx(void *p, int flags)
{
	const struct malloc_next *a;
	if (p != NULL && next_block(p) && (a = malloc_next())->dallocx != NULL)
		a->dallocx(p, flags);
	else
		free(p);
}

PMT_EXPORT void sdallocx(void *p, size_t size, int flags)
{
	const struct malloc_next *a;
	if (p != NULL && next_block(p) && (a = malloc_next())->sdallocx != NULL)
		a->sdallocx(p, size, flags);
	else
		free(p);
}

PMT_EXPORT size_t nallocx(size_t size, int flags)
{
	if (malloc_from_heap())
		return heap_good_size(size, flags_align(flags));
	const struct malloc_next *a = malloc_next();
	if (a->nallocx != NULL)
		return a->nallocx(size, flags);
	/* no jemalloc: ask the allocator itself */
	void *p = malloc_next_aligned(flags_align(flags), size);
	if (p == NULL)
		return 0;
	size_t n = next_usable(p);
	a->free(p);
	return n;
}

/* The persistent heap's figures in mallinfo2's fields, plus the next
 * allocator's (which holds the blocks that stay outside the heap). */
static struct mallinfo2 heap_mallinfo2(void)
{
	struct mallinfo2 m;
	memset(&m, 0, sizeof(m));
	const struct malloc_next *a = malloc_next();
	if (a->mallinfo2 != NULL)
		m = a->mallinfo2();
	struct heap_stats st;
	heap_get_stats(&st);
	m.arena += st.bytes_mapped;
	m.uordblks += st.bytes_in_use;
	m.fordblks += st.bytes_mapped > st.bytes_in_use ? st.bytes_mapped - st.bytes_in_use : 0;
	return m;
}

static bool heap_answers(void)
{
	return preload_malloc_mode && heap_ready();
}

PMT_EXPORT struct mallinfo2 mallinfo2(void)
{
	if (heap_answers())
		return heap_mallinfo2();
	const struct malloc_next *a = malloc_next();
	struct mallinfo2 m;
	memset(&m, 0, sizeof(m));
	return a->mallinfo2 != NULL ? a->mallinfo2() : m;
}

static int clamp_int(size_t v)
{
	return v > INT_MAX ? INT_MAX : (int)v;
}

PMT_EXPORT struct mallinfo mallinfo(void)
{
	const struct malloc_next *a = malloc_next();
	struct mallinfo m;
	memset(&m, 0, sizeof(m));
	if (!heap_answers())
		return a->mallinfo != NULL ? a->mallinfo() : m;
	struct mallinfo2 m2 = heap_mallinfo2();
	m.arena = clamp_int(m2.arena);
	m.ordblks = clamp_int(m2.ordblks);
	m.smblks = clamp_int(m2.smblks);
	m.hblks = clamp_int(m2.hblks);
	m.hblkhd = clamp_int(m2.hblkhd);
	m.usmblks = clamp_int(m2.usmblks);
	m.fsmblks = clamp_int(m2.fsmblks);
	m.uordblks = clamp_int(m2.uordblks);
	m.fordblks = clamp_int(m2.fordblks);
	m.keepcost = clamp_int(m2.keepcost);
	return m;
}

PMT_EXPORT void malloc_stats(void)
{
	if (!heap_answers()) {
		const struct malloc_next *a = malloc_next();
		if (a->malloc_stats != NULL)
			a->malloc_stats();
		return;
	}
	struct heap_stats st;
	heap_get_stats(&st);
	struct mallinfo2 m = heap_mallinfo2();
	fprintf(stderr,
		"Persistent heap (pmthreads):\n"
		"system bytes     = %10zu\n"
		"in use bytes     = %10zu\n"
		"Total (incl. blocks outside the heap):\n"
		"system bytes     = %10zu\n"
		"in use bytes     = %10zu\n"
		"max mmap regions = %10zu\n"
		"max mmap bytes   = %10zu\n",
		(size_t)st.bytes_mapped, (size_t)st.bytes_in_use, m.arena + m.hblkhd,
		m.uordblks + m.hblkhd, m.hblks, m.hblkhd);
}

PMT_EXPORT int malloc_info(int options, FILE *fp)
{
	if (!heap_answers()) {
		const struct malloc_next *a = malloc_next();
		if (a->malloc_info != NULL)
			return a->malloc_info(options, fp);
		errno = ENOSYS;
		return -1;
	}
	if (options != 0) {
		errno = EINVAL;
		return -1;
	}
	struct mallinfo2 m = heap_mallinfo2();
	/* glibc's elements, one heap: the persistent one with what lies
	 * outside it */
	fprintf(fp,
		"<malloc version=\"1\">\n"
		"<heap nr=\"0\">\n<sizes>\n</sizes>\n"
		"<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
		"<total type=\"rest\" count=\"0\" size=\"%zu\"/>\n"
		"<system type=\"current\" size=\"%zu\"/>\n"
		"<system type=\"max\" size=\"%zu\"/>\n"
		"</heap>\n"
		"<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
		"<total type=\"rest\" count=\"0\" size=\"%zu\"/>\n"
		"<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n"
		"<system type=\"current\" size=\"%zu\"/>\n"
		"<system type=\"max\" size=\"%zu\"/>\n"
		"</malloc>\n",
		m.fordblks, m.arena, m.arena, m.fordblks, m.hblks, m.hblkhd, m.arena, m.arena);
	return 0;
}
