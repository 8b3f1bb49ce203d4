/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap_validate -- validation of a heap read from a pool, and the full
 * consistency walk for the tests and pmthreads-recover check.
 *
 * Nothing read from the range is trusted: every offset is checked against
 * the range and the high-water mark and for alignment before it is
 * followed, every list walk is bounded by the count that claims its length
 * (so a cycle ends it), every count is checked against what it counts.  The
 * walk goes on after a problem wherever the structures still allow it, so
 * that every problem is reported, not just the first.
 *
 * Two depths: heap_validate (at adoption, heap_init) checks the header, the
 * page map and every structure adoption itself follows (the free-extent
 * tree, the partial lists and their spans' headers, the thread caches, the
 * name table) -- not every span's own free list, which the allocator checks
 * link by link when it first reads it (heap_class.c), so that start-up does
 * not touch every span page.  heap_validate_all adds every span and the byte
 * counters.
 */
#include "heap/heap.h"

#include "heap/heap_layout.h"
#include "base/log.h"

#include <pmthreads.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct hc {
	void (*report)(const char *msg, void *arg);
	void *arg;
	unsigned problems;
	bool full;
	bool sums;		/* verify the metadata pages' checksums too */
	bool header_ok;		/* the header's layout fields passed */
	char first[1024];
};

__attribute__((format(printf, 2, 3))) static void problem(struct hc *c, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->problems++ == 0)
		snprintf(c->first, sizeof(c->first), "%s", msg);
	if (c->report != NULL)
		c->report(msg, c->arg);
}

static const struct heap_hdr *H(void) { return heap_rt.hdr; }
static uint64_t data_lo(void) { return H()->data_start << HEAP_PAGE_SHIFT; }
static uint64_t data_hi(void) { return H()->hwm << HEAP_PAGE_SHIFT; }

/* off is the first byte of a page handed out at some time. */
static bool page_in_data(uint64_t off)
{
	return (off & (HEAP_PAGE - 1)) == 0 && off >= data_lo() && off < data_hi();
}

/* The span of class c whose first page is at so has a sound header. */
static bool span_header_ok(uint64_t so, unsigned c)
{
	const struct heap_class_info *ci = &heap_cls[c];
	if (!page_in_data(so) || so + (uint64_t)ci->span_pages * HEAP_PAGE > data_hi() ||
	    heap_rt.pagemap[so >> HEAP_PAGE_SHIFT] != pm_span(c, 0))
		return false;
	const struct heap_span *sp = heap_at(so);
	return sp->magic == SPAN_MAGIC && sp->cls == c && sp->nblocks == ci->nblocks &&
	       sp->bump <= sp->nblocks && sp->used <= sp->bump && sp->nfree <= sp->bump &&
	       sp->used + sp->nfree == sp->bump && sp->in_list <= 1;
}

/* b is a block of class c inside a span below the high-water mark; *so is
 * the span.  Checks only what the page map says (not the span's header). */
static bool block_of_class(uint64_t b, unsigned c, uint64_t *so)
{
	if (b < data_lo() || b >= data_hi() || (b & 15) != 0)
		return false;
	uint32_t e = heap_rt.pagemap[b >> HEAP_PAGE_SHIFT];
	if (pm_kind(e) != PM_SPAN || pm_span_class(e) != c ||
	    pm_span_pgoff(e) >= heap_cls[c].span_pages ||
	    pm_span_pgoff(e) > (b >> HEAP_PAGE_SHIFT))
		return false;
	*so = heap_span_of(b, e);
	return *so >= data_lo() && heap_block_valid(b, *so, &heap_cls[c]);
}

/* ---- the header ---------------------------------------------------------- */

static size_t meta_pages_for(uint64_t npages)
{
	size_t hdr = (sizeof(struct heap_hdr) + HEAP_PAGE - 1) & ~(HEAP_PAGE - 1);
	size_t map = (npages * sizeof(uint32_t) + HEAP_PAGE - 1) & ~(HEAP_PAGE - 1);
	return (hdr + map) >> HEAP_PAGE_SHIFT;
}

