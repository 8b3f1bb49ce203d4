/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap_page -- the page-run allocator of the persistent heap.
 *
 * Free extents (maximal runs of free pages below the high-water mark) are
 * kept in a treap ordered by address, each node stored in the first page of
 * the extent it describes and augmented with the longest extent in its
 * subtree.  Allocation is first-fit by address in O(log n), so pages are
 * reused from the low end and the heap (and what each epoch must persist)
 * stays as compact as possible; only when no extent fits does the
 * high-water mark move.  The page map's boundary tags (FREE on an extent's
 * first and last page) find a freed run's neighbours in O(1) for
 * coalescing.  Treap priorities are a hash of the page index, so the
 * structure needs no random state.  Everything runs under hdr->page_lock.
 */
#include "heap/heap_layout.h"
#include "base/log.h"

#include <errno.h>

struct extent_node {
	uint64_t npages;
	uint64_t maxlen;	/* longest extent in this subtree */
	uint64_t left, right;	/* page indices, 0: none */
};

static inline struct extent_node *node(uint64_t pg)
{
	return (struct extent_node *)(heap_rt.base + (pg << HEAP_PAGE_SHIFT));
}

static inline uint64_t prio(uint64_t pg)
{
	uint64_t z = pg + 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void fix(uint64_t t)
{
	struct extent_node *n = node(t);
	uint64_t m = n->npages;
	if (n->left != 0 && node(n->left)->maxlen > m)
		m = node(n->left)->maxlen;
	if (n->right != 0 && node(n->right)->maxlen > m)
		m = node(n->right)->maxlen;
	n->maxlen = m;
}

static uint64_t tree_insert(uint64_t t, uint64_t x)
{
	if (t == 0)
		return x;
	struct extent_node *n = node(t);
	if (x < t) {
		n->left = tree_insert(n->left, x);
		if (prio(n->left) > prio(t)) {	/* rotate right */
			uint64_t l = n->left;
			n->left = node(l)->right;
			node(l)->right = t;
			fix(t);
			fix(l);
			return l;
		}
	} else {
		n->right = tree_insert(n->right, x);
		if (prio(n->right) > prio(t)) {	/* rotate left */
			uint64_t r = n->right;
			n->right = node(r)->left;
			node(r)->left = t;
			fix(t);
			fix(r);
			return r;
		}
	}
	fix(t);
	return t;
}

/* Join two treaps, every key of a below every key of b. */
static uint64_t tree_join(uint64_t a, uint64_t b)
{
	if (a == 0)
		return b;
	if (b == 0)
		return a;
	if (prio(a) > prio(b)) {
		node(a)->right = tree_join(node(a)->right, b);
		fix(a);
		return a;
	}
	node(b)->left = tree_join(a, node(b)->left);
	fix(b);
	return b;
}

static uint64_t tree_remove(uint64_t t, uint64_t x)
{
	if (t == 0)
		return 0;	/* not reached: callers remove present keys */
	struct extent_node *n = node(t);
	if (x == t)
		return tree_join(n->left, n->right);
	if (x < t)
		n->left = tree_remove(n->left, x);
	else
		n->right = tree_remove(n->right, x);
	fix(t);
	return t;
}

/* The lowest-addressed extent of at least n pages, or 0. */
static uint64_t tree_first_fit(uint64_t t, uint64_t n)
{
	if (t == 0 || node(t)->maxlen < n)
		return 0;
	for (;;) {
		struct extent_node *e = node(t);
		if (e->left != 0 && node(e->left)->maxlen >= n)
			t = e->left;
		else if (e->npages >= n)
			return t;
		else
			t = e->right;	/* its maxlen >= n, by the subtree max */
	}
}

static void extent_add(struct heap_hdr *h, uint64_t pg, uint64_t n)
{
	heap_rt.pagemap[pg] = pm_make(PM_FREE, (uint32_t)n);
	heap_rt.pagemap[pg + n - 1] = pm_make(PM_FREE, (uint32_t)n);
	struct extent_node *e = node(pg);
	e->npages = n;
	e->maxlen = n;
	e->left = e->right = 0;
	h->free_root = tree_insert(h->free_root, pg);
	h->free_pages += n;
	h->free_extents++;
}

static void extent_del(struct heap_hdr *h, uint64_t pg, uint64_t n)
{
	h->free_root = tree_remove(h->free_root, pg);
	heap_rt.pagemap[pg] = 0;
	heap_rt.pagemap[pg + n - 1] = 0;
	h->free_pages -= n;
	h->free_extents--;
}

/* Free [pg, pg+n), whose page-map entries are already cleared, merging it
 * with the free extents on either side. */
static void free_locked(struct heap_hdr *h, uint64_t pg, uint64_t n)
{
	uint32_t *pm = heap_rt.pagemap;
	if (pg > h->data_start && pm_kind(pm[pg - 1]) == PM_FREE) {
		uint64_t l = pm_len(pm[pg - 1]);
		extent_del(h, pg - l, l);
		pg -= l;
		n += l;
	}
	if (pg + n < h->hwm && pm_kind(pm[pg + n]) == PM_FREE) {
		uint64_t l = pm_len(pm[pg + n]);
		extent_del(h, pg + n, l);
		n += l;
	}
	extent_add(h, pg, n);
}

static void tag_run(uint64_t pg, uint64_t n, unsigned cls)
{
	uint32_t *pm = heap_rt.pagemap;
	if (cls == HEAP_RUN_LARGE) {
		pm[pg] = pm_make(PM_LARGE, (uint32_t)n);
		return;
	}
	for (uint64_t i = 0; i < n; i++)
		pm[pg + i] = pm_span(cls, (uint32_t)i);
}

/* The high-water mark may move to new_hwm: the reservation hook (the pool's
 * disk space) covers it.  Called with the page lock held. */
static bool reserve_data(uint64_t from, uint64_t to)
{
	/* the page-map pages holding the entries of [from, to) too */
	uint64_t map0 = ((uint64_t)((char *)heap_rt.pagemap - heap_rt.base) >> HEAP_PAGE_SHIFT);
	uint64_t per = HEAP_PAGE / sizeof(uint32_t);
	return heap_rt.reserve(heap_rt.reserve_ctx, map0 + from / per, map0 + (to - 1) / per + 1) == 0 &&
	       heap_rt.reserve(heap_rt.reserve_ctx, from, to) == 0;
}

static _Thread_local bool reserve_refused;

bool heap_reserve_refused(void)
{
	bool r = reserve_refused;
	reserve_refused = false;
	return r;
}

bool heap_reserve_to(uint64_t new_hwm)
{
	if (new_hwm <= heap_rt.reserved || heap_rt.reserve == NULL)
		return true;
	uint64_t from = heap_rt.reserved, used = from - heap_rt.hdr->data_start;
	uint64_t chunk = used / 4 > 256 ? used / 4 : 256;
	uint64_t want = from + chunk > new_hwm ? from + chunk : new_hwm;
	if (want > heap_rt.hdr->npages)
		want = heap_rt.hdr->npages;
	if (!reserve_data(from, want)) {
		if (want == new_hwm || !reserve_data(from, new_hwm)) {
			reserve_refused = true;
			return false;
		}
		want = new_hwm;
	}
	heap_rt.reserved = want;
	return true;
}

static bool may_grow_to(uint64_t new_hwm) { return heap_reserve_to(new_hwm); }

/* Raise hwm.  The page map of never-used pages is zero, but nothing read
 * from a pool is trusted and the entries above hwm are not validated at
 * adoption (the metadata checksums cover them): clear any left there, so
 * that a stray tag never becomes the end of a free extent. */
static void grow_hwm(struct heap_hdr *h, uint64_t new_hwm)
{
	uint32_t *pm = heap_rt.pagemap;
	for (uint64_t i = h->hwm; i < new_hwm; i++)
		if (pm[i] != 0)
			pm[i] = 0;
	/* Atomic: heap_get_stats and heap_high_water read it without the lock. */
	__atomic_store_n(&h->hwm, new_hwm, __ATOMIC_RELAXED);
}

/* n pages, no alignment; 0 when there is no room. */
static uint64_t take_locked(struct heap_hdr *h, uint64_t n, bool *fresh)
{
	uint64_t pg = tree_first_fit(h->free_root, n);
	if (pg != 0) {
		uint64_t have = node(pg)->npages;
		extent_del(h, pg, have);
		if (have > n)
			extent_add(h, pg + n, have - n);
		*fresh = false;
		return pg;
	}
	/* Nothing fits below hwm: extend the top, absorbing a free extent that
	 * ends right at hwm. */
	uint64_t start = h->hwm;
	*fresh = true;
	if (h->hwm > h->data_start && pm_kind(heap_rt.pagemap[h->hwm - 1]) == PM_FREE) {
		uint64_t l = pm_len(heap_rt.pagemap[h->hwm - 1]);
		if (h->npages - (h->hwm - l) < n || !may_grow_to(h->hwm - l + n))
			return 0;
		extent_del(h, h->hwm - l, l);
		start = h->hwm - l;
		*fresh = false;
	}
	if (h->npages - start < n || !may_grow_to(start + n))
		return 0;
	if (start + n > h->hwm)
		grow_hwm(h, start + n);
	return start;
}

uint64_t heap_pages_alloc(uint64_t n, size_t align, unsigned cls, bool *fresh)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (n == 0 || n > PM_LEN_MASK)
		return 0;
	uint64_t align_pages = align > HEAP_PAGE ? align >> HEAP_PAGE_SHIFT : 1;
	uint64_t want = n + align_pages - 1;
	if (want < n || want > PM_LEN_MASK)
		return 0;
	prim_lock(&h->page_lock);
	uint64_t pg = take_locked(h, want, fresh);
	if (pg != 0 && align_pages > 1) {
		/* Over-allocated by align - 1 pages: give back the slack on
		 * both sides of the aligned run. */
		uintptr_t addr = (uintptr_t)heap_rt.base + (pg << HEAP_PAGE_SHIFT);
		uint64_t skip = (((addr + align - 1) & ~(uintptr_t)(align - 1)) - addr) >> HEAP_PAGE_SHIFT;
		if (skip > 0)
			free_locked(h, pg, skip);
		if (want - skip > n)
			free_locked(h, pg + skip + n, want - skip - n);
		pg += skip;
	}
	if (pg != 0) {
		tag_run(pg, n, cls);
		if (cls == HEAP_RUN_LARGE)
			h->large_pages += n;
	}
	prim_unlock(&h->page_lock);
	return pg;
}

