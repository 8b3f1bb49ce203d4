/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap -- the persistent allocator's front: formatting and adopting a heap,
 * and the public operations, each one failure-atomic (fase_enter/leave).
 *
 * Requests up to HEAP_SMALL_MAX bytes go to a size class through the
 * calling thread's cache (heap_class.c); larger ones are page runs
 * (heap_page.c).  Which of the two a pointer is comes from the page map, so
 * blocks carry no header.
 */
#include "heap/heap.h"

#include "heap/heap_layout.h"
#include "base/assert.h"
#include "base/log.h"
#include "quiesce/quiesce.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

struct heap_rt heap_rt;

/* ---- formatting and recovery -------------------------------------------- */

static size_t meta_pages(uint64_t npages)
{
	size_t hdr = (sizeof(struct heap_hdr) + HEAP_PAGE - 1) & ~(HEAP_PAGE - 1);
	size_t map = (npages * sizeof(uint32_t) + HEAP_PAGE - 1) & ~(HEAP_PAGE - 1);
	return (hdr + map) >> HEAP_PAGE_SHIFT;
}

/* The smallest heap: its metadata plus room for a few spans. */
#define HEAP_MIN_DATA_PAGES 64u

static bool all_zero(const void *p, size_t n)
{
	const uint64_t *w = p;
	for (size_t i = 0; i < n / sizeof(uint64_t); i++)
		if (w[i] != 0)
			return false;
	return true;
}

static void format(void)
{
	struct heap_hdr *h = heap_rt.hdr;
	memset(h, 0, sizeof(*h));
	h->version = HEAP_VERSION;
	h->page_size = (uint32_t)HEAP_PAGE;
	h->capacity = heap_rt.len;
	h->npages = heap_rt.len >> HEAP_PAGE_SHIFT;
	h->data_start = meta_pages(h->npages);
	h->nclasses = HEAP_NCLASSES;
	h->nslots = HEAP_NSLOTS;
	/* Any value that differs between heaps will do; the address and the
	 * clock make a collision with user data that happens to look like a
	 * free tag implausible. */
	uint64_t s = prim_now_ns() ^ (uint64_t)(uintptr_t)heap_rt.base;
	s = (s ^ (s >> 31)) * 0x9e3779b97f4a7c15ULL;
	h->secret = s | 1;
	heap_pages_format();
	heap_names_format();
	/* magic last: a heap caught half-formatted has none */
	h->magic = HEAP_MAGIC;
}

/* After a crash no thread survives: hand every cached block back and free
 * every slot.  Locks cannot be held at a quiescent point, but an image
 * taken any other way (a test's copy) is no reason to hang: reset them. */
static void adopt(void)
{
	struct heap_hdr *h = heap_rt.hdr;
	h->page_lock = (prim_lock_t)PRIM_LOCK_INIT;
	h->name_lock = (prim_lock_t)PRIM_LOCK_INIT;
	for (unsigned c = 0; c < HEAP_NCLASSES; c++)
		h->classes[c].lock = (prim_lock_t)PRIM_LOCK_INIT;
	for (unsigned i = 0; i <= HEAP_NSLOTS; i++) {
		struct heap_slot *s = &h->slots[i];
		s->lock = (prim_lock_t)PRIM_LOCK_INIT;
		if (i == 0 || atomic_load_explicit(&s->owner, memory_order_relaxed) != 0)
			heap_slot_release(s);
	}
}

/* The heap's locks in the order its operations nest them: the name table
 * allocates, the shared slot refills from a class, a class takes page runs.
 * Taken around fork, as glibc takes its arenas': a fork child goes on
 * allocating from the same heap (its private copy), which must be whole. */
static prim_lock_t *heap_lock(size_t i)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (h == NULL)
		return NULL;
	if (i == 0)
		return &h->name_lock;
	if (i == 1)
		return &h->slots[0].lock;
	if (i - 2 < HEAP_NCLASSES)
		return &h->classes[i - 2].lock;
	return i - 2 == HEAP_NCLASSES ? &h->page_lock : NULL;
}
PRIM_LOCK_KIND(heap_locks, "heap: the name table, the shared slot, each class, the page runs",
	       PRIM_FORK_HEAP, heap_lock);