static bool name_root_ok(void)
{
	const struct heap_hdr *h = H();
	uint64_t nb = h->name_nbuckets;
	uint64_t count = atomic_load(&h->name_count) + atomic_load(&h->name_held);
	uint64_t used = h->hwm - h->data_start;
	if (h->name_buckets == 0)
		return nb == 0 && count == 0;
	return h->name_buckets >= h->data_start && h->name_buckets < h->hwm && nb >= 256 &&
	       (nb & (nb - 1)) == 0 && nb <= (used << HEAP_PAGE_SHIFT) / 16 &&
	       count <= (used << HEAP_PAGE_SHIFT) / 16;
}

/* The header's fields.  -1 when the layout itself is wrong and nothing else
 * can be checked; other problems are reported and the walks that follow
 * check again what they rely on. */
static int check_header(struct hc *c)
{
	const struct heap_hdr *h = H();
	uint64_t npages = heap_rt.len >> HEAP_PAGE_SHIFT;
	if (h->magic != HEAP_MAGIC) {
		problem(c, "heap header (heap offset 0): no pmthreads heap there (magic 0x%016llx, "
			"expected 0x%016llx)", (unsigned long long)h->magic,
			(unsigned long long)HEAP_MAGIC);
		return -1;
	}
	if (h->version != HEAP_VERSION || h->nclasses != HEAP_NCLASSES ||
	    h->nslots != HEAP_NSLOTS || h->page_size != HEAP_PAGE) {
		problem(c, "heap header (heap offset 0): format version %u (%u classes, %u slots, "
			"%u-byte pages) is not this build's version %u (%u, %u, %zu); it was not "
			"reformatted: open it with the pmthreads that wrote it (heap version %u), or "
			"start a new pool (another PMTHREADS_POOL path)", h->version, h->nclasses,
			h->nslots, h->page_size, HEAP_VERSION, HEAP_NCLASSES, HEAP_NSLOTS, HEAP_PAGE,
			h->version);
		return -1;
	}
	if (h->capacity != heap_rt.len || h->npages != npages) {
		problem(c, "heap header (heap offset 0): formatted for %llu bytes, but the range "
			"has %zu", (unsigned long long)h->capacity, heap_rt.len);
		return -1;
	}
	if (h->data_start != meta_pages_for(npages) || h->hwm < h->data_start || h->hwm > npages) {
		problem(c, "heap header (heap offset 0): inconsistent layout (data at page %llu, "
			"high-water mark %llu of %llu pages)", (unsigned long long)h->data_start,
			(unsigned long long)h->hwm, (unsigned long long)npages);
		return -1;
	}
	uint64_t used = h->hwm - h->data_start;
	if (h->free_pages > used || h->large_pages > used || h->free_extents > h->free_pages ||
	    (h->free_root == 0) != (h->free_extents == 0) ||
	    (h->free_root != 0 && (h->free_root < h->data_start || h->free_root >= h->hwm))) {
		problem(c, "heap header (heap offset 0): page counters are inconsistent (%llu free "
			"pages in %llu extents, root page %llu, %llu large pages, %llu pages used)",
			(unsigned long long)h->free_pages, (unsigned long long)h->free_extents,
			(unsigned long long)h->free_root, (unsigned long long)h->large_pages,
			(unsigned long long)used);
	}
	if ((h->secret & 1) == 0)
		problem(c, "heap header (heap offset 0): the block-tag secret is corrupt");
	if (!name_root_ok())
		problem(c, "heap header (heap offset 0): the name table's root is corrupt (bucket "
			"run at page %llu, %llu buckets, %llu names, %llu held objects)",
			(unsigned long long)h->name_buckets, (unsigned long long)h->name_nbuckets,
			(unsigned long long)atomic_load(&h->name_count),
			(unsigned long long)atomic_load(&h->name_held));
	for (unsigned i = 0; i <= HEAP_NSLOTS; i++)
		if (h->slots[i].run_pages > HEAP_RUN_CACHE_PAGES)
			problem(c, "heap header: cache slot %u claims %u cached run pages (at most %u)",
				i, h->slots[i].run_pages, HEAP_RUN_CACHE_PAGES);
	if (atomic_load(&h->meta_bytes) < 0)
		problem(c, "heap header: the metadata byte counter is negative");
	return 0;
}