void heap_pages_free(uint64_t pg, uint64_t n)
{
	struct heap_hdr *h = heap_rt.hdr;
	prim_lock(&h->page_lock);
	for (uint64_t i = 0; i < n; i++)
		heap_rt.pagemap[pg + i] = 0;
	free_locked(h, pg, n);
	prim_unlock(&h->page_lock);
}

uint64_t heap_pages_free_large(uint64_t pg)
{
	struct heap_hdr *h = heap_rt.hdr;
	prim_lock(&h->page_lock);
	uint32_t e = heap_rt.pagemap[pg];
	if (pg < h->data_start || pg >= h->hwm || pm_kind(e) != PM_LARGE) {
		prim_unlock(&h->page_lock);
		return 0;
	}
	uint64_t n = pm_len(e);
	heap_rt.pagemap[pg] = 0;
	h->large_pages -= n;
	free_locked(h, pg, n);
	prim_unlock(&h->page_lock);
	return n;
}

bool heap_pages_resize(uint64_t pg, uint64_t n, uint64_t newn)
{
	struct heap_hdr *h = heap_rt.hdr;
	uint32_t *pm = heap_rt.pagemap;
	if (newn == n)
		return true;
	if (newn == 0 || newn > PM_LEN_MASK)
		return false;
	prim_lock(&h->page_lock);
	bool ok = true;
	if (newn < n) {
		pm[pg] = pm_make(PM_LARGE, (uint32_t)newn);
		free_locked(h, pg + newn, n - newn);
	} else {
		uint64_t need = newn - n, end = pg + n;
		if (end < h->hwm && pm_kind(pm[end]) == PM_FREE && pm_len(pm[end]) >= need) {
			uint64_t l = pm_len(pm[end]);
			extent_del(h, end, l);
			if (l > need)
				extent_add(h, end + need, l - need);
		} else if (end < h->hwm && pm_kind(pm[end]) == PM_FREE &&
			   end + pm_len(pm[end]) == h->hwm && h->npages - end >= need &&
			   may_grow_to(end + need)) {
			/* a free extent up to hwm, then never-used pages */
			extent_del(h, end, pm_len(pm[end]));
			grow_hwm(h, end + need);
		} else if (end == h->hwm && h->npages - end >= need && may_grow_to(end + need)) {
			grow_hwm(h, end + need);
		} else {
			ok = false;
		}
		if (ok)
			pm[pg] = pm_make(PM_LARGE, (uint32_t)newn);
	}
	if (ok)
		h->large_pages = h->large_pages - n + newn;
	prim_unlock(&h->page_lock);
	return ok;
}

void heap_pages_format(void)
{
	struct heap_hdr *h = heap_rt.hdr;
	h->page_lock = (prim_lock_t)PRIM_LOCK_INIT;
	h->hwm = h->data_start;
	h->free_root = 0;
	h->free_pages = 0;
	h->free_extents = 0;
	h->large_pages = 0;
}