int heap_init(void *base, size_t len, bool fresh)
{
	if (base == NULL || ((uintptr_t)base & (HEAP_PAGE - 1)) != 0 || (len & (HEAP_PAGE - 1)) != 0) {
		err_set("heap: range %p + %zu is not %zu-byte aligned", base, len, HEAP_PAGE);
		return -1;
	}
	uint64_t npages = len >> HEAP_PAGE_SHIFT;
	if (npages > PM_LEN_MASK || npages < meta_pages(npages) + HEAP_MIN_DATA_PAGES) {
		const size_t kib = HEAP_PAGE / 1024;
		err_set("heap: a range of %zu bytes cannot hold a heap (its metadata alone takes "
			"%zu KiB, plus %zu KiB of data at least; at most 4 TiB)", len,
			meta_pages(npages) * kib, HEAP_MIN_DATA_PAGES * kib);
		return -1;
	}
	heap_classes_init();
	fase_enter();
	heap_rt.base = base;
	heap_rt.len = len;
	heap_rt.hdr = base;
	heap_rt.pagemap = (uint32_t *)((char *)base + ((sizeof(struct heap_hdr) + HEAP_PAGE - 1) &
						      ~(HEAP_PAGE - 1)));
	heap_rt.gen++;
	heap_rt.reserved = 0;
	/* Distinct from every earlier run's: the clock, the process and a
	 * counter (tests call heap_init more than once a nanosecond apart). */
	static uint64_t inits;
	uint64_t r = prim_now_ns() ^ ((uint64_t)prim_getpid() << 40) ^ ++inits;
	heap_rt.run = ((r ^ (r >> 29)) * 0x9e3779b97f4a7c15ULL) | 1;
	heap_rt.after_crash = true;
	int rc = 0;
	if (fresh) {
		format();
	} else if (all_zero(base, sizeof(struct heap_hdr))) {
		/* Never formatted over: a pool that made epochs durable holds a
		 * heap, and an all-zero header means its page 0 was lost. */
		err_set("heap header (heap offset 0): all zeros, but a heap is expected there "
			"(the pool's copy of page 0 or its seq entry is corrupt)");
		rc = -1;
	} else {
		heap_rt.secret = heap_rt.hdr->secret;
		if (heap_validate(NULL, NULL) != 0)
			rc = -1;
		else
			adopt();
	}
	if (rc == 0 && heap_rt.reserve != NULL) {
		/* the header pages, then the data in use and its page map */
		uint64_t hdr_pages = (uint64_t)((char *)heap_rt.pagemap - heap_rt.base) >> HEAP_PAGE_SHIFT;
		heap_rt.reserved = heap_rt.hdr->data_start;
		if (heap_rt.reserve(heap_rt.reserve_ctx, 0, hdr_pages) != 0 ||
		    !heap_reserve_to(heap_rt.hdr->hwm > heap_rt.hdr->data_start ? heap_rt.hdr->hwm
									: heap_rt.hdr->data_start + 1))
			rc = -1;
	}
	if (rc == 0)
		heap_rt.secret = heap_rt.hdr->secret;
	else
		heap_rt.hdr = NULL;	/* heap_ready() false */
	fase_leave();
	return rc;
}

unsigned heap_validate_image(void *base, size_t len, struct heap_validate_report *rep,
			  void (*report)(const char *msg, void *arg), void *arg)
{
	uint64_t npages = len >> HEAP_PAGE_SHIFT;
	if (base == NULL || ((uintptr_t)base & (HEAP_PAGE - 1)) != 0 || (len & (HEAP_PAGE - 1)) != 0 ||
	    npages > PM_LEN_MASK || npages < meta_pages(npages) + HEAP_MIN_DATA_PAGES) {
		if (report != NULL)
			report("the range cannot hold a heap", arg);
		return 1;
	}
	heap_classes_init();
	heap_rt.base = base;
	heap_rt.len = len;
	heap_rt.hdr = base;
	heap_rt.pagemap = (uint32_t *)((char *)base + ((sizeof(struct heap_hdr) + HEAP_PAGE - 1) &
						      ~(HEAP_PAGE - 1)));
	heap_rt.secret = heap_rt.hdr->secret;
	heap_rt.gen++;
	unsigned n = heap_validate_image_all(rep, report, arg);
	heap_rt.hdr = NULL;
	return n;
}

void heap_set_page_check(int (*check)(void *ctx, uint64_t page, const void *bytes, char *what,
				      size_t len),
			 void *ctx)
{
	heap_rt.page_check = check;
	heap_rt.page_check_ctx = ctx;
}