/* ---- the page map ---------------------------------------------------------- */

/* Each page of [data_start, hwm) in exactly one free extent, span or large
 * run, the page map saying so consistently.  Returns -1 when it is not: the
 * walks that rely on the page map (spans of blocks) are then unsafe. */
static int walk_pages(struct hc *c, struct heap_validate_report *r, uint64_t used_blocks[HEAP_NCLASSES],
		      uint64_t spans_per_class[HEAP_NCLASSES], uint64_t *free_tagged)
{
	const struct heap_hdr *h = H();
	const uint32_t *pm = heap_rt.pagemap;
	uint64_t pg = h->data_start;
	unsigned before = c->problems;
	while (pg < h->hwm) {
		uint32_t e = pm[pg];
		uint64_t n = 0;
		bool ok = true;
		switch (pm_kind(e)) {
		case PM_LARGE:
			n = pm_len(e);
			if (n == 0 || n > h->hwm - pg) {
				ok = false;
				break;
			}
			for (uint64_t i = 1; i < n && ok; i++)
				ok = pm[pg + i] == 0;
			if (ok)
				r->large_pages += n;
			break;
		case PM_FREE:
			n = pm_len(e);
			if (n == 0 || n > h->hwm - pg || pm[pg + n - 1] != e) {
				ok = false;
				break;
			}
			for (uint64_t i = 1; i + 1 < n && ok; i++)
				ok = pm[pg + i] == 0;
			if (ok)
				*free_tagged += n;
			break;
		case PM_SPAN: {
			unsigned cls = pm_span_class(e);
			if (cls >= HEAP_NCLASSES || pm_span_pgoff(e) != 0) {
				ok = false;
				break;
			}
			n = heap_cls[cls].span_pages;
			if (n > h->hwm - pg) {
				ok = false;
				break;
			}
			for (uint64_t i = 0; i < n && ok; i++)
				ok = pm[pg + i] == pm_span(cls, (uint32_t)i);
			if (ok) {
				spans_per_class[cls]++;
				r->span_pages += n;
				r->spans++;
			}
			break;
		}
		default:
			ok = false;
			break;
		}
		if (!ok) {
			problem(c, "page map: page %llu (heap offset 0x%llx) has entry 0x%08x, which "
				"does not fit the pages around it", (unsigned long long)pg,
				(unsigned long long)(pg << HEAP_PAGE_SHIFT), pm[pg]);
			if (c->problems - before >= 16)
				return -1;	/* not worth listing page by page */
			n = 1;
		}
		pg += n;
	}
	(void)used_blocks;
	int rc = c->problems == before ? 0 : -1;
	/* Never-used pages have no tag (the allocator clears any it finds
	 * when it raises hwm); the full walk reads the rest of the map.  Not
	 * a reason to stop: nothing below hwm follows those entries. */
	if (c->full)
		for (uint64_t i = h->hwm; i < h->npages; i++)
			if (pm[i] != 0) {
				problem(c, "page map: page %llu, above the high-water mark %llu, has "
					"entry 0x%08x (never-used pages have none)",
					(unsigned long long)i, (unsigned long long)h->hwm, pm[i]);
				break;
			}
	return rc;
}

