/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap_layout -- the persistent heap's in-range layout, shared by the heap's
 * own files (heap.c, heap_page.c, heap_class.c, heap_names.c, heap_validate.c).
 * Not an interface for other modules: they use heap.h.
 *
 * Layout of [base, base + len), in 4 KiB heap pages:
 *
 *   page 0 ..        struct heap_hdr: format fields, the page-run allocator's
 *                    state, one record per size class, the thread-cache
 *                    slots, the name table's root, the byte counters
 *   next pages       the page map: one uint32_t per heap page
 *   data_start ..    page runs (large objects, size-class spans, the name
 *                    table's bucket arrays) and free extents, handed out
 *                    from the low end; hwm marks the first never-used page
 *
 * Every reference stored in the heap is an offset from base (or a page
 * index), never an address, so the heap stays valid if the runtime has to
 * restore it at another address.  Nothing here needs to be crash-ordered:
 * every heap operation is a failure-atomic section, so an epoch only ever
 * captures the metadata between operations.
 */
#ifndef PMT_HEAP_LAYOUT_H
#define PMT_HEAP_LAYOUT_H

#include "heap/heap.h"
#include "prim/prim.h"

#include <pmthreads.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEAP_PAGE ((size_t)1 << HEAP_PAGE_SHIFT)
#define HEAP_MAGIC 0x3150414548544d50ULL /* "PMTHEAP1" little-endian */
/* 2: size classes from 64 B up are whole cache lines (heap_class.c); a
 * version-1 heap's spans would be carved with the wrong block sizes.
 * 3: name nodes hold names of up to 127 bytes, the object's requested size
 * and the previous run's object kept for nvrecover (struct heap_name_node);
 * a version-2 heap's nodes would be read with the wrong layout. */
#define HEAP_VERSION 3u

#define HEAP_NCLASSES 22
#define HEAP_LINE 64u		/* classes from a line up are whole lines */
#define HEAP_SMALL_MAX 3584u	/* larger requests are page runs */
#define HEAP_NSLOTS 64		/* owned thread caches; slot 0 is the shared one */
#define HEAP_RUN_BINS 32	/* owned slots cache freed runs of 1..32 pages */
#define HEAP_RUN_CACHE_PAGES 256 /* ... at most this many pages in all */

/* ---- page map entries ------------------------------------------------
 * kind in bits 31..30:
 *   NONE   interior page of a large run or of a free extent, a metadata
 *          page, or a page at or above hwm
 *   LARGE  first page of an allocated run; bits 29..0 = its length in pages
 *   SPAN   any page of a size-class span; bits 29..24 = class, 23..0 = the
 *          page's distance from the span's first page
 *   FREE   first or last page of a free extent; bits 29..0 = its length
 */
enum { PM_NONE = 0, PM_LARGE = 1, PM_SPAN = 2, PM_FREE = 3 };
#define PM_LEN_MASK ((1u << 30) - 1)

static inline uint32_t pm_kind(uint32_t e) { return e >> 30; }
static inline uint32_t pm_len(uint32_t e) { return e & PM_LEN_MASK; }
static inline uint32_t pm_make(uint32_t kind, uint32_t len) { return (kind << 30) | len; }
static inline uint32_t pm_span(unsigned cls, uint32_t pgoff)
{
	return ((uint32_t)PM_SPAN << 30) | ((uint32_t)cls << 24) | pgoff;
}
static inline unsigned pm_span_class(uint32_t e) { return (e >> 24) & 63u; }
static inline uint32_t pm_span_pgoff(uint32_t e) { return e & 0xffffffu; }

/* The first 16 bytes of a free small block (in a thread cache or on its
 * span's free list).  tag == offset ^ secret marks it free: a second free of
 * the same block finds the tag and is refused.  Allocation clears it. */
struct heap_block {
	uint64_t next;	/* offset of the next free block, 0 at the end */
	uint64_t tag;
};

/* Header at the start of each size-class span (its first block starts at
 * heap_cls[cls].first, past this header). */
#define SPAN_MAGIC 0x5350414eu
struct heap_span {
	uint32_t magic;
	uint16_t cls;
	uint16_t in_list;	/* on its class's partial list */
	uint32_t nblocks;
	uint32_t bump;		/* blocks [0, bump) have been carved */
	uint32_t used;		/* carved blocks not on the span's free list */
	uint32_t nfree;		/* blocks on the free list */
	uint64_t free_head;	/* offset of the first free block */
	uint64_t next, prev;	/* offsets of neighbours on the partial list */
	uint64_t reserved[2];
};

/* Per size class, shared: spans that still have room (free or uncarved
 * blocks).  Full spans are on no list; a free into one relinks it. */
struct heap_class_state {
	prim_lock_t lock;
	uint32_t pad0;
	uint64_t partial;	/* offset of the first span with room, 0: none */
	uint64_t nspans;	/* spans of this class in existence */
	uint64_t pad1[5];
} __attribute__((aligned(64)));

struct heap_bin {
	uint64_t head;		/* offset of the first cached block */
	uint32_t count;
	uint32_t pad;
};

/* A thread cache.  Slots 1..HEAP_NSLOTS are owned by one thread each (owner
 * != 0) and touched only by it, without a lock; slot 0 is shared by threads
 * that found no free slot and is used under its lock.  Owned slots also
 * keep a few freed page runs (still tagged LARGE in the page map, marked
 * free by the block tag), so that a program cycling through blocks of some
 * tens of KiB does not take the page lock each time. */
struct heap_slot {
	_Atomic uint32_t owner;	/* 0: free; else the owning thread's tid */
	prim_lock_t lock;	/* slot 0 only */
	_Atomic int64_t in_use;	/* user bytes allocated minus freed via this slot */
	struct heap_bin bins[HEAP_NCLASSES];
	struct heap_bin runs[HEAP_RUN_BINS];	/* runs[i]: runs of i + 1 pages */
	uint32_t run_pages;	/* pages cached in runs[] */
	uint32_t pad;
} __attribute__((aligned(64)));

struct heap_hdr {
	/* format: checked by heap_init on recovery */
	uint64_t magic;
	uint32_t version;
	uint32_t page_size;
	uint64_t capacity;	/* bytes of the range */
	uint64_t npages;
	uint64_t data_start;	/* first data page (after header + page map) */
	uint32_t nclasses, nslots;
	uint64_t secret;	/* for free-block tags */
	uint64_t reserved[8];

	/* page-run allocator, under page_lock */
	prim_lock_t page_lock;
	uint32_t pad0;
	uint64_t hwm;		/* pages [hwm, npages) have never been handed out */
	uint64_t free_root;	/* page index of the free-extent tree's root */
	uint64_t free_pages;	/* pages in free extents */
	uint64_t free_extents;
	uint64_t large_pages;	/* pages in allocated large runs */

	/* byte counters (see heap_get_stats) */
	_Atomic int64_t in_use_shared;	/* folded in from released slots */
	_Atomic int64_t meta_bytes;	/* the heap's own allocations (names) */

	/* name table, under name_lock */
	prim_lock_t name_lock;
	uint32_t pad1;
	uint64_t name_buckets;	/* page index of the bucket run, 0: none yet */
	uint64_t name_nbuckets;	/* per chain kind; power of two */
	_Atomic uint64_t name_count;	/* bound nodes (on both chains) */
	_Atomic uint64_t name_held;	/* held nodes (on object chains only) */

	struct heap_class_state classes[HEAP_NCLASSES];
	struct heap_slot slots[HEAP_NSLOTS + 1];
};

/* What a size class looks like; derived from the size alone, so it lives in
 * DRAM and is rebuilt by heap_classes_init(). */
struct heap_class_info {
	uint32_t size;
	uint32_t align;		/* every block's address is a multiple of this */
	uint32_t first;		/* offset of block 0 in its span */
	uint32_t span_pages;
	uint32_t nblocks;
	uint32_t limit;		/* thread-cache capacity, blocks */
	uint32_t batch;		/* blocks moved per refill or flush */
	uint32_t end;		/* first + nblocks * size */
	/* x is a multiple of size iff (x & low) == 0 and
	 * (uint32_t)((x >> shift) * inv) <= lim   (size = odd << shift) */
	uint32_t low, shift, inv, lim;
};
extern struct heap_class_info heap_cls[HEAP_NCLASSES];
extern uint8_t heap_cls_of[HEAP_SMALL_MAX / 16 + 1];
void heap_classes_init(void);

static inline unsigned heap_class_for(size_t size)
{
	return heap_cls_of[(size + 15) >> 4];
}

/* The mapped heap: DRAM state derived from the range at heap_init. */
struct heap_rt {
	char *base;
	size_t len;
	struct heap_hdr *hdr;
	uint32_t *pagemap;
	uint64_t secret;
	uint64_t gen;		/* bumped by each heap_init: invalidates thread caches' TLS */
	int (*reserve)(void *ctx, uint64_t first, uint64_t end);	/* heap_set_reserve */
	void *reserve_ctx;
	uint64_t reserved;	/* data pages below this have been made safe */
	/* This run of the heap: a value no earlier heap_init gave, so that a
	 * name bound by an earlier run (the one that crashed) is told from one
	 * bound by this run (heap_names.c). */
	uint64_t run;
	bool after_crash;	/* heap_name_after_crash: this run recovered a crash */
	/* heap_set_page_check: the checksum of each metadata page read from
	 * a pool, verified at adoption and by heap_validate_image. */
	int (*page_check)(void *ctx, uint64_t page, const void *bytes, char *what, size_t len);
	void *page_check_ctx;
};
extern struct heap_rt heap_rt;

static inline void *heap_at(uint64_t off) { return heap_rt.base + off; }
static inline uint64_t heap_off(const void *p) { return (uint64_t)((const char *)p - heap_rt.base); }
static inline uint64_t heap_tag(uint64_t off) { return off ^ heap_rt.secret; }

/* ---- page runs (heap_page.c) ----------------------------------------- */
/* Ask the reservation hook for what pages [data_start, new_hwm) need (see
 * heap_set_reserve); false when refused.  Under the page lock, or alone. */
bool heap_reserve_to(uint64_t new_hwm);
/* Whether the calling thread's last growth was refused by the hook (and
 * forget it). */
bool heap_reserve_refused(void);
/* No room for size bytes: ENOMEM, and unless the hook refused, err_set with
 * the capacity that would fit (logged once per process). */
void heap_report_full(size_t size);
#define HEAP_RUN_LARGE 0xffu	/* cls argument: a large run, not a span */
/* Hand out n pages aligned to align bytes (a power of two; 0 or <= a page:
 * no constraint), tagging them in the page map as a large run or as a span
 * of class cls.  *fresh is set when every page comes from above the old hwm
 * (never used: still zero).  Returns the first page index, or 0 when there
 * is no room. */
uint64_t heap_pages_alloc(uint64_t n, size_t align, unsigned cls, bool *fresh);
/* Return run [pg, pg+n) (untags it, coalesces with free neighbours). */
void heap_pages_free(uint64_t pg, uint64_t n);
/* Free the large run whose first page is pg, after checking it is one.
 * Returns its length in pages, or 0 (not an allocated run: nothing done). */
uint64_t heap_pages_free_large(uint64_t pg);
/* Resize the large run at pg (n pages) to newn in place: shrinking always
 * works, growing only into a free extent or the never-used pages right
 * after it.  Returns true when done. */
bool heap_pages_resize(uint64_t pg, uint64_t n, uint64_t newn);
/* Format the page allocator's fields of a new heap. */
void heap_pages_format(void);

/* ---- size classes and thread caches (heap_class.c) ------------------- */
/* The calling thread's slot, claiming one on first use (slot 0, the shared
 * one, when all are taken). */
struct heap_slot *heap_slot_claim(void);
/* Bin c of slot s is empty: refill it from the class's spans and return one
 * block, or NULL + ENOMEM.  Caller holds slot 0's lock when s is slot 0. */
void *heap_class_refill(struct heap_slot *s, unsigned c);
/* Return bin c's blocks to their spans until keep remain. */
void heap_class_flush(struct heap_slot *s, unsigned c, uint32_t keep);
/* Empty every bin of s, the run bins too. */
void heap_slot_flush_all(struct heap_slot *s);
/* The run caches: pop a cached run of n pages (page index, 0: none); push
 * the run at page pg of n pages (false: no room, the caller frees it). */
uint64_t heap_run_cache_pop(struct heap_slot *s, uint64_t n);
bool heap_run_cache_push(struct heap_slot *s, uint64_t pg, uint64_t n);
/* Give s back (flushes it and folds its byte counter into the header). */
void heap_slot_release(struct heap_slot *s);
/* Free the empty spans each class keeps in reserve (on out-of-space). */
void heap_class_release_empty(void);
/* The span holding offset off, given its page map entry. */
static inline uint64_t heap_span_of(uint64_t off, uint32_t e)
{
	return ((off >> HEAP_PAGE_SHIFT) - pm_span_pgoff(e)) << HEAP_PAGE_SHIFT;
}
/* Is off the start of a block of the span at span_off of class c? */
static inline bool heap_block_valid(uint64_t off, uint64_t span_off, const struct heap_class_info *ci)
{
	uint64_t rel = off - span_off;
	if (rel < ci->first || rel >= ci->end)
		return false;
	uint32_t x = (uint32_t)(rel - ci->first);
	return (x & ci->low) == 0 && (uint32_t)((x >> ci->shift) * ci->inv) <= ci->lim;
}

/* ---- internal allocation (heap.c): no FASE, no user byte count ------- */
void *heap_alloc_meta(size_t size);
void heap_free_meta(void *p);
size_t heap_usable_internal(const void *p);

/* Free a user block whose names the caller has already dropped (the name
 * table frees objects it holds under its own lock). */
void heap_free_unnamed(void *p);

/* ---- name table (heap_names.c) --------------------------------------- */
/* A node of the name table, a small block from the heap itself.  A *bound*
 * node binds name to obj and is on a name chain and an object chain.  A
 * *held* node keeps the object a name had when this run started, after
 * nvmalloc rebound the name, so that nvrecover can still copy it (see
 * heap_names.c); it is on an object chain only, and the bound node of the
 * same name points to it (link) as it points back. */
#define HEAP_NAME_HELD 1u	/* flags: a held node */
#define HEAP_NAME_TAKEN 2u	/* held node: the run that holds it went on from an
				 * object of its own -- nvrecover copied the held one
				 * elsewhere than into the name's object, or the run
				 * did not start after a crash (nothing to recover) */
struct heap_name_node {
	char name[PMTHREADS_NAME_MAX];
	uint64_t obj;		/* offset of the object */
	uint64_t size;		/* its size, as nvmalloc was asked for it */
	uint64_t run;		/* bound node: the heap_rt.run that bound it */
	uint64_t link;		/* bound: its held node (0: none); held: its bound node */
	uint32_t flags;
	uint32_t pad;
	uint64_t next_name;	/* offset of the next node on the name chain */
	uint64_t next_obj;	/* ... on the object chain */
};
/* The name table's two chain hashes: a name's (FNV-1a) and an object
 * offset's.  heap_validate.c recomputes them to find misplaced entries, so both
 * files must use these. */
static inline uint64_t heap_name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}
static inline uint64_t heap_obj_hash(uint64_t off)
{
	uint64_t z = off * 0x9e3779b97f4a7c15ULL;
	return z ^ (z >> 29);
}
void heap_names_format(void);
/* heap_realloc resized the page run p in place: its names (and holds)
 * record the new size (O(1) when nothing is named). */
void heap_name_note_size(void *p, size_t size);

/* ---- validation (heap_validate.c) ---------------------------------------- */
/* heap_init's check of a heap being adopted (the range must be set up in
 * heap_rt): 0, or -1 with err_get() naming the first problem.  report, when
 * not NULL, gets every problem. */
int heap_validate(void (*report)(const char *msg, void *arg), void *arg);
struct heap_validate_report;
/* heap_validate_all plus the metadata pages' checksums (heap_set_page_check),
 * for heap_validate_image. */
unsigned heap_validate_image_all(struct heap_validate_report *rep,
				 void (*report)(const char *msg, void *arg), void *arg);
/* The page-map pages begin after the header's: its page count. */
static inline uint64_t heap_hdr_pages(void)
{
	return (sizeof(struct heap_hdr) + HEAP_PAGE - 1) >> HEAP_PAGE_SHIFT;
}
/* A structure read from the heap failed a check on the allocation path:
 * says which and where, then stops the process (log_fatal) -- continuing
 * would spread the damage.  The pool keeps its last durable epoch. */
__attribute__((noreturn, format(printf, 1, 2))) void heap_corrupt(const char *fmt, ...);

#endif
