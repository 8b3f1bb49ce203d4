/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap_class -- size classes, their spans, and the thread caches.
 *
 * A small request is rounded up to one of HEAP_NCLASSES sizes.  Blocks of a
 * class are carved from spans (page runs of a few pages with a header);
 * carving is by a bump index, so a span's pages are touched only as its
 * blocks are first handed out.  Each thread owns a cache slot inside the
 * heap with one free list ("bin") per class: the fast paths in heap.c push
 * and pop there without locks.  A bin that runs dry is refilled with a
 * batch from the class's spans under the class lock; one that overflows
 * gives a batch back.  A span whose blocks all came back is returned to the
 * page allocator (each class keeps one in reserve).  Blocks freed by
 * another thread simply go to that thread's cache: a span's bookkeeping is
 * only touched under its class lock.
 */
#include "heap/heap_layout.h"
#include "base/assert.h"
#include "base/log.h"

#include <errno.h>

struct heap_class_info heap_cls[HEAP_NCLASSES];
uint8_t heap_cls_of[HEAP_SMALL_MAX / 16 + 1];

/* Below a cache line the classes are dense (16-byte steps): small objects
 * are the most numerous, and density is worth more there than spacing.
 * From 64 B up every class is a whole number of 64-byte lines and its
 * blocks start on a line, so no block shares a line with a neighbour: a
 * lock-coupling list's 80-byte nodes each own their two lines (as a native
 * build's aligned_alloc of whole lines gives them), instead of one node's
 * lock sharing a line with its neighbour block's lock, which another
 * thread's traversal writes.  The price is
 * internal waste of at most 63 bytes per block up to 512 B (16- to 32-byte
 * steps wasted at most 31), and at most a fifth of the block above that,
 * as before. */
static const uint32_t class_sizes[HEAP_NCLASSES] = {
	16, 32, 48,
	64, 128, 192, 256, 320, 384, 448, 512,
	640, 768, 896, 1024, 1280, 1536, 1792, 2048,
	2560, 3072, 3584,
};

/* Blocks a span should hold at least, and the smallest span. */
#define SPAN_MIN_BLOCKS 16u
#define SPAN_MIN_PAGES 4u
/* Bytes a thread may cache per class, and the bounds on the block count. */
#define CACHE_BYTES 16384u
#define CACHE_MIN 8u
#define CACHE_MAX 256u

void heap_classes_init(void)
{
	for (unsigned c = 0; c < HEAP_NCLASSES; c++) {
		struct heap_class_info *ci = &heap_cls[c];
		uint32_t s = class_sizes[c];
		ci->size = s;
		/* Blocks sit at first + i * size in a page-aligned span, so
		 * aligning first to the largest power of two dividing the size
		 * makes every block that aligned: heap_memalign uses it. */
		ci->align = s & -s;
		ci->first = ci->align > sizeof(struct heap_span) ? ci->align
								 : (uint32_t)sizeof(struct heap_span);
		/* line-sized classes: block 0, and so every block, on a line */
		if (s >= HEAP_LINE)
			ci->first = (ci->first + HEAP_LINE - 1) & ~(HEAP_LINE - 1);
		uint32_t bytes = ci->first + SPAN_MIN_BLOCKS * s;
		ci->span_pages = (bytes + (uint32_t)HEAP_PAGE - 1) >> HEAP_PAGE_SHIFT;
		if (ci->span_pages < SPAN_MIN_PAGES)
			ci->span_pages = SPAN_MIN_PAGES;
		ci->nblocks = (uint32_t)((ci->span_pages * HEAP_PAGE - ci->first) / s);
		ci->end = ci->first + ci->nblocks * s;
		uint32_t lim = CACHE_BYTES / s;
		ci->limit = lim < CACHE_MIN ? CACHE_MIN : lim > CACHE_MAX ? CACHE_MAX : lim;
		ci->batch = ci->limit / 2;
		/* divisibility test by multiplication with the odd part's
		 * inverse modulo 2^32 (Newton's iteration) */
		uint32_t shift = (uint32_t)__builtin_ctz(s), odd = s >> shift, inv = odd;
		for (int i = 0; i < 5; i++)
			inv *= 2 - odd * inv;
		ci->low = (1u << shift) - 1;
		ci->shift = shift;
		ci->inv = inv;
		ci->lim = UINT32_MAX / odd;
	}
	unsigned c = 0;
	for (unsigned i = 0; i <= HEAP_SMALL_MAX / 16; i++) {
		while (class_sizes[c] < i * 16)
			c++;
		PMT_ASSERT(c < HEAP_NCLASSES);
		heap_cls_of[i] = (uint8_t)c;
	}
}