/* Every span's header and free list (full check only). */
static void check_spans(struct hc *c, uint64_t used_blocks[HEAP_NCLASSES])
{
	const struct heap_hdr *h = H();
	const uint32_t *pm = heap_rt.pagemap;
	for (uint64_t pg = h->data_start; pg < h->hwm;) {
		uint32_t e = pm[pg];
		if (pm_kind(e) != PM_SPAN) {
			pg += pm_kind(e) == PM_NONE ? 1 : pm_len(e);
			continue;
		}
		unsigned cls = pm_span_class(e);
		const struct heap_class_info *ci = &heap_cls[cls];
		uint64_t so = pg << HEAP_PAGE_SHIFT;
		pg += ci->span_pages;
		if (!span_header_ok(so, cls)) {
			const struct heap_span *sp = heap_at(so);
			problem(c, "span at heap offset 0x%llx (class %u): bad header (magic 0x%x, "
				"bump %u, used %u, free %u)", (unsigned long long)so, cls, sp->magic,
				sp->bump, sp->used, sp->nfree);
			continue;
		}
		const struct heap_span *sp = heap_at(so);
		used_blocks[cls] += sp->used;
		uint32_t n = 0;
		bool ok = true;
		for (uint64_t b = sp->free_head; b != 0; b = ((struct heap_block *)heap_at(b))->next) {
			uint64_t bso;
			if (n++ >= sp->nfree || !block_of_class(b, cls, &bso) || bso != so ||
			    (b - so - ci->first) / ci->size >= sp->bump ||
			    ((struct heap_block *)heap_at(b))->tag != heap_tag(b)) {
				problem(c, "span at heap offset 0x%llx (class %u): its free list is "
					"corrupt at heap offset 0x%llx", (unsigned long long)so, cls,
					(unsigned long long)b);
				ok = false;
				break;
			}
		}
		if (!ok)
			continue;
		bool room = sp->free_head != 0 || sp->bump < sp->nblocks;
		if (n != sp->nfree || room != (sp->in_list != 0))
			problem(c, "span at heap offset 0x%llx (class %u): %u blocks on its free list, "
				"%u counted; %s the partial list", (unsigned long long)so, cls, n,
				sp->nfree, sp->in_list ? "on" : "not on");
	}
}

/* ---- free-extent tree ------------------------------------------------------ */

struct extent_view {
	uint64_t npages, maxlen, left, right;
};

/* In-order: keys ascending, extents neither touching nor overlapping,
 * maxlen right, tags matching.  Stops at the first problem (a corrupt tree
 * cannot be walked further safely); the strictly increasing keys make a
 * cycle a misordering. */
static int check_subtree(struct hc *c, uint64_t t, uint64_t *prev_end, uint64_t *pages,
			 uint64_t *count, unsigned depth)
{
	const struct heap_hdr *h = H();
	if (t == 0)
		return 0;
	if (depth > 4096 || t < h->data_start || t >= h->hwm || *count >= h->free_extents) {
		problem(c, "free-extent tree: node at page %llu is out of range, or the tree is "
			"cyclic or holds more extents than the %llu counted", (unsigned long long)t,
			(unsigned long long)h->free_extents);
		return -1;
	}
	const struct extent_view *n = heap_at(t << HEAP_PAGE_SHIFT);
	uint64_t e = heap_rt.pagemap[t];
	if (pm_kind((uint32_t)e) != PM_FREE || n->npages != pm_len((uint32_t)e) || n->npages == 0 ||
	    n->npages > h->hwm - t) {
		problem(c, "free-extent tree: node at page %llu (heap offset 0x%llx) claims %llu "
			"pages, its page-map tag 0x%08x disagrees", (unsigned long long)t,
			(unsigned long long)(t << HEAP_PAGE_SHIFT), (unsigned long long)n->npages,
			(unsigned)e);
		return -1;
	}
	if (check_subtree(c, n->left, prev_end, pages, count, depth + 1) != 0)
		return -1;
	if (t <= *prev_end && *count > 0) {
		problem(c, "free-extent tree: node at page %llu is misordered or not coalesced "
			"with the extent before it", (unsigned long long)t);
		return -1;
	}
	uint64_t m = n->npages;
	if (n->left != 0 && ((const struct extent_view *)heap_at(n->left << HEAP_PAGE_SHIFT))->maxlen > m)
		m = ((const struct extent_view *)heap_at(n->left << HEAP_PAGE_SHIFT))->maxlen;
	if (n->right != 0 && n->right < h->hwm &&
	    ((const struct extent_view *)heap_at(n->right << HEAP_PAGE_SHIFT))->maxlen > m)
		m = ((const struct extent_view *)heap_at(n->right << HEAP_PAGE_SHIFT))->maxlen;
	if (n->maxlen != m) {
		problem(c, "free-extent tree: node at page %llu has a wrong subtree maximum",
			(unsigned long long)t);
		return -1;
	}
	*prev_end = t + n->npages;
	*pages += n->npages;
	(*count)++;
	return check_subtree(c, n->right, prev_end, pages, count, depth + 1);
}

/* ---- partial lists, caches, names ----------------------------------------- */

