/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap -- the persistent allocator.
 *
 * Owns: allocation inside the shadow range.  All of its metadata (size-class
 * spans, free lists, per-thread cache slots, the name table) lives inside the
 * persistent heap, so an epoch captures it consistently with the user data;
 * every operation runs as a failure-atomic section (fase_enter/fase_leave),
 * so a quiescent point never falls in the middle of one.  Size classes with
 * per-thread caches for small objects; page-aligned page runs for large ones.
 * The runtime's own locks are prim_lock, never pthread.
 */
#ifndef PMT_HEAP_H
#define PMT_HEAP_H

#include "base/stats_fields.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Format a new heap over [base, base+len) (zero-filled memory), or adopt the
 * recovered one found there (fresh == false): validates its header, page
 * map and every structure adoption follows (heap_validate.c), then the
 * metadata pages' checksums (heap_set_page_check), then returns blocks
 * left in dead threads' caches to the shared lists.  A heap is never
 * formatted unless fresh: an all-zero header with fresh == false is refused
 * like any other invalid heap.  Returns 0 or -1 with err_get() naming the
 * first problem, its heap offset and the count of others (the range does
 * not hold a sound heap of this format and size); the range is not written
 * then.  base and len must be multiples of 4 KiB; len from about 1 MiB
 * to 4 TiB.  All metadata lives in the range and refers to it by offsets,
 * so a heap copied elsewhere can be adopted there.  Assumes pages the heap
 * never handed out are zero (true of a fresh range and of a restored
 * image): heap_calloc relies on it to leave them untouched.  Not
 * thread-safe: call before any other heap function.  May be called again
 * (tests): threads then claim new cache slots. */
int heap_init(void *base, size_t len, bool fresh);
bool heap_ready(void);
/* The range is about to go (the runtime's start failed after heap_init):
 * heap_ready() is false from now on, so the malloc wrappers send the
 * program's allocations elsewhere instead of into a released range. */
void heap_detach(void);

/* true when p lies in the heap range (whether or not it is allocated). */
bool heap_contains(const void *p);

/* Allocation.  Small blocks (up to 3584 bytes) are 16-byte aligned, larger
 * ones are page runs, page-aligned.  Every call is a failure-atomic section
 * and thread-safe; a block may be freed by any thread. */
void *heap_malloc(size_t size);			/* NULL + ENOMEM when full; not zeroed */
void *heap_calloc(size_t n, size_t size);	/* zeroed; overflow: NULL + ENOMEM */
/* In place while the block still fits (and is not much too big), or a large
 * run can grow into free pages after it; else moves.  size 0 frees p and
 * returns NULL; p NULL is heap_malloc.  On failure p is untouched. */
void *heap_realloc(void *p, size_t size);
/* align: any power of two (else NULL + EINVAL). */
void *heap_memalign(size_t align, size_t size);
/* NULL: nothing.  A pointer that is not an allocated block (outside the
 * heap, interior, never allocated, already freed) is reported with
 * log_msg and ignored where that is cheap to detect.  A named block loses
 * its name (as it does when heap_realloc moves it). */
void heap_free(void *p);
size_t heap_usable_size(const void *p);		/* 0 for NULL or a non-block */
/* The usable size heap_memalign(align, size) would give (heap_malloc for
 * align up to 16), without allocating: jemalloc's nallocx asks it.  0 when
 * size cannot be a block (too big) or before heap_init. */
size_t heap_good_size(size_t size, size_t align);

/* The name table (names up to PMTHREADS_NAME_MAX - 1 bytes), which binds
 * names to objects and records each object's size as it was asked for.
 * heap_name_set binds name to p (recording p's usable size); an existing
 * name is rebound.  -1 + errno: EINVAL (no name, name too long, p not in
 * the heap) or ENOMEM. */
int heap_name_set(const char *name, void *p);
/* The object bound to name (NULL: none), and its recorded size. */
void *heap_name_get(const char *name, size_t *size);

/* nvmalloc: a zeroed object of size bytes bound to name, in one
 * failure-atomic section.  When an earlier run bound the name (this run
 * recovered it), the object it had is *held*: it stays allocated and
 * heap_name_recover copies from it, until the data has been copied into the
 * name's new object, or heap_name_release_held runs (a clean exit), or a
 * later run finds it still held (see heap_names.c for which object that
 * run keeps).  NULL + errno: EINVAL (name too long), ENOMEM. */
void *heap_name_alloc(const char *name, size_t size);
/* nvrecover: the name's recovered data -- its held object if it has one,
 * else its bound object -- copied to dest (size bytes; dest NULL: no copy,
 * and the bound object is the one looked at).  Fails (-1, err_get() says
 * why) with ENOENT when nothing has that name, ERANGE when that object is
 * smaller than size.  Copying a held object into the name's own object
 * (dest == the bound object, all of it or all the held object's bytes)
 * frees the held object in the same failure-atomic section.  *obj (when
 * not NULL) gets the bound object. */
int heap_name_recover(const char *name, void *dest, size_t size, void **obj);
/* Whether this run started after a crash (the runtime says so after
 * heap_init; heap_init assumes it did).  A run that did not has nothing to
 * recover: an object it holds is one it went on without, and a later run
 * keeps the object it went on with. */