void heap_set_reserve(int (*reserve)(void *ctx, uint64_t first, uint64_t end), void *ctx)
{
	heap_rt.reserve = reserve;
	heap_rt.reserve_ctx = ctx;
	heap_rt.reserved = 0;
}

static void (*corrupt_handler)(const char *msg);

void heap_set_corruption_handler(void (*fn)(const char *msg)) { corrupt_handler = fn; }

void heap_corrupt(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (corrupt_handler != NULL)
		corrupt_handler(msg);
	log_fatal("the persistent heap is corrupt: %s; stopping before the damage spreads (the "
		  "pool keeps its last durable epoch: pmthreads-recover check lists the "
		  "problems)", msg);
}

bool heap_ready(void) { return heap_rt.hdr != NULL; }
void heap_detach(void) { heap_rt.hdr = NULL; }

bool heap_contains(const void *p)
{
	return heap_rt.hdr != NULL && (uintptr_t)p - (uintptr_t)heap_rt.base < heap_rt.len;
}

/* ---- allocation ------------------------------------------------------------ */

static inline void count_bytes(struct heap_slot *s, int64_t delta)
{
	atomic_store_explicit(&s->in_use,
			      atomic_load_explicit(&s->in_use, memory_order_relaxed) + delta,
			      memory_order_relaxed);
}

static inline void *bin_pop(struct heap_slot *s, unsigned c)
{
	struct heap_bin *bin = &s->bins[c];
	uint64_t off = bin->head;
	if (likely(off != 0)) {
		struct heap_block *blk = heap_at(off);
		bin->head = blk->next;
		bin->count--;
		blk->tag = 0;
		return blk;
	}
	return heap_class_refill(s, c);
}

/* A block of class c from the thread's cache; counts it as user bytes when
 * user is set (the name table's own blocks are metadata). */
static void *small_alloc(unsigned c, bool user)
{
	PMT_ASSERT(c < HEAP_NCLASSES);
	struct heap_slot *s = heap_slot_claim();
	void *p;
	if (likely(s != &heap_rt.hdr->slots[0])) {
		p = bin_pop(s, c);
		if (likely(p != NULL) && user)
			count_bytes(s, heap_cls[c].size);
		return p;
	}
	prim_lock(&s->lock);
	p = bin_pop(s, c);
	if (p != NULL && user)
		count_bytes(s, heap_cls[c].size);
	prim_unlock(&s->lock);
	return p;
}

/* Out of capacity: say so, with a capacity that would have fitted (a
 * power of two, so that a new pool made with it has room to grow).  A
 * refused disk reservation has said why already. */
void heap_report_full(size_t size)
{
	errno = ENOMEM;
	if (heap_reserve_refused())
		return;
	uint64_t used = heap_rt.hdr != NULL ? heap_rt.hdr->hwm << HEAP_PAGE_SHIFT : 0;
	uint64_t fit = 1ULL << 20;
	while (fit < heap_rt.len + (uint64_t)size && fit < (1ULL << 40))
		fit <<= 1;
	const char *unit = fit >= (1ULL << 30) ? "G" : "M";
	unsigned long long fit_units = fit >> (fit >= (1ULL << 30) ? 30 : 20);
	err_set("the persistent heap is full: %zu bytes requested, %llu MiB of its %llu MiB in "
		"use; a pool of PMTHREADS_POOL_SIZE=%llu%s would fit it (set it for a new pool: "
		"an existing pool keeps its size)", size, (unsigned long long)(used >> 20),
		(unsigned long long)(heap_rt.len >> 20), fit_units, unit);
	static _Atomic bool told;
	if (!atomic_exchange(&told, true))
		log_msg(LOG_ERR, "%s", err_get());
}