static void check_partial_lists(struct hc *c, const uint64_t spans_per_class[HEAP_NCLASSES])
{
	const struct heap_hdr *h = H();
	for (unsigned cls = 0; cls < HEAP_NCLASSES; cls++) {
		const struct heap_class_state *cs = &h->classes[cls];
		uint64_t n = 0, prev = 0;
		for (uint64_t so = cs->partial; so != 0; so = ((struct heap_span *)heap_at(so))->next) {
			if (n++ >= spans_per_class[cls] || !span_header_ok(so, cls) ||
			    !((struct heap_span *)heap_at(so))->in_list ||
			    ((struct heap_span *)heap_at(so))->prev != prev) {
				problem(c, "partial list of class %u: corrupt at heap offset 0x%llx "
					"(entry %llu)", cls, (unsigned long long)so,
					(unsigned long long)n);
				break;
			}
			prev = so;
		}
		if (cs->nspans != spans_per_class[cls])
			problem(c, "class %u counts %llu spans, the page map holds %llu", cls,
				(unsigned long long)cs->nspans,
				(unsigned long long)spans_per_class[cls]);
	}
}

static void check_caches(struct hc *c, struct heap_validate_report *r,
			 uint64_t cached_blocks[HEAP_NCLASSES], uint64_t *cached_run_bytes)
{
	const struct heap_hdr *h = H();
	for (unsigned i = 0; i <= HEAP_NSLOTS; i++) {
		for (unsigned cls = 0; cls < HEAP_NCLASSES; cls++) {
			const struct heap_bin *bin = &h->slots[i].bins[cls];
			uint32_t n = 0;
			bool ok = true;
			/* The count bounds the walk (a cycle ends it): a corrupt
			 * one must not make it billions of steps. */
			if (bin->count > heap_cls[cls].limit) {
				problem(c, "cache slot %u, class %u counts %u blocks, more than a cache "
					"holds (%u)", i, cls, bin->count, heap_cls[cls].limit);
				continue;
			}
			for (uint64_t b = bin->head; b != 0; b = ((struct heap_block *)heap_at(b))->next) {
				uint64_t so;
				if (n++ >= bin->count || !block_of_class(b, cls, &so) ||
				    !span_header_ok(so, cls) ||
				    (b - so - heap_cls[cls].first) / heap_cls[cls].size >=
					    ((struct heap_span *)heap_at(so))->bump ||
				    ((struct heap_block *)heap_at(b))->tag != heap_tag(b)) {
					problem(c, "cache slot %u, class %u: corrupt at heap offset "
						"0x%llx (block %u)", i, cls, (unsigned long long)b, n);
					ok = false;
					break;
				}
			}
			if (!ok)
				continue;
			if (n != bin->count)
				problem(c, "cache slot %u, class %u holds %u blocks, counts %u", i, cls,
					n, bin->count);
			cached_blocks[cls] += n;
			r->cached_bytes += (uint64_t)n * heap_cls[cls].size;
		}
		uint64_t run_pages = 0;
		bool runs_ok = true;
		for (unsigned k = 0; k < HEAP_RUN_BINS; k++) {
			const struct heap_bin *rb = &h->slots[i].runs[k];
			uint32_t n = 0;
			bool ok = true;
			if (rb->count > HEAP_RUN_CACHE_PAGES / (k + 1)) {
				problem(c, "run cache of slot %u (%u pages) counts %u runs, more than a "
					"cache holds (%u)", i, k + 1, rb->count,
					HEAP_RUN_CACHE_PAGES / (k + 1));
				runs_ok = false;
				continue;
			}
			for (uint64_t b = rb->head; b != 0; b = ((struct heap_block *)heap_at(b))->next) {
				if (n++ >= rb->count || !page_in_data(b) ||
				    heap_rt.pagemap[b >> HEAP_PAGE_SHIFT] != pm_make(PM_LARGE, k + 1) ||
				    ((struct heap_block *)heap_at(b))->tag != heap_tag(b)) {
					problem(c, "run cache of slot %u (%u pages): corrupt at heap "
						"offset 0x%llx", i, k + 1, (unsigned long long)b);
					ok = runs_ok = false;
					break;
				}
			}
			if (ok && n != rb->count) {
				problem(c, "run cache of slot %u (%u pages) holds %u runs, counts %u", i,
					k + 1, n, rb->count);
				runs_ok = false;
			}
			run_pages += (uint64_t)n * (k + 1);
		}
		if (runs_ok && run_pages != h->slots[i].run_pages)
			problem(c, "slot %u caches %llu pages of runs, counts %u", i,
				(unsigned long long)run_pages, h->slots[i].run_pages);
		r->cached_bytes += run_pages << HEAP_PAGE_SHIFT;
		*cached_run_bytes += run_pages << HEAP_PAGE_SHIFT;
	}
}

