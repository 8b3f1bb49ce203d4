/*
 * heap_check -- a full consistency walk of the heap's structures, for the
 * tests (after recovery, after churn) and for pmthreads-recover's check.
 * It recomputes what the counters claim from the structures themselves, so
 * a leak or a block counted twice shows up as a mismatch.
 */
#include "heap.h"

#include "heap_layout.h"
#include "log.h"

#include <string.h>

/* Walk a span's free list: every entry a carved block of it, tagged free,
 * and no more entries than it claims. */
static int check_span(uint64_t so, unsigned c)
{
	const struct heap_class_info *ci = &heap_cls[c];
	const struct heap_span *sp = heap_at(so);
	if (sp->magic != SPAN_MAGIC || sp->cls != c || sp->nblocks != ci->nblocks ||
	    sp->bump > sp->nblocks || sp->used + sp->nfree != sp->bump) {
		err_set("heap check: span at offset 0x%llx (class %u) has a bad header "
			"(bump %u, used %u, free %u)", (unsigned long long)so, c, sp->bump,
			sp->used, sp->nfree);
		return -1;
	}
	uint32_t n = 0;
	for (uint64_t b = sp->free_head; b != 0; b = ((struct heap_block *)heap_at(b))->next) {
		if (n++ >= sp->nfree || b < so || !heap_block_valid(b, so, ci) ||
		    (b - so - ci->first) / ci->size >= sp->bump ||
		    ((struct heap_block *)heap_at(b))->tag != heap_tag(b)) {
			err_set("heap check: free list of span 0x%llx (class %u) is corrupt at "
				"0x%llx", (unsigned long long)so, c, (unsigned long long)b);
			return -1;
		}
	}
	bool room = sp->free_head != 0 || sp->bump < sp->nblocks;
	if (n != sp->nfree || room != (sp->in_list != 0)) {
		err_set("heap check: span 0x%llx (class %u): %u blocks on its free list, %u "
			"counted; %s the partial list", (unsigned long long)so, c, n, sp->nfree,
			sp->in_list ? "on" : "not on");
		return -1;
	}
	return 0;
}

/* The pages [data_start, hwm): each in exactly one free extent, span or
 * large run, with the page map saying so. */
static int walk_pages(struct heap_check_report *r, uint64_t used_blocks[HEAP_NCLASSES],
		      uint64_t spans_per_class[HEAP_NCLASSES])
{
	const struct heap_hdr *h = heap_rt.hdr;
	const uint32_t *pm = heap_rt.pagemap;
	uint64_t pg = h->data_start;
	while (pg < h->hwm) {
		uint32_t e = pm[pg];
		uint64_t n;
		switch (pm_kind(e)) {
		case PM_LARGE:
			n = pm_len(e);
			if (n == 0 || pg + n > h->hwm)
				goto bad;
			for (uint64_t i = 1; i < n; i++)
				if (pm[pg + i] != 0)
					goto bad;
			r->large_pages += n;
			break;
		case PM_FREE:
			n = pm_len(e);
			if (n == 0 || pg + n > h->hwm || pm[pg + n - 1] != e)
				goto bad;
			for (uint64_t i = 1; i + 1 < n; i++)
				if (pm[pg + i] != 0)
					goto bad;
			break;
		case PM_SPAN: {
			unsigned c = pm_span_class(e);
			if (c >= HEAP_NCLASSES || pm_span_pgoff(e) != 0)
				goto bad;
			n = heap_cls[c].span_pages;
			if (pg + n > h->hwm)
				goto bad;
			for (uint64_t i = 0; i < n; i++)
				if (pm[pg + i] != pm_span(c, (uint32_t)i))
					goto bad;
			if (check_span(pg << HEAP_PAGE_SHIFT, c) != 0)
				return -1;
			used_blocks[c] += ((const struct heap_span *)heap_at(pg << HEAP_PAGE_SHIFT))->used;
			spans_per_class[c]++;
			r->span_pages += n;
			r->spans++;
			break;
		}
		default:
			goto bad;
		}
		pg += n;
	}
	if (h->hwm < h->npages && pm[h->hwm] != 0)
		goto bad_at_hwm;
	return 0;
bad:
	err_set("heap check: page %llu has page-map entry 0x%08x that does not fit the "
		"pages around it", (unsigned long long)pg, pm[pg]);
	return -1;
bad_at_hwm:
	err_set("heap check: the page map is set above the high-water mark (page %llu)",
		(unsigned long long)h->hwm);
	return -1;
}

/* Each class's partial list: spans of that class with room, each once. */
static int check_partial_lists(const uint64_t spans_per_class[HEAP_NCLASSES])
{
	const struct heap_hdr *h = heap_rt.hdr;
	for (unsigned c = 0; c < HEAP_NCLASSES; c++) {
		const struct heap_class_state *cs = &h->classes[c];
		uint64_t n = 0, prev = 0;
		for (uint64_t so = cs->partial; so != 0; so = ((struct heap_span *)heap_at(so))->next) {
			const struct heap_span *sp = heap_at(so);
			if (n++ > spans_per_class[c] || so >= heap_rt.len ||
			    pm_kind(heap_rt.pagemap[so >> HEAP_PAGE_SHIFT]) != PM_SPAN ||
			    sp->magic != SPAN_MAGIC || sp->cls != c || !sp->in_list || sp->prev != prev) {
				err_set("heap check: the partial list of class %u is corrupt", c);
				return -1;
			}
			prev = so;
		}
		if (cs->nspans != spans_per_class[c]) {
			err_set("heap check: class %u counts %llu spans, the pages hold %llu", c,
				(unsigned long long)cs->nspans,
				(unsigned long long)spans_per_class[c]);
			return -1;
		}
	}
	return 0;
}