static void *large_alloc(size_t size, size_t align, bool *fresh)
{
	uint64_t n = (size + HEAP_PAGE - 1) >> HEAP_PAGE_SHIFT;
	if (size > heap_rt.len) {
		heap_report_full(size);
		return NULL;
	}
	if (align <= HEAP_PAGE) {
		struct heap_slot *s = heap_slot_claim();
		uint64_t pg;
		if (s != &heap_rt.hdr->slots[0] && (pg = heap_run_cache_pop(s, n)) != 0) {
			*fresh = false;
			count_bytes(s, (int64_t)(n << HEAP_PAGE_SHIFT));
			return heap_at(pg << HEAP_PAGE_SHIFT);
		}
	}
	uint64_t pg = heap_pages_alloc(n, align, HEAP_RUN_LARGE, fresh);
	if (pg == 0) {
		/* pages held by cached blocks and reserve spans may coalesce */
		struct heap_slot *s = heap_slot_claim();
		if (s == &heap_rt.hdr->slots[0])
			prim_lock(&s->lock);
		heap_slot_flush_all(s);
		if (s == &heap_rt.hdr->slots[0])
			prim_unlock(&s->lock);
		heap_class_release_empty();
		pg = heap_pages_alloc(n, align, HEAP_RUN_LARGE, fresh);
	}
	if (pg == 0) {
		heap_report_full(size);
		return NULL;
	}
	struct heap_slot *s = heap_slot_claim();
	if (s == &heap_rt.hdr->slots[0])
		atomic_fetch_add_explicit(&heap_rt.hdr->in_use_shared, (int64_t)(n << HEAP_PAGE_SHIFT),
					  memory_order_relaxed);
	else
		count_bytes(s, (int64_t)(n << HEAP_PAGE_SHIFT));
	return heap_at(pg << HEAP_PAGE_SHIFT);
}

static void *alloc_internal(size_t size, bool *fresh)
{
	*fresh = false;
	if (likely(size <= HEAP_SMALL_MAX))
		return small_alloc(heap_class_for(size), true);
	return large_alloc(size, 0, fresh);
}

static void report_bad_free(const void *p, const char *what)
{
	log_msg(LOG_ERR, "heap: free(%p) ignored: %s", p, what);
}

/* Free p; returns the user bytes it held (0 when p was refused). */
static size_t free_internal(void *p, bool user)
{
	uint64_t off = (uint64_t)((char *)p - heap_rt.base);
	if (unlikely(off >= heap_rt.len)) {
		report_bad_free(p, "not in the persistent heap");
		return 0;
	}
	uint32_t e = heap_rt.pagemap[off >> HEAP_PAGE_SHIFT];
	if (likely(pm_kind(e) == PM_SPAN)) {
		unsigned c = pm_span_class(e);
		const struct heap_class_info *ci = &heap_cls[c];
		if (unlikely(!heap_block_valid(off, heap_span_of(off, e), ci))) {
			report_bad_free(p, "not the start of an allocated block");
			return 0;
		}
		struct heap_block *blk = p;
		uint64_t tag = heap_tag(off);
		if (unlikely(blk->tag == tag)) {
			report_bad_free(p, "already free (double free)");
			return 0;
		}
		struct heap_slot *s = heap_slot_claim();
		bool shared = s == &heap_rt.hdr->slots[0];
		if (unlikely(shared))
			prim_lock(&s->lock);
		struct heap_bin *bin = &s->bins[c];
		blk->next = bin->head;
		blk->tag = tag;
		bin->head = off;
		if (user)
			count_bytes(s, -(int64_t)ci->size);
		if (unlikely(++bin->count > ci->limit))
			heap_class_flush(s, c, ci->limit - ci->batch);
		if (unlikely(shared))
			prim_unlock(&s->lock);
		return ci->size;
	}
	if ((off & (HEAP_PAGE - 1)) != 0) {
		report_bad_free(p, "not the start of an allocated block");
		return 0;
	}
	if (user && pm_kind(e) == PM_LARGE) {
		/* an owned slot keeps small runs for reuse; the block tag marks
		 * them free, as for small blocks */
		struct heap_slot *s = heap_slot_claim();
		uint64_t n = pm_len(e);
		if (((struct heap_block *)p)->tag == heap_tag(off)) {
			report_bad_free(p, "already free (double free)");
			return 0;
		}
		if (s != &heap_rt.hdr->slots[0] && heap_run_cache_push(s, off >> HEAP_PAGE_SHIFT, n)) {
			count_bytes(s, -(int64_t)(n << HEAP_PAGE_SHIFT));
			return (size_t)n << HEAP_PAGE_SHIFT;
		}
	}
	uint64_t n = heap_pages_free_large(off >> HEAP_PAGE_SHIFT);
	if (n == 0) {
		report_bad_free(p, "not an allocated block (double free?)");
		return 0;
	}
	size_t bytes = (size_t)n << HEAP_PAGE_SHIFT;
	if (user) {
		struct heap_slot *s = heap_slot_claim();
		if (s == &heap_rt.hdr->slots[0])
			atomic_fetch_sub_explicit(&heap_rt.hdr->in_use_shared, (int64_t)bytes,
						  memory_order_relaxed);
		else
			count_bytes(s, -(int64_t)bytes);
	}
	return bytes;
}