/* A name node is a small block of a class that holds it, below hwm, whose
 * name is terminated, whose size fits its object's block and whose link,
 * when it has one, is such a node too. */
static bool name_block_ok(uint64_t n)
{
	unsigned cls = heap_class_for(sizeof(struct heap_name_node));
	uint64_t so;
	if (!block_of_class(n, cls, &so))
		return false;
	const struct heap_name_node *x = heap_at(n);
	/* the recorded size bounds what nvrecover copies: never past the block */
	return memchr(x->name, 0, sizeof(x->name)) != NULL && x->obj >= data_lo() &&
	       x->obj < data_hi() && (x->flags & ~(HEAP_NAME_HELD | HEAP_NAME_TAKEN)) == 0 &&
	       x->size <= heap_usable_internal(heap_at(x->obj));
}

static bool name_node_ok(uint64_t n)
{
	if (!name_block_ok(n))
		return false;
	const struct heap_name_node *x = heap_at(n);
	if (x->link == 0)
		return !(x->flags & HEAP_NAME_HELD);	/* a held node always has its bound one */
	if (!name_block_ok(x->link))
		return false;
	const struct heap_name_node *y = heap_at(x->link);
	/* a bound node and its held node point at each other */
	return y->link == n && ((x->flags ^ y->flags) & HEAP_NAME_HELD) != 0;
}

static void check_names(struct hc *c, uint64_t *count, uint64_t *held, bool check_objects)
{
	const struct heap_hdr *h = H();
	uint64_t by_name = 0, by_obj = 0, nheld = 0, limit = atomic_load(&h->name_count);
	uint64_t held_limit = atomic_load(&h->name_held);
	*count = limit;
	*held = held_limit;
	if (h->name_buckets == 0 || !name_root_ok())
		return;	/* check_header reported a bad root */
	uint64_t run = h->name_buckets << HEAP_PAGE_SHIFT, nb = h->name_nbuckets;
	uint32_t e = heap_rt.pagemap[h->name_buckets];
	if (pm_kind(e) != PM_LARGE || ((uint64_t)pm_len(e) << HEAP_PAGE_SHIFT) < 2 * nb * sizeof(uint64_t)) {
		problem(c, "name table: its bucket run at heap offset 0x%llx is not an allocated "
			"run of %llu bytes", (unsigned long long)run,
			(unsigned long long)(2 * nb * sizeof(uint64_t)));
		return;
	}
	const uint64_t *b = heap_at(run);
	for (uint64_t i = 0; i < 2 * nb; i++) {
		bool names = i < nb;
		uint64_t *seen = names ? &by_name : &by_obj;
		for (uint64_t n = b[i]; n != 0;) {
			if (*seen >= limit + held_limit || !name_node_ok(n) ||
			    (names && (((const struct heap_name_node *)heap_at(n))->flags &
				       HEAP_NAME_HELD))) {
				problem(c, "name table: %s chain %llu is corrupt at heap offset 0x%llx",
					names ? "name" : "object", (unsigned long long)(i % nb),
					(unsigned long long)n);
				*seen = UINT64_MAX;
				break;
			}
			const struct heap_name_node *x = heap_at(n);
			bool is_held = (x->flags & HEAP_NAME_HELD) != 0;
			uint64_t want = names ? heap_name_hash(x->name) : heap_obj_hash(x->obj);
			if ((want & (nb - 1)) != (i & (nb - 1))) {
				problem(c, "name table: name \"%.127s\" (heap offset 0x%llx) is in the "
					"wrong chain", x->name, (unsigned long long)n);
			} else if (check_objects && (names || is_held) &&
				   heap_usable_internal(heap_at(x->obj)) == 0) {
				problem(c, "name table: name \"%.127s\" %s heap offset 0x%llx, which "
					"is not an allocated block", x->name,
					is_held ? "holds" : "names", (unsigned long long)x->obj);
			}
			if (!names && is_held)
				nheld++;
			(*seen)++;
			n = names ? x->next_name : x->next_obj;
		}
		if (*seen == UINT64_MAX)
			break;
	}
	if (by_name != UINT64_MAX && by_obj != UINT64_MAX &&
	    (by_name != limit || by_obj != limit + held_limit || nheld != held_limit))
		problem(c, "name table: %llu names and %llu held objects counted, %llu on name "
			"chains, %llu on object chains (%llu held)", (unsigned long long)limit,
			(unsigned long long)held_limit, (unsigned long long)by_name,
			(unsigned long long)by_obj, (unsigned long long)nheld);
}