/* Every bin of every slot: valid blocks of its class, tagged free, as many
 * as it counts. */
static int check_caches(struct heap_check_report *r, uint64_t cached_blocks[HEAP_NCLASSES],
			uint64_t *cached_run_bytes)
{
	const struct heap_hdr *h = heap_rt.hdr;
	for (unsigned i = 0; i <= HEAP_NSLOTS; i++) {
		for (unsigned c = 0; c < HEAP_NCLASSES; c++) {
			const struct heap_bin *bin = &h->slots[i].bins[c];
			uint32_t n = 0;
			for (uint64_t b = bin->head; b != 0; b = ((struct heap_block *)heap_at(b))->next) {
				uint32_t e = b < heap_rt.len ? heap_rt.pagemap[b >> HEAP_PAGE_SHIFT] : 0;
				if (n++ >= bin->count || pm_kind(e) != PM_SPAN ||
				    pm_span_class(e) != c ||
				    !heap_block_valid(b, heap_span_of(b, e), &heap_cls[c]) ||
				    ((struct heap_block *)heap_at(b))->tag != heap_tag(b)) {
					err_set("heap check: cache slot %u, class %u is corrupt at "
						"offset 0x%llx", i, c, (unsigned long long)b);
					return -1;
				}
			}
			if (n != bin->count) {
				err_set("heap check: cache slot %u, class %u holds %u blocks, "
					"counts %u", i, c, n, bin->count);
				return -1;
			}
			cached_blocks[c] += n;
			r->cached_bytes += (uint64_t)n * heap_cls[c].size;
		}
		uint64_t run_pages = 0;
		for (unsigned k = 0; k < HEAP_RUN_BINS; k++) {
			const struct heap_bin *rb = &h->slots[i].runs[k];
			uint32_t n = 0;
			for (uint64_t b = rb->head; b != 0; b = ((struct heap_block *)heap_at(b))->next) {
				if (n++ >= rb->count || b >= heap_rt.len || (b & (HEAP_PAGE - 1)) != 0 ||
				    heap_rt.pagemap[b >> HEAP_PAGE_SHIFT] != pm_make(PM_LARGE, k + 1) ||
				    ((struct heap_block *)heap_at(b))->tag != heap_tag(b)) {
					err_set("heap check: run cache of slot %u (%u pages) is corrupt "
						"at offset 0x%llx", i, k + 1, (unsigned long long)b);
					return -1;
				}
			}
			if (n != rb->count) {
				err_set("heap check: run cache of slot %u (%u pages) holds %u runs, "
					"counts %u", i, k + 1, n, rb->count);
				return -1;
			}
			run_pages += (uint64_t)n * (k + 1);
		}
		if (run_pages != h->slots[i].run_pages) {
			err_set("heap check: slot %u caches %llu pages of runs, counts %u", i,
				(unsigned long long)run_pages, h->slots[i].run_pages);
			return -1;
		}
		r->cached_bytes += run_pages << HEAP_PAGE_SHIFT;
		*cached_run_bytes += run_pages << HEAP_PAGE_SHIFT;
	}
	return 0;
}

int heap_check(struct heap_check_report *rep)
{
	struct heap_check_report r;
	memset(&r, 0, sizeof(r));
	if (rep != NULL)
		memset(rep, 0, sizeof(*rep));
	const struct heap_hdr *h = heap_rt.hdr;
	if (h == NULL) {
		err_set("heap check: no heap");
		return -1;
	}
	uint64_t used[HEAP_NCLASSES] = { 0 }, spans[HEAP_NCLASSES] = { 0 };
	uint64_t cached[HEAP_NCLASSES] = { 0 }, cached_runs = 0;
	if (walk_pages(&r, used, spans) != 0 || check_partial_lists(spans) != 0 ||
	    check_caches(&r, cached, &cached_runs) != 0)
		return -1;
	if (heap_pages_check(&r.free_pages, &r.free_extents) != 0)
		return -1;
	if (r.free_pages != h->free_pages || r.free_extents != h->free_extents ||
	    r.large_pages != h->large_pages ||
	    r.free_pages + r.span_pages + r.large_pages != h->hwm - h->data_start) {
		err_set("heap check: pages below the high-water mark: %llu free (%llu counted), "
			"%llu in spans, %llu large (%llu counted), of %llu",
			(unsigned long long)r.free_pages, (unsigned long long)h->free_pages,
			(unsigned long long)r.span_pages, (unsigned long long)r.large_pages,
			(unsigned long long)h->large_pages,
			(unsigned long long)(h->hwm - h->data_start));
		return -1;
	}
	uint64_t held = (r.large_pages << HEAP_PAGE_SHIFT) - cached_runs;
	for (unsigned c = 0; c < HEAP_NCLASSES; c++) {
		if (cached[c] > used[c]) {
			err_set("heap check: class %u: %llu blocks cached but only %llu out of "
				"their spans", c, (unsigned long long)cached[c],
				(unsigned long long)used[c]);
			return -1;
		}
		held += (used[c] - cached[c]) * heap_cls[c].size;
	}
	if (heap_names_check(&r.names) != 0)
		return -1;
	int64_t meta = atomic_load(&h->meta_bytes);
	r.user_bytes = held - (uint64_t)meta;
	struct heap_stats st;
	heap_get_stats(&st);
	if (rep != NULL)
		*rep = r;
	if (meta < 0 || (uint64_t)meta > held || st.bytes_in_use != r.user_bytes) {
		err_set("heap check: %llu bytes are held in blocks (%lld of them the heap's own), "
			"but %llu are counted in use", (unsigned long long)held, (long long)meta,
			(unsigned long long)st.bytes_in_use);
		return -1;
	}
	return 0;
}