void heap_name_after_crash(bool crashed);
/* Free every held object (a clean exit: nothing is left to recover). */
void heap_name_release_held(void);
/* Drop every name bound to p, freeing the objects those names held, and
 * every hold on p (O(1) when p has none). */
void heap_name_remove_ptr(void *p);
/* Iterate bound names (for pmthreads-recover info): calls fn for each, with
 * its recorded size, under the table's lock -- fn must not call heap_name_*
 * functions. */
void heap_name_foreach(void (*fn)(const char *name, void *p, size_t size, void *arg),
		       void *arg);
/* How many objects are held for recovery. */
uint64_t heap_name_held(void);

/* The calling thread is exiting: return its cached blocks and its cache
 * slot (a thread that never calls this keeps its slot until recovery). */
void heap_thread_exit(void);

/* X(kind, field, report key): base/stats_fields.h. */
#define HEAP_STATS_FIELDS(X) \
	/* bytes of the blocks the program holds (usable sizes) */ \
	X(value, bytes_in_use, "heap_bytes_in_use") \
	/* high-water mark of pages handed out (incl. metadata) */ \
	X(value, bytes_mapped, "heap_bytes_mapped") \
	X(value, capacity, "heap_capacity")

struct heap_stats {
	HEAP_STATS_FIELDS(STATS_DECLARE)
};
/* Counters, cheap enough to call at any time (a snapshot, not exact while
 * other threads allocate). */
void heap_get_stats(struct heap_stats *st);

/* Bytes from the heap's base below which every page it has ever written
 * lies: the header, the page map and the pages handed out so far (the
 * high-water mark only grows).  The epoch limits write tracking to it.
 * Exact at a quiescent point (no heap operation runs); SIZE_MAX before
 * heap_init. */
size_t heap_high_water(void);

/* What a full validation found, for tests and the recovery tool. */
struct heap_validate_report {
	uint64_t free_pages;	/* in free extents below the high-water mark */
	uint64_t free_extents;
	uint64_t span_pages;	/* in size-class spans */
	uint64_t spans;
	uint64_t large_pages;	/* in allocated page runs (incl. the name table's, cached ones) */
	uint64_t cached_bytes;	/* blocks sitting in thread caches */
	uint64_t user_bytes;	/* recomputed from the structures: must equal bytes_in_use */
	uint64_t names;
	uint64_t held;		/* objects held for nvrecover (heap_name_alloc) */
};
/* Walk every allocator structure and check it: each page below the
 * high-water mark is in exactly one free extent, span or large run; the
 * free-extent tree is ordered, coalesced and matches the page map; every
 * span's counts and free list, every cached block, the partial lists and
 * the name table are well formed; the byte counters match the blocks
 * actually held.  Returns 0, or -1 with err_get() describing the first
 * problem.  Call only while no other thread uses the heap.  Safe on any
 * content of the range (it is what validates a heap read from a pool). */
int heap_validate_full(struct heap_validate_report *rep);
/* The same walk, reporting every problem through report(msg, arg) (which
 * may be NULL); returns how many. */
unsigned heap_validate_all(struct heap_validate_report *rep,
			void (*report)(const char *msg, void *arg), void *arg);

/* heap_validate_all over the heap image at [base, base+len) as it is, without
 * adopting it (nothing is written; the image may be anything): for
 * pmthreads-recover check.  Afterwards no heap is ready (heap_init again to
 * use one). */
unsigned heap_validate_image(void *base, size_t len, struct heap_validate_report *rep,
			  void (*report)(const char *msg, void *arg), void *arg);

/* Called before the heap first uses pages above its high-water mark:
 * reserve(ctx, first, end) makes pages [first, end) of the range safe to
 * use (the runtime gets them disk space in the pool), or returns -1 with
 * err_get() set, and the allocation fails with ENOMEM.  Only pages the heap
 * may write are asked for: its header, the page-map pages that cover the
 * pages in use, the data pages in use, the latter in chunks of a quarter of
 * the heap in use (1 MiB at least).  NULL: no hook.  Set before heap_init
 * (which reserves what the heap it finds uses). */
void heap_set_reserve(int (*reserve)(void *ctx, uint64_t first, uint64_t end), void *ctx);

/* The allocator's page: 4 KiB whatever the system's, so that a heap's layout
 * does not depend on the machine that made it.  The page checks
 * (heap_set_page_check) count in these pages. */
#define HEAP_PAGE_SHIFT 12

/* Verify each metadata page of a heap read from a pool against the pool's
 * checksum: check(ctx, page, bytes, what, len) returns 0 when page's content
 * (bytes, one page; read only when the page was persisted) matches or the
 * page was never persisted, else -1 with what[] saying where it differs.
 * Asked by heap_init when it adopts a heap (after the structural checks, so
 * that an implausible value is named by its structure) and by
 * heap_validate_image.  NULL: no checksums (a heap not read from a pool). */
void heap_set_page_check(int (*check)(void *ctx, uint64_t page, const void *bytes, char *what,
				      size_t len),
			 void *ctx);

/* When the allocator finds a corrupt structure while running (a span's free
 * list read for the first time), it calls fn(message) and then stops the
 * process.  fn may leave by longjmp (the fuzzer does; the heap is unusable
 * afterwards).  NULL: just stop. */
void heap_set_corruption_handler(void (*fn)(const char *msg));

#endif