/* ---- the walks ------------------------------------------------------------- */

static unsigned run_checks(struct hc *c, struct heap_validate_report *rep)
{
	struct heap_validate_report r;
	memset(&r, 0, sizeof(r));
	if (rep != NULL)
		memset(rep, 0, sizeof(*rep));
	if (H() == NULL) {
		problem(c, "no heap");
		return c->problems;
	}
	if (check_header(c) != 0)
		return c->problems;
	c->header_ok = true;
	uint64_t used[HEAP_NCLASSES] = { 0 }, spans[HEAP_NCLASSES] = { 0 };
	uint64_t cached[HEAP_NCLASSES] = { 0 }, cached_runs = 0;
	uint64_t free_tagged = 0;
	if (walk_pages(c, &r, used, spans, &free_tagged) != 0)
		return c->problems;	/* everything below follows the page map */
	const struct heap_hdr *h = H();
	uint64_t prev_end = 0;
	if (check_subtree(c, h->free_root, &prev_end, &r.free_pages, &r.free_extents, 0) == 0 &&
	    (r.free_pages != h->free_pages || r.free_extents != h->free_extents))
		problem(c, "free-extent tree: %llu pages in %llu extents, the header counts %llu "
			"in %llu", (unsigned long long)r.free_pages, (unsigned long long)r.free_extents,
			(unsigned long long)h->free_pages, (unsigned long long)h->free_extents);
	/* A free extent the tree does not hold would be coalesced with, and
	 * its stale node read, by the next free beside it. */
	if (free_tagged != r.free_pages)
		problem(c, "page map: %llu pages are tagged free, the free-extent tree holds %llu",
			(unsigned long long)free_tagged, (unsigned long long)r.free_pages);
	if (r.large_pages != h->large_pages)
		problem(c, "large runs: %llu pages, the header counts %llu",
			(unsigned long long)r.large_pages, (unsigned long long)h->large_pages);
	check_partial_lists(c, spans);
	check_caches(c, &r, cached, &cached_runs);
	check_names(c, &r.names, &r.held, c->full);
	if (c->full) {
		check_spans(c, used);
		if (r.free_pages + r.span_pages + r.large_pages != h->hwm - h->data_start)
			problem(c, "pages below the high-water mark: %llu free, %llu in spans, %llu "
				"large, of %llu", (unsigned long long)r.free_pages,
				(unsigned long long)r.span_pages, (unsigned long long)r.large_pages,
				(unsigned long long)(h->hwm - h->data_start));
	}
	if (c->full && c->problems == 0) {
		uint64_t held = (r.large_pages << HEAP_PAGE_SHIFT) - cached_runs;
		for (unsigned cls = 0; cls < HEAP_NCLASSES; cls++) {
			if (cached[cls] > used[cls])
				problem(c, "class %u: %llu blocks cached but only %llu out of their "
					"spans", cls, (unsigned long long)cached[cls],
					(unsigned long long)used[cls]);
			else
				held += (used[cls] - cached[cls]) * heap_cls[cls].size;
		}
		int64_t meta = atomic_load(&h->meta_bytes);
		r.user_bytes = held - (uint64_t)meta;
		/* As heap_get_stats, without its lock: the image's lock words
		 * are not to be trusted. */
		int64_t counted = atomic_load(&h->in_use_shared);
		for (unsigned i = 0; i <= HEAP_NSLOTS; i++)
			counted += atomic_load(&h->slots[i].in_use);
		if (counted < 0)
			counted = 0;
		if ((uint64_t)meta > held || (uint64_t)counted != r.user_bytes)
			problem(c, "%llu bytes are held in blocks (%lld of them the heap's own), but "
				"%llu are counted in use", (unsigned long long)held, (long long)meta,
				(unsigned long long)counted);
	}
	if (rep != NULL)
		*rep = r;
	return c->problems;
}