size_t heap_usable_internal(const void *p)
{
	uint64_t off = (uint64_t)((const char *)p - heap_rt.base);
	if (off >= heap_rt.len)
		return 0;
	uint32_t e = heap_rt.pagemap[off >> HEAP_PAGE_SHIFT];
	if (pm_kind(e) == PM_SPAN) {
		const struct heap_class_info *ci = &heap_cls[pm_span_class(e)];
		return heap_block_valid(off, heap_span_of(off, e), ci) ? ci->size : 0;
	}
	if (pm_kind(e) == PM_LARGE && (off & (HEAP_PAGE - 1)) == 0)
		return (size_t)pm_len(e) << HEAP_PAGE_SHIFT;
	return 0;
}

void *heap_alloc_meta(size_t size)
{
	void *p;
	size_t bytes;
	if (size <= HEAP_SMALL_MAX) {
		unsigned c = heap_class_for(size);
		p = small_alloc(c, false);
		bytes = heap_cls[c].size;
	} else {
		uint64_t n = (size + HEAP_PAGE - 1) >> HEAP_PAGE_SHIFT;
		bool fresh;
		uint64_t pg = heap_pages_alloc(n, 0, HEAP_RUN_LARGE, &fresh);
		p = pg != 0 ? heap_at(pg << HEAP_PAGE_SHIFT) : NULL;
		bytes = n << HEAP_PAGE_SHIFT;
		if (p == NULL)
			errno = ENOMEM;
	}
	if (p != NULL)
		atomic_fetch_add_explicit(&heap_rt.hdr->meta_bytes, (int64_t)bytes, memory_order_relaxed);
	return p;
}

void heap_free_meta(void *p)
{
	size_t bytes = heap_usable_internal(p);
	if (bytes > HEAP_SMALL_MAX) {
		heap_pages_free_large(heap_off(p) >> HEAP_PAGE_SHIFT);
	} else {
		free_internal(p, false);
	}
	atomic_fetch_sub_explicit(&heap_rt.hdr->meta_bytes, (int64_t)bytes, memory_order_relaxed);
}

static bool not_ready(void)
{
	if (likely(heap_rt.hdr != NULL))
		return false;
	err_set("heap: used before heap_init");
	errno = ENOMEM;
	return true;
}

void *heap_malloc(size_t size)
{
	if (unlikely(not_ready()))
		return NULL;
	fase_enter();
	bool fresh;
	void *p = alloc_internal(size, &fresh);
	fase_leave();
	return p;
}

void *heap_calloc(size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	if (unlikely(not_ready()))
		return NULL;
	fase_enter();
	bool fresh;
	void *p = alloc_internal(total, &fresh);
	/* Pages never handed out before are still zero: skipping them keeps
	 * a large calloc from dirtying (and the epoch from persisting) them. */
	if (p != NULL && !fresh)
		memset(p, 0, total);
	fase_leave();
	return p;
}

void heap_free(void *p)
{
	if (p == NULL || unlikely(not_ready()))
		return;
	fase_enter();
	/* A named object freed through free() (malloc mode) or heap_free must
	 * not leave its name pointing at freed memory; without names this is
	 * one relaxed load. */
	heap_name_remove_ptr(p);
	free_internal(p, true);
	fase_leave();
}

void heap_free_unnamed(void *p)
{
	free_internal(p, true);
}

size_t heap_usable_size(const void *p)
{
	if (p == NULL || heap_rt.hdr == NULL)
		return 0;
	return heap_usable_internal(p);
}

size_t heap_good_size(size_t size, size_t align)
{
	if (heap_rt.hdr == NULL || size > heap_rt.len)
		return 0;
	/* the choice heap_memalign and alloc_internal make */
	if (size <= HEAP_SMALL_MAX && align < HEAP_PAGE) {
		for (unsigned c = heap_class_for(size); c < HEAP_NCLASSES; c++)
			if (heap_cls[c].align >= align || align <= 16)
				return heap_cls[c].size;
	}
	return ((size == 0 ? 1 : size) + HEAP_PAGE - 1) & ~(HEAP_PAGE - 1);
}