/* ---- the thread's slot ------------------------------------------------ */

static _Thread_local struct {
	struct heap_slot *slot;
	uint64_t gen;
} tls_slot __attribute__((tls_model("initial-exec")));

struct heap_slot *heap_slot_claim(void)
{
	if (tls_slot.gen == heap_rt.gen)
		return tls_slot.slot;
	struct heap_hdr *h = heap_rt.hdr;
	struct heap_slot *s = &h->slots[0];
	uint32_t tid = (uint32_t)prim_gettid();
	for (unsigned i = 1; i <= HEAP_NSLOTS; i++) {
		uint32_t free_owner = 0;
		if (atomic_load_explicit(&h->slots[i].owner, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong_explicit(&h->slots[i].owner, &free_owner, tid,
							    memory_order_acquire,
							    memory_order_relaxed)) {
			s = &h->slots[i];
			break;
		}
	}
	tls_slot.slot = s;
	tls_slot.gen = heap_rt.gen;
	return s;
}

void heap_slot_release(struct heap_slot *s)
{
	heap_slot_flush_all(s);
	int64_t b = atomic_load_explicit(&s->in_use, memory_order_relaxed);
	atomic_fetch_add_explicit(&heap_rt.hdr->in_use_shared, b, memory_order_relaxed);
	atomic_store_explicit(&s->in_use, 0, memory_order_relaxed);
	if (s != &heap_rt.hdr->slots[0])
		atomic_store_explicit(&s->owner, 0, memory_order_release);
	if (tls_slot.slot == s)
		tls_slot.gen = 0;
}

/* ---- spans -------------------------------------------------------------- */

static void list_push(struct heap_class_state *cs, struct heap_span *sp, uint64_t off)
{
	sp->prev = 0;
	sp->next = cs->partial;
	if (cs->partial != 0)
		((struct heap_span *)heap_at(cs->partial))->prev = off;
	cs->partial = off;
	sp->in_list = 1;
}

static void list_unlink(struct heap_class_state *cs, struct heap_span *sp)
{
	if (sp->prev != 0)
		((struct heap_span *)heap_at(sp->prev))->next = sp->next;
	else
		cs->partial = sp->next;
	if (sp->next != 0)
		((struct heap_span *)heap_at(sp->next))->prev = sp->prev;
	sp->next = sp->prev = 0;
	sp->in_list = 0;
}

static uint64_t span_new(unsigned c)
{
	PMT_ASSERT(c < HEAP_NCLASSES);
	const struct heap_class_info *ci = &heap_cls[c];
	bool fresh;
	uint64_t pg = heap_pages_alloc(ci->span_pages, 0, c, &fresh);
	if (pg == 0)
		return 0;
	uint64_t off = pg << HEAP_PAGE_SHIFT;
	struct heap_span *sp = heap_at(off);
	sp->magic = SPAN_MAGIC;
	sp->cls = (uint16_t)c;
	sp->nblocks = ci->nblocks;
	sp->bump = 0;
	sp->used = 0;
	sp->nfree = 0;
	sp->free_head = 0;
	sp->reserved[0] = sp->reserved[1] = 0;
	struct heap_class_state *cs = &heap_rt.hdr->classes[c];
	list_push(cs, sp, off);
	cs->nspans++;
	return off;
}

static void span_release(struct heap_class_state *cs, struct heap_span *sp, uint64_t off)
{
	list_unlink(cs, sp);
	cs->nspans--;
	sp->magic = 0;
	heap_pages_free(off >> HEAP_PAGE_SHIFT, heap_cls[sp->cls].span_pages);
}

/* A span's free list comes from the pool as it was at the last epoch and is
 * read here for the first time (adoption checks the header, the page map
 * and the lists, not every span): each link is checked before it is
 * followed.  A free block lies in its span, at a block boundary, among the
 * carved ones, and carries its free tag. */
static void check_span_header(const struct heap_span *sp, uint64_t so, unsigned c)
{
	const struct heap_class_info *ci = &heap_cls[c];
	if (sp->magic != SPAN_MAGIC || sp->cls != c || sp->nblocks != ci->nblocks ||
	    sp->bump > sp->nblocks || sp->used + sp->nfree != sp->bump)
		heap_corrupt("span at heap offset 0x%llx (class %u) has a bad header (magic 0x%x, "
			     "bump %u, used %u, free %u)", (unsigned long long)so, c, sp->magic,
			     sp->bump, sp->used, sp->nfree);
}

static void check_free_block(const struct heap_span *sp, uint64_t so, unsigned c, uint64_t b,
			     uint32_t taken)
{
	const struct heap_class_info *ci = &heap_cls[c];
	if (taken >= sp->nfree || b < so || !heap_block_valid(b, so, ci) ||
	    (b - so - ci->first) / ci->size >= sp->bump ||
	    ((const struct heap_block *)heap_at(b))->tag != heap_tag(b))
		heap_corrupt("the free list of the span at heap offset 0x%llx (class %u) links to "
			     "heap offset 0x%llx, which is not a free block of it",
			     (unsigned long long)so, c, (unsigned long long)b);
}

/* Move up to want blocks from the class's spans into a chain; returns how
 * many, the chain in *head (0-terminated, every block tagged free). */
static uint32_t gather(unsigned c, uint32_t want, uint64_t *head)
{
	const struct heap_class_info *ci = &heap_cls[c];
	struct heap_class_state *cs = &heap_rt.hdr->classes[c];
	uint32_t got = 0;
	uint64_t chain = *head;
	while (got < want) {
		uint64_t so = cs->partial;
		if (so == 0 && (so = span_new(c)) == 0)
			break;
		struct heap_span *sp = heap_at(so);
		check_span_header(sp, so, c);
		uint32_t taken = 0;
		while (got + taken < want && sp->free_head != 0) {
			uint64_t b = sp->free_head;
			check_free_block(sp, so, c, b, taken);
			struct heap_block *blk = heap_at(b);
			sp->free_head = blk->next;
			blk->next = chain;
			chain = b;
			taken++;
		}
		sp->nfree -= taken;
		while (got + taken < want && sp->bump < sp->nblocks) {
			uint64_t b = so + ci->first + (uint64_t)sp->bump * ci->size;
			struct heap_block *blk = heap_at(b);
			blk->next = chain;
			blk->tag = heap_tag(b);
			chain = b;
			sp->bump++;
			taken++;
		}
		sp->used += taken;
		got += taken;
		PMT_ASSERT(sp->bump <= sp->nblocks && sp->used + sp->nfree == sp->bump);
		if (sp->free_head == 0 && sp->bump == sp->nblocks)
			list_unlink(cs, sp);
	}
	*head = chain;
	return got;
}

void *heap_class_refill(struct heap_slot *s, unsigned c)
{
	PMT_ASSERT(c < HEAP_NCLASSES);
	struct heap_class_state *cs = &heap_rt.hdr->classes[c];
	struct heap_bin *bin = &s->bins[c];
	for (int attempt = 0; attempt < 2; attempt++) {
		prim_lock(&cs->lock);
		uint32_t got = gather(c, heap_cls[c].batch, &bin->head);
		prim_unlock(&cs->lock);
		bin->count += got;
		if (bin->head != 0) {
			struct heap_block *blk = heap_at(bin->head);
			bin->head = blk->next;
			bin->count--;
			blk->tag = 0;
			return blk;
		}
		/* Out of pages: give back what this thread caches and the
		 * classes' reserve spans, so their pages can coalesce, and
		 * try once more.  (Other threads' caches are theirs alone.) */
		heap_slot_flush_all(s);
		heap_class_release_empty();
	}
	heap_report_full(heap_cls[c].size);
	return NULL;
}

void heap_class_flush(struct heap_slot *s, unsigned c, uint32_t keep)
{
	PMT_ASSERT(c < HEAP_NCLASSES);
	const struct heap_class_info *ci = &heap_cls[c];
	struct heap_class_state *cs = &heap_rt.hdr->classes[c];
	struct heap_bin *bin = &s->bins[c];
	if (bin->count <= keep)
		return;
	prim_lock(&cs->lock);
	while (bin->count > keep && bin->head != 0) {
		uint64_t b = bin->head;
		struct heap_block *blk = heap_at(b);
		bin->head = blk->next;
		bin->count--;
		uint32_t e = heap_rt.pagemap[b >> HEAP_PAGE_SHIFT];
		uint64_t so = heap_span_of(b, e);
		struct heap_span *sp = heap_at(so);
		if (sp->magic != SPAN_MAGIC || sp->cls != c ||
		    (b - so - ci->first) / ci->size >= sp->bump) {
			/* only a free of a never-allocated block gets here */
			log_msg(LOG_ERR, "heap: dropping invalid block %p found in a thread cache "
				"(a free of memory that was never allocated?)", (void *)blk);
			continue;
		}
		blk->next = sp->free_head;
		sp->free_head = b;
		sp->nfree++;
		sp->used--;
		if (!sp->in_list)
			list_push(cs, sp, so);
		/* An empty span goes back to the page allocator unless it is
		 * the class's last one with room (kept to avoid churn). */
		if (sp->used == 0 && !(cs->partial == so && sp->next == 0))
			span_release(cs, sp, so);
	}
	if (bin->head == 0)
		bin->count = 0;
	prim_unlock(&cs->lock);
}

void heap_slot_flush_all(struct heap_slot *s)
{
	for (unsigned c = 0; c < HEAP_NCLASSES; c++)
		heap_class_flush(s, c, 0);
	for (unsigned i = 0; i < HEAP_RUN_BINS; i++) {
		struct heap_bin *rb = &s->runs[i];
		while (rb->head != 0) {
			uint64_t off = rb->head;
			rb->head = ((struct heap_block *)heap_at(off))->next;
			if (heap_pages_free_large(off >> HEAP_PAGE_SHIFT) == 0)
				log_msg(LOG_ERR, "heap: dropping invalid page run %p found in a "
					"thread cache", heap_at(off));
		}
		rb->count = 0;
	}
	s->run_pages = 0;
}

/* ---- cached page runs ------------------------------------------------- */

uint64_t heap_run_cache_pop(struct heap_slot *s, uint64_t n)
{
	if (n > HEAP_RUN_BINS)
		return 0;
	struct heap_bin *rb = &s->runs[n - 1];
	uint64_t off = rb->head;
	if (off == 0)
		return 0;
	struct heap_block *blk = heap_at(off);
	rb->head = blk->next;
	rb->count--;
	s->run_pages -= (uint32_t)n;
	blk->tag = 0;
	return off >> HEAP_PAGE_SHIFT;
}

bool heap_run_cache_push(struct heap_slot *s, uint64_t pg, uint64_t n)
{
	if (n > HEAP_RUN_BINS || s->run_pages + n > HEAP_RUN_CACHE_PAGES)
		return false;
	struct heap_bin *rb = &s->runs[n - 1];
	uint64_t off = pg << HEAP_PAGE_SHIFT;
	struct heap_block *blk = heap_at(off);
	blk->next = rb->head;
	blk->tag = heap_tag(off);
	rb->head = off;
	rb->count++;
	s->run_pages += (uint32_t)n;
	return true;
}

void heap_class_release_empty(void)
{
	for (unsigned c = 0; c < HEAP_NCLASSES; c++) {
		struct heap_class_state *cs = &heap_rt.hdr->classes[c];
		prim_lock(&cs->lock);
		uint64_t so = cs->partial;
		while (so != 0) {
			struct heap_span *sp = heap_at(so);
			uint64_t next = sp->next;
			if (sp->used == 0)
				span_release(cs, sp, so);
			so = next;
		}
		prim_unlock(&cs->lock);
	}
}