/* ---- the metadata pages' checksums ---------------------------------------- */

#define SUM_FIX "the pool is corrupt and was left untouched: restore it from a copy, or " \
		"remove it if its data is expendable (pmthreads-recover dump saves what is left)"

static void check_page_sum(struct hc *c, uint64_t pg, const char *what, uint64_t index,
			   uint64_t count)
{
	char where[640];
	where[0] = '\0';
	if (heap_rt.page_check(heap_rt.page_check_ctx, pg, heap_at(pg << HEAP_PAGE_SHIFT), where,
			       sizeof(where)) == 0)
		return;
	problem(c, "%s page %llu of %llu (heap page %llu, heap offset %llu) fails its checksum: "
		"%s; %s", what, (unsigned long long)index, (unsigned long long)count,
		(unsigned long long)pg, (unsigned long long)(pg << HEAP_PAGE_SHIFT), where, SUM_FIX);
}

/* Every metadata page the pool holds a copy of: a value changed into another
 * plausible one passes the structural checks, not these.  The header and
 * page map are where the range's size puts them; the name table's bucket
 * run only once the header's root was found sound. */
static void check_sums(struct hc *c)
{
	uint64_t npages = heap_rt.len >> HEAP_PAGE_SHIFT;
	uint64_t hdr = heap_hdr_pages(), meta = meta_pages_for(npages);
	for (uint64_t pg = 0; pg < hdr; pg++)
		check_page_sum(c, pg, "heap header", pg, hdr);
	for (uint64_t pg = hdr; pg < meta; pg++)
		check_page_sum(c, pg, "page map", pg - hdr, meta - hdr);
	if (!c->header_ok || !name_root_ok() || H()->name_buckets == 0)
		return;
	const struct heap_hdr *h = H();
	uint64_t run = (2 * h->name_nbuckets * sizeof(uint64_t) + HEAP_PAGE - 1) >> HEAP_PAGE_SHIFT;
	for (uint64_t j = 0; j < run && h->name_buckets + j < h->hwm; j++)
		check_page_sum(c, h->name_buckets + j, "name table bucket array", j, run);
}

/* The structures first: an implausible value is best named by what it is. */
static unsigned run_all(struct hc *c, struct heap_validate_report *rep)
{
	run_checks(c, rep);
	if (c->sums && heap_rt.page_check != NULL && H() != NULL)
		check_sums(c);
	return c->problems;
}

int heap_validate(void (*report)(const char *msg, void *arg), void *arg)
{
	struct hc c = { .report = report, .arg = arg, .full = false, .sums = true };
	if (run_all(&c, NULL) == 0)
		return 0;
	if (c.problems == 1)
		err_set("%s", c.first);
	else
		err_set("%s (and %u more problems)", c.first, c.problems - 1);
	return -1;
}

unsigned heap_validate_all(struct heap_validate_report *rep,
			void (*report)(const char *msg, void *arg), void *arg)
{
	struct hc c = { .report = report, .arg = arg, .full = true };
	return run_checks(&c, rep);
}

unsigned heap_validate_image_all(struct heap_validate_report *rep,
				 void (*report)(const char *msg, void *arg), void *arg)
{
	struct hc c = { .report = report, .arg = arg, .full = true, .sums = true };
	return run_all(&c, rep);
}

int heap_validate_full(struct heap_validate_report *rep)
{
	struct hc c = { .full = true };
	if (run_checks(&c, rep) == 0)
		return 0;
	err_set("heap check: %s", c.first);
	return -1;
}