void *heap_realloc(void *p, size_t size)
{
	if (p == NULL)
		return heap_malloc(size);
	if (size == 0) {
		/* as glibc: free, and return NULL */
		heap_free(p);
		return NULL;
	}
	if (unlikely(not_ready()))
		return NULL;
	fase_enter();
	void *q = NULL;
	size_t old = heap_usable_internal(p);
	if (old == 0) {
		report_bad_free(p, "realloc of a pointer that is not an allocated block");
		errno = EINVAL;
	} else if (old <= HEAP_SMALL_MAX) {
		/* stays put while it fits and would not fit a class half its size */
		if (size <= old && (size > old / 2 || old <= 16)) {
			q = p;
		}
	} else if (size > HEAP_SMALL_MAX) {
		uint64_t pg = heap_off(p) >> HEAP_PAGE_SHIFT, n = old >> HEAP_PAGE_SHIFT;
		uint64_t newn = (size + HEAP_PAGE - 1) >> HEAP_PAGE_SHIFT;
		if (size <= heap_rt.len && heap_pages_resize(pg, n, newn)) {
			struct heap_slot *s = heap_slot_claim();
			int64_t d = ((int64_t)newn - (int64_t)n) * (int64_t)HEAP_PAGE;
			if (s == &heap_rt.hdr->slots[0])
				atomic_fetch_add_explicit(&heap_rt.hdr->in_use_shared, d,
							  memory_order_relaxed);
			else
				count_bytes(s, d);
			/* A name's recorded size must stay within its block; a
			 * block that keeps its size keeps it (no name lock on
			 * the common in-place realloc). */
			heap_name_note_size(p, size);
			q = p;
		}
	}
	if (q == NULL && old != 0) {
		bool fresh;
		q = alloc_internal(size, &fresh);
		if (q != NULL) {
			memcpy(q, p, old < size ? old : size);
			/* The name cannot follow the object: a moved name would
			 * change what nvrecover returns behind the program's back. */
			heap_name_remove_ptr(p);
			free_internal(p, true);
		}
	}
	fase_leave();
	return q;
}

void *heap_memalign(size_t align, size_t size)
{
	if (align == 0 || (align & (align - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	if (align <= 16)
		return heap_malloc(size);
	if (unlikely(not_ready()))
		return NULL;
	fase_enter();
	void *p = NULL;
	bool done = false;
	if (size <= HEAP_SMALL_MAX && align < HEAP_PAGE) {
		/* the smallest class that fits whose blocks are all aligned */
		for (unsigned c = heap_class_for(size); c < HEAP_NCLASSES; c++) {
			if (heap_cls[c].align >= align) {
				p = small_alloc(c, true);
				done = true;
				break;
			}
		}
	}
	if (!done) {
		bool fresh;
		p = large_alloc(size == 0 ? 1 : size, align, &fresh);
	}
	fase_leave();
	return p;
}

void heap_thread_exit(void)
{
	if (heap_rt.hdr == NULL)
		return;
	fase_enter();
	struct heap_slot *s = heap_slot_claim();
	if (s != &heap_rt.hdr->slots[0])
		heap_slot_release(s);
	fase_leave();
}

size_t heap_high_water(void)
{
	const struct heap_hdr *h = heap_rt.hdr;
	if (h == NULL)
		return SIZE_MAX;
	/* No lock: at a quiescent point no heap operation runs (each is a
	 * FASE) and the quiescent point orders their writes before us; the
	 * page lock could be held forever by a thread that died inside one. */
	return (size_t)(__atomic_load_n(&h->hwm, __ATOMIC_RELAXED) << HEAP_PAGE_SHIFT);
}

void heap_get_stats(struct heap_stats *st)
{
	memset(st, 0, sizeof(*st));
	struct heap_hdr *h = heap_rt.hdr;
	if (h == NULL)
		return;
	int64_t b = atomic_load_explicit(&h->in_use_shared, memory_order_relaxed);
	for (unsigned i = 0; i <= HEAP_NSLOTS; i++)
		b += atomic_load_explicit(&h->slots[i].in_use, memory_order_relaxed);
	st->bytes_in_use = b > 0 ? (uint64_t)b : 0;
	/* Without the page lock: the statistics report reads this from the
	 * epoch thread, which must not wait on a lock that a thread killed
	 * inside a heap operation could hold forever (heap_high_water). */
	st->bytes_mapped = (uint64_t)__atomic_load_n(&h->hwm, __ATOMIC_RELAXED) << HEAP_PAGE_SHIFT;
	st->capacity = heap_rt.len;
}
