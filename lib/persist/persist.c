/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * persist -- one epoch: the batched failure-atomic version switch.  See
 * persist.h.
 *
 * Why three fences: (1) the working copy's new seq (VER_d+1, which marks it
 * torn until VER_d catches up) is durable before any of its data changes, so
 * a copy that still carries a valid seq always holds exactly the image of
 * that epoch; (2) all data is durable before (3) VER_d+1 is published, which
 * makes the new copies valid all at once.  Each copy's checksum (the sum
 * table) is part of (2): from the bytes written, flushed with them,
 * so it is durable whenever its copy is valid -- including a copy an
 * unpublished attempt wrote and the next attempt publishes without listing
 * it: that attempt's end fenced the checksum with the data.
 */
#include "persist/persist.h"
#include "persist/persist_internal.h"

#include "base/assert.h"
#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <string.h>

static enum persist_fault persist_fault_active;

void persist_set_fault(enum persist_fault f) { persist_fault_active = f; }
enum persist_fault persist_get_fault(void) { return persist_fault_active; }

/* The older copy becomes the working copy; an invalidated one is reused
 * first (it holds nothing worth keeping). */
static int working_copy(const struct pool *p, uint64_t page)
{
	uint64_t s0 = p->seq[page][0], s1 = p->seq[page][1];
	if (s0 == POOL_SEQ_INVALID)
		return 0;
	if (s1 == POOL_SEQ_INVALID)
		return 1;
	return s1 < s0 ? 1 : 0;
}

/* Word-wise so the compiler vectorises it; both sides are line-aligned. */
static inline int line_differs(const unsigned char *a, const unsigned char *b)
{
	uint64_t d = 0;
	for (int k = 0; k < NVM_LINE / 8; k++) {
		uint64_t x, y;
		memcpy(&x, a + 8 * k, 8);
		memcpy(&y, b + 8 * k, 8);
		d |= x ^ y;
	}
	return d != 0;
}

/* ---- in place (persist.h) ---- */

/* What the undo area holds of each overwrite: the old bytes (padded to 8),
 * then this, so that it is read back from the end. */
struct undo_tail {
	unsigned char *addr;
	size_t len;
};

static size_t undo_entry_bytes(size_t len) { return (len + 7) / 8 * 8 + sizeof(struct undo_tail); }

/* The most an in-place page can add to the group (every line rewritten, a
 * range header each at worst, its checksum entry) and to the undo area
 * (at most a run every other line, and the checksum). */
static size_t group_bytes_bound(const struct pool *p)
{
	return p->page_size + p->page_size / NVM_LINE * 8 + 64;
}
static size_t undo_bytes_bound(const struct pool *p)
{
	return p->page_size + (p->page_size / NVM_LINE / 2 + 2) * undo_entry_bytes(0) + 16;
}

/* What an attempt keeps free of the group's room for what follows its data
 * in the same group (the publication's record). */
#define ROOM_RESERVE 1024

/* Whether an attempt at n pages may rewrite valid copies in place: the
 * backend keeps the whole group all-or-nothing while it has room (nvm.h),
 * and twice what recent attempts took of it per page fits (write checks each
 * page against the room left as it goes). */
static bool choose_in_place(struct pool *p, size_t n, size_t room)
{
	if (p->in_place_backoff) {
		p->in_place_backoff = false;
		return false;
	}
	size_t est = p->in_place_est != 0 ? p->in_place_est : 512;
	if (room <= ROOM_RESERVE || n > (room - ROOM_RESERVE) / (2 * est))
		return false;
	if (p->undo == NULL && persist_reserve_memory(p) != 0)
		return false;
	p->undo_used = 0;
	return true;
}

/* ---- whole pages (persist.h) ---- */

/* A run of whole pages is copied and written in pieces of this size. */
#define WHOLE_BUF_BYTES NVM_DIRECT_STAGE_MAX

static void release_whole(struct pool *p)
{
	if (p->page_hint != NULL)
		prim_unmap(p->page_hint, (size_t)p->npages);
	if (p->whole_buf != NULL)
		prim_unmap(p->whole_buf, WHOLE_BUF_BYTES);
	p->page_hint = NULL;
	p->whole_buf = NULL;
}

static int reserve_whole(struct pool *p)
{
	if (p->page_hint != NULL || p->read_only || !nvm_has_direct(p->nvm))
		return 0;
	p->page_hint = prim_map_any((size_t)p->npages);
	p->whole_buf = prim_map_any(WHOLE_BUF_BYTES);
	nvm_direct_reserve(p->nvm);
	if (p->page_hint == NULL || p->whole_buf == NULL) {
		release_whole(p);
		err_set_errno(ENOMEM, "cannot reserve %llu bytes for the write-back of whole pages",
			      (unsigned long long)(p->npages + WHOLE_BUF_BYTES));
		return -1;
	}
	return 0;
}

/* A page never persisted is written whole when it lies in a run of at
 * least this many dirty pages: memory filled in bulk (a heap that grows,
 * buffers) is new all through; a page first touched alone among clean
 * ones (scattered writes into a fresh region) may hold a line or two, which
 * the log takes for a hundred bytes. */
#define WHOLE_FRESH_RUN 4

/* Whether page i, whose hint value is h, lying in a run of run dirty pages,
 * is to be written whole. */
static bool wants_whole(const struct pool *p, uint64_t i, uint8_t h, size_t run)
{
	if (h == HINT_UNKNOWN)	/* never persisted: all of it is new */
		return run >= WHOLE_FRESH_RUN && pool_valid_copy(p, i) < 0;
	return h >= HINT_HEAVY;	/* not HINT_FRESH: compared next */
}

/* Which pages this attempt writes whole (HINT_WHOLE set in their hints):
 * the pages that want it, unless they are fewer than PERSIST_WHOLE_MIN --
 * three device flushes instead of one cost more than logging them.  Their
 * number. */
static size_t choose_whole(struct pool *p, uint64_t next, const uint64_t *pages, size_t n,
			   struct persist_stats *st)
{
	const size_t min = p->whole_min != 0 ? p->whole_min : PERSIST_WHOLE_MIN;
	if (n < min || (p->page_hint == NULL && (reserve_whole(p) != 0 || p->page_hint == NULL)))
		return 0;
	size_t whole = 0, refused = 0;
	size_t run = 0, run_end = 0;	/* the run of consecutive pages k is in */
	for (size_t k = 0; k < n; k++) {
		uint64_t i = pages[k];
		if (k >= run_end) {
			run_end = k + 1;
			while (run_end < n && pages[run_end] == pages[run_end - 1] + 1)
				run_end++;
			run = run_end - k;
		}
		if (i >= p->npages)
			continue;	/* persist_attempt_begin refuses it */
		uint8_t h = p->page_hint[i] & HINT_VALUE;
		bool want = wants_whole(p, i, h, run);
		if (want) {
			int w = p->seq[i][0] == next ? 0 : p->seq[i][1] == next ? 1 : working_copy(p, i);
			if (!nvm_direct_allowed(p->nvm, pool_copy(p, i, w), p->page_size)) {
				want = false;
				refused++;
			}
		}
		p->page_hint[i] = (uint8_t)(h | (want ? HINT_WHOLE : 0));
		whole += want;
	}
	st->whole_refused += refused;
	if (whole < min) {
		for (size_t k = 0; k < n && whole != 0; k++)
			if (pages[k] < p->npages)
				p->page_hint[pages[k]] &= HINT_VALUE;
		return 0;
	}
	return whole;
}

/* What a page's write-back found, for the next choice (persist_internal.h).
 * Whether lines of a page's lines changed count as most of it. */
static bool heavy(const struct pool *p, uint64_t lines) { return lines * NVM_LINE * 2 >= p->page_size; }

/* Compared line by line, lines of them rewritten: a page already heavy
 * keeps its count (compared for another reason: an attempt too small for
 * whole pages, its copy refused, the redo of an attempt put back). */
static void note_lines(struct pool *p, uint64_t i, uint64_t lines)
{
	if (p->page_hint == NULL)
		return;
	uint8_t h = p->page_hint[i] & HINT_VALUE;
	if (!heavy(p, lines))
		p->page_hint[i] = HINT_LIGHT;
	else if (h < HINT_HEAVY)
		p->page_hint[i] = HINT_HEAVY;
}

/* What a whole write tells of page i, whose hint value was h: when a probe
 * was due, image compared with the page's valid copy first (its differing
 * lines counted: nothing written, no record). */
static uint8_t next_whole_hint(const struct pool *p, uint64_t i, uint8_t h,
			       const unsigned char *image)
{
	if (h == HINT_UNKNOWN)
		return HINT_FRESH;
	if (!hint_probe_due(h))
		return (uint8_t)(h + 1);
	int v = pool_valid_copy(p, i);
	uint64_t lines = p->page_size / NVM_LINE;
	if (v >= 0) {
		const unsigned char *old = pool_copy(p, i, v);
		lines = 0;
		for (size_t l = 0; l < p->page_size / NVM_LINE; l++)
			lines += (uint64_t)line_differs(old + l * NVM_LINE, image + l * NVM_LINE);
	}
	if (!heavy(p, lines))
		return HINT_LIGHT;
	/* h + 1 = 2^(L+2) at level L's probe: on at the next level. */
	unsigned level = (unsigned)(31 - __builtin_clz((unsigned)h + 1)) - 2;
	if (level + 1 < HINT_LEVELS)
		level++;
	return (uint8_t)(2u << level);
}

/* Written whole.  Its HINT_WHOLE stays for the rest of the attempt:
 * forget_whole_sums needs it if the attempt is put back. */
static void note_whole(struct pool *p, uint64_t i, const unsigned char *image)
{
	uint8_t h = p->page_hint[i] & HINT_VALUE;
	p->page_hint[i] = (uint8_t)(HINT_WHOLE | next_whole_hint(p, i, h, image));
}

/* The run of whole pages copied into whole_buf so far: pages [first,
 * first + n) of the heap, copy c, to be written at once. */
struct whole_run {
	uint64_t first;
	size_t n;
	int c;
	unsigned char *buf;	/* the backend's staging memory, or whole_buf */
};

static void whole_flush(struct pool *p, struct whole_run *r)
{
	if (r->n == 0)
		return;
	nvm_write_direct(p->nvm, pool_copy(p, r->first, r->c), r->buf, r->n * p->page_size);
	r->n = 0;
}

/* Page i's image into the run (written first when it cannot join it),
 * and its copy c's checksum from the very bytes copied. */
static uint64_t whole_add(struct pool *p, struct whole_run *r, uint64_t i, int c,
			  const unsigned char *image, const unsigned char **copied)
{
	const size_t ps = p->page_size;
	if (r->n != 0 && (i != r->first + r->n || c != r->c ||
			  pool_copy(p, i, c) != pool_copy(p, r->first, c) + r->n * ps ||
			  (r->n + 1) * ps > WHOLE_BUF_BYTES))
		whole_flush(p, r);
	if (r->n == 0) {
		r->first = i;
		r->c = c;
		r->buf = nvm_direct_stage(p->nvm, WHOLE_BUF_BYTES);
		if (r->buf == NULL)
			r->buf = p->whole_buf;
	}
	unsigned char *at = r->buf + r->n * ps;
	r->n++;
	*copied = at;
	return pool_sum_copy_page(&p->sum_key, i, at, image);
}

/* An attempt put back (undo_all) leaves the pages it wrote whole as the
 * file holds them, but their checksums in the table as they were: the next
 * write-back of such a copy must sum it afresh (0: persist_attempt_write),
 * not update a sum that describes other bytes. */
static void forget_whole_sums(struct pool *p, const struct persist_attempt *e)
{
	for (size_t k = 0; k < e->n && e->nwhole != 0; k++) {
		uint64_t i = e->pages[k];
		if (i < p->npages && (p->page_hint[i] & HINT_WHOLE))
			for (int c = 0; c < 2; c++)
				if (p->seq[i][c] == e->next)
					p->sum[i][c] = 0;
	}
}

void persist_release(struct pool *p)
{
	if (p->undo != NULL)
		prim_unmap(p->undo, p->undo_cap);
	p->undo = NULL;
	release_whole(p);
}

int persist_reserve_memory(struct pool *p)
{
	if (reserve_whole(p) != 0)
		return -1;
	if (p->undo != NULL || p->read_only || !nvm_has_groups(p->nvm))
		return 0;
	/* An attempt takes at most the group's room at its start, and its
	 * undo bytes per page are within a quarter more than its group bytes:
	 * twice the largest room holds them. */
	size_t cap = 2 * nvm_group_room_max(p->nvm) + 4096;
	p->undo = prim_map_any(cap);
	if (p->undo == NULL) {
		err_set_errno(ENOMEM, "cannot reserve %zu bytes for the in-place write-back's undo "
			      "area", cap);
		return -1;
	}
	p->undo_cap = cap;
	return 0;
}

/* Whether the next page may be written in place: the group's room and the
 * undo area both take the most it can add. */
static bool room_for_page(const struct pool *p)
{
	return nvm_group_room(p->nvm) >= group_bytes_bound(p) + ROOM_RESERVE &&
	       p->undo_cap - p->undo_used >= undo_bytes_bound(p);
}

static void undo_save(struct pool *p, unsigned char *addr, size_t len)
{
	size_t at = p->undo_used, need = undo_entry_bytes(len);
	if (need > p->undo_cap - at)
		log_fatal("persist: the in-place undo area (%zu bytes) is full: its bound is wrong",
			  p->undo_cap);
	memcpy(p->undo + at, addr, len);
	struct undo_tail t = { addr, len };
	memcpy(p->undo + at + need - sizeof(t), &t, sizeof(t));
	p->undo_used = at + need;
}

/* Put back, newest first, every byte the attempt's write phase stored
 * (working copies' as well: all of it is done again), and withdraw its
 * flushes: the pool is as the seq order left it, and nothing of the
 * attempt but that order reaches the media. */
static void undo_all(struct pool *p)
{
	size_t at = p->undo_used;
	while (at != 0) {
		struct undo_tail t;
		memcpy(&t, p->undo + at - sizeof(t), sizeof(t));
		at -= undo_entry_bytes(t.len);
		memcpy(t.addr, p->undo + at, t.len);
	}
	p->undo_used = 0;
	nvm_discard_flushed(p->nvm);
}

static void store_run(struct pool *p, unsigned char *dst, const unsigned char *src, size_t len)
{
	if (persist_fault_active == PERSIST_FAULT_SKIP_DATA_FLUSH)
		memcpy(dst, src, len);
	else
		nvm_copy_flush(p->nvm, dst, src, len);
}

/* Lines held for one primitive: a 4 KiB page's worth, so that a larger page
 * splits its longest runs. */
#define RUN_LINES 64

/* Write the lines of the working copy that differ from the page's image, in
 * runs of adjacent lines (one primitive per run).  Each line is read from
 * the image once, and what is written and what the checksum change *delta
 * is computed from are that one read: a live image the program changes
 * meanwhile cannot make the copy's checksum disagree with its bytes.  delta
 * NULL: no change summed (checksums skipped, a test hook). */
static uint64_t write_page(struct pool *p, unsigned char *copy, const unsigned char *src,
			   pool_sum_delta *delta, bool in_place)
{
	_Alignas(NVM_LINE) unsigned char held[RUN_LINES * NVM_LINE];
	const size_t lines = p->page_size / NVM_LINE;
	uint64_t written = 0;
	size_t run = 0, len = 0;	/* the run: its first line, its lines in held[] */
	for (size_t l = 0; l <= lines; l++) {
		bool differs = l < lines && line_differs(copy + l * NVM_LINE, src + l * NVM_LINE);
		/* The run ends at an unchanged line, the page's end, or when
		 * held[] is full. */
		if (len != 0 && (!differs || len == RUN_LINES)) {
			if (in_place)
				undo_save(p, copy + run * NVM_LINE, len * NVM_LINE);
			store_run(p, copy + run * NVM_LINE, held, len * NVM_LINE);
			written += len;
			len = 0;
		}
		if (!differs)
			continue;
		if (len == 0)
			run = l;
		/* The one read of the line (the compare above may have seen
		 * other bytes of a live image: then this line is rewritten with
		 * what it holds, summed as such); only this process writes the
		 * copy, so it holds still. */
		unsigned char *line = held + len * NVM_LINE;
		memcpy(line, src + l * NVM_LINE, NVM_LINE);
		len++;
		if (delta != NULL)
			pool_sum_delta_line(&p->sum_key, l, copy + l * NVM_LINE, line, delta);
	}
	return written;
}

/* The sum table's entries of an attempt, flushed a line at a time: a batch
 * is mostly runs of adjacent pages, four pages' pairs to a line.  Only the
 * entries of the line that changed are named: the same line on a cache-line
 * medium, but what a backend that writes the ranges flushed writes (16
 * bytes a page, not 72). */
struct sum_lines {
	uintptr_t line;		/* pending line, 0: none */
	uintptr_t lo, hi;	/* the changed entries in it: [lo, hi) */
};

static void sum_flush_pending(struct pool *p, struct sum_lines *sl)
{
	if (sl->line != 0 && persist_fault_active != PERSIST_FAULT_SKIP_SUM_FLUSH)
		nvm_flush(p->nvm, (const void *)sl->lo, sl->hi - sl->lo);
	sl->line = 0;
}

/* Copy w of page i gets checksum sum.  An unchanged entry (the page was
 * rewritten with the bytes it had) needs no flush. */
static void set_sum(struct pool *p, struct sum_lines *sl, uint64_t i, int w, uint64_t sum,
		    bool in_place)
{
	if (p->sum[i][w] == sum)
		return;
	if (in_place)
		undo_save(p, (unsigned char *)&p->sum[i][w], sizeof(uint64_t));
	p->sum[i][w] = sum;
	uintptr_t at = (uintptr_t)&p->sum[i][w];
	uintptr_t l = at & ~(uintptr_t)(NVM_LINE - 1);
	if (l != sl->line) {
		sum_flush_pending(p, sl);
		sl->line = l;
		sl->lo = at;
		sl->hi = at + sizeof(uint64_t);
	}
	if (at < sl->lo)
		sl->lo = at;
	if (at + sizeof(uint64_t) > sl->hi)
		sl->hi = at + sizeof(uint64_t);
}

/* The third fence: one checksummed version record (pool.h). */
static int publish(struct pool *p, uint64_t next) { return pool_publish(p, next); }

static const void *shadow_page(void *ctx, size_t k, uint64_t page)
{
	(void)k;
	const struct pool *p = ((const void **)ctx)[0];
	const unsigned char *sh = ((const void **)ctx)[1];
	return sh + page * p->page_size;
}

static void shadow_done(void *ctx, size_t k, size_t lines)
{
	(void)ctx;
	(void)k;
	(void)lines;
}

int persist_epoch(struct pool *p, const void *shadow, const uint64_t *pages, size_t n,
		  struct persist_stats *st)
{
	const void *ctx[2] = { p, shadow };
	struct persist_source src = { shadow_page, shadow_done, (void *)ctx };
	return persist_epoch_from(p, &src, pages, n, st);
}

int persist_epoch_from(struct pool *p, const struct persist_source *src, const uint64_t *pages,
		       size_t n, struct persist_stats *st)
{
	if (n == 0)
		return 0;
	struct persist_attempt e;
	persist_attempt_begin(&e, p, pages, n);
	persist_attempt_write(&e, src, pages, n);
	int err = persist_attempt_end(&e, true, st);
	if (err != 0 || !e.reverted)
		return err;
	/* It outgrew the group's room in place: again, with working copies. */
	persist_attempt_begin(&e, p, pages, n);
	persist_attempt_write(&e, src, pages, n);
	return persist_attempt_end(&e, true, st);
}

void persist_attempt_begin(struct persist_attempt *e, struct pool *p, const uint64_t *pages, size_t n)
{
	if (p->read_only)
		log_fatal("persist_epoch on %s, which was opened read-only", p->path);
	*e = (struct persist_attempt){ .p = p, .next = *p->ver_d + 1, .fences0 = p->nvm->stats.fences };
	/* A write-back already failed: nothing written now could be trusted
	 * (nvm.h), so the pool is left exactly as it is. */
	e->failed = pool_accept(p) != 0;
	if (e->failed)
		return;
	if (!p->torn_invalidated)
		persist_invalidate_torn(p);
	const uint64_t next = e->next;
	e->pages = pages;
	e->n = n;
	/* Whole pages first: the in-place choice counts only the others. */
	e->nwhole = choose_whole(p, next, pages, n, &e->st);
	e->room0 = nvm_group_room(p->nvm);
	e->in_place = e->room0 != 0 && choose_in_place(p, n - e->nwhole, e->room0);

	for (size_t k = 0; k < n; k++) {
		uint64_t i = pages[k];
		if (i >= p->npages)
			log_fatal("persist_epoch: page %llu is outside the heap (%llu pages)",
				  (unsigned long long)i, (unsigned long long)p->npages);
		/* Listed twice, or its working copy already carries next: an
		 * attempt at this epoch that was not published (see
		 * persist_attempt_end) chose it, and it is chosen again. */
		if (p->seq[i][0] == next || p->seq[i][1] == next)
			continue;
		bool whole = e->nwhole != 0 && (p->page_hint[i] & HINT_WHOLE);
		if (!whole && e->in_place && pool_valid_copy(p, i) >= 0) {
			e->st.pages++;
			e->st.pages_in_place++;
			continue;
		}
		/* Torn copies were invalidated, so no seq is past VER_d --
		 * unless the test fault that skips the invalidation is on. */
		PMT_ASSERT(persist_fault_active == PERSIST_FAULT_SKIP_INVALIDATE ||
			   ((p->seq[i][0] < next || p->seq[i][0] == POOL_SEQ_INVALID) &&
			    (p->seq[i][1] < next || p->seq[i][1] == POOL_SEQ_INVALID)));
		int w = working_copy(p, i);
		/* The copy overwritten is never the one recovery would read. */
		PMT_ASSERT(pool_valid_copy(p, i) != w);
		/* The write-back updates a copy's checksum from the lines it
		 * rewrites, which needs the recorded sum to describe the copy:
		 * true of a valid copy (written and summed by an epoch, fenced
		 * before its publication) and of one this process wrote (the
		 * case above), not of a copy never written or invalidated
		 * (torn: its sum may be another attempt's).  Such a copy's
		 * entry is cleared, so that the write-back sums it afresh; no
		 * flush: a copy that is not valid is never verified. */
		if (p->seq[i][w] == 0 || p->seq[i][w] == POOL_SEQ_INVALID)
			p->sum[i][w] = 0;
		pool_seq_pages_raise(p, i + 1);
		p->seq[i][w] = next;
		nvm_flush(p->nvm, &p->seq[i][w], sizeof(uint64_t));
		e->st.pages++;
	}
	/* Ordered, not waited for: nothing depends on the seq entries being
	 * durable before the data is written, only on their reaching the
	 * media first (nvm_order: a fence, unless the backend can order
	 * without waiting) -- but for pages written whole, which may reach
	 * the media before anything ordered (nvm_write_direct): their torn
	 * seq must be durable before any of them is, a fence.  An earlier
	 * unpublished attempt's seq entries, ordered in the same group, are
	 * made durable by it too (whole pages it chose are written again). */
	if (n != 0 && persist_fault_active != PERSIST_FAULT_SKIP_SEQ_FENCE) {
		if (e->nwhole != 0)
			nvm_fence(p->nvm);
		else
			nvm_order(p->nvm);
	}
	if (persist_fault_active == PERSIST_FAULT_VER_BEFORE_DATA && nvm_error(p->nvm) == 0)
		(void)publish(p, next);
}

void persist_attempt_write(struct persist_attempt *e, const struct persist_source *src,
			   const uint64_t *pages, size_t n)
{
	struct pool *p = e->p;
	/* After a failed fence (this attempt's seq fence included) the
	 * copies are torn whatever is written: write nothing more. */
	if (e->failed || nvm_error(p->nvm) != 0) {
		e->failed = true;
		return;
	}
	const uint64_t next = e->next;
	const uint64_t per_page = p->page_size / NVM_LINE;
	uint64_t lines = 0;
	struct sum_lines sl = { 0 };
	struct whole_run run = { 0 };
	for (size_t k = 0; k < n; k++) {
		uint64_t i = pages[k];
		if (e->in_place && !e->reverted && !room_for_page(p)) {
			/* Outgrowing the room: put back now, write no more.
			 * What the pages so far took is a floor for the next
			 * choice's estimate: an epoch this large goes to
			 * working copies until the writes thin out. */
			size_t room = nvm_group_room(p->nvm);
			size_t per = k != 0 && room < e->room0 ? (e->room0 - room) / k : 0;
			if (per > p->in_place_est)
				p->in_place_est = per;
			sl.line = 0;
			whole_flush(p, &run);
			undo_all(p);
			forget_whole_sums(p, e);
			e->reverted = true;
			e->st.attempts_reverted++;
			p->in_place_backoff = true;
		}
		if (e->reverted) {
			(void)src->begin(src->ctx, k, i);
			src->end(src->ctx, k, 0);
			continue;
		}
		int w = p->seq[i][0] == next ? 0 : p->seq[i][1] == next ? 1 : -1;
		/* A working copy whose checksum is not known (never written,
		 * invalidated, or put back: begin and forget_whole_sums clear
		 * it) would be read whole to be summed and compared: written
		 * whole instead where this attempt writes pages whole (its seq
		 * fence made the copy's torn seq durable), its history left as
		 * it was. */
		bool whole = e->nwhole != 0 && (p->page_hint[i] & HINT_WHOLE);
		bool unknown = !whole && e->nwhole != 0 && w >= 0 && p->sum[i][w] == 0 &&
			       nvm_direct_allowed(p->nvm, pool_copy(p, i, w), p->page_size);
		if (whole || unknown) {
			PMT_ASSERT(w >= 0);
			const unsigned char *at = NULL;
			uint64_t sum = whole_add(p, &run, i, w, src->begin(src->ctx, k, i), &at);
			src->end(src->ctx, k, (size_t)per_page);
			if (persist_fault_active != PERSIST_FAULT_SKIP_SUMS)
				set_sum(p, &sl, i, w, sum, e->in_place);
			if (whole)
				note_whole(p, i, at);
			else	/* for forget_whole_sums */
				p->page_hint[i] |= HINT_WHOLE;
			lines += per_page;
			e->st.pages_whole++;
			continue;
		}
		/* Neither copy chosen: begin left the valid one to rewrite. */
		bool in_place = w < 0;
		if (in_place)
			w = pool_valid_copy(p, i);
		PMT_ASSERT(in_place ? e->in_place && w >= 0 : p->seq[i][w] == next);
		const void *image = src->begin(src->ctx, k, i);
		unsigned char *copy = pool_copy(p, i, w);
		/* The checksum of the bytes written, durable with them before
		 * VER_d makes the copy valid: updated from the lines rewritten.
		 * A recorded sum that does not describe the copy (0, see
		 * persist_attempt_begin) is first computed from the bytes the
		 * copy holds -- which the diff reads next anyway. */
		pool_sum_delta delta = 0;
		bool summed = persist_fault_active != PERSIST_FAULT_SKIP_SUMS;
		uint64_t base = summed ? p->sum[i][w] : 0;
		if (summed && base == 0)
			base = pool_page_sum(p, i, copy);
		uint64_t page_lines = write_page(p, copy, image, summed ? &delta : NULL, e->in_place);
		lines += page_lines;
		note_lines(p, i, page_lines);
		src->end(src->ctx, k, (size_t)page_lines);
		if (summed)
			set_sum(p, &sl, i, w, pool_sum_update(base, delta), e->in_place);
	}
	whole_flush(p, &run);
	sum_flush_pending(p, &sl);
	e->st.lines_written += lines;
	e->st.bytes_written += lines * NVM_LINE;
	e->st.bytes_compared += (uint64_t)(n - e->st.pages_whole) * p->page_size;
}

int persist_attempt_end(struct persist_attempt *e, bool publish_it, struct persist_stats *st)
{
	struct pool *p = e->p;
	/* Not to be published: what was rewritten in place goes back before
	 * the group's next record is appended (persist.h). */
	if (e->in_place && !e->reverted && !publish_it && !e->failed &&
	    nvm_error(p->nvm) == 0 && e->st.pages_in_place != 0) {
		undo_all(p);
		forget_whole_sums(p, e);
		e->reverted = true;
		e->st.attempts_reverted++;
	}
	/* What this attempt took of the room per page, for the next choice. */
	if (e->in_place && !e->reverted && e->st.pages != 0) {
		size_t room = nvm_group_room(p->nvm);
		size_t per = room < e->room0 ? (e->room0 - room) / (size_t)e->st.pages : 0;
		size_t est = p->in_place_est != 0 ? p->in_place_est : per;
		est = (3 * est + per) / 4;
		p->in_place_est = est < 64 ? 64 : est;
	}
	/* Fenced even when not published: a page of this attempt that nothing
	 * writes again before the next attempt is published keeps the data
	 * written now. */
	if (!e->failed && persist_fault_active != PERSIST_FAULT_SKIP_DATA_FENCE)
		nvm_order(p->nvm);
	/* Never publish an epoch whose seq or data fence failed: VER_d stays,
	 * and the copies written count as torn. */
	int err = nvm_error(p->nvm);
	if (err == 0 && publish_it && !e->reverted &&
	    persist_fault_active != PERSIST_FAULT_VER_BEFORE_DATA)
		err = publish(p, e->next);
	p->undo_used = 0;

	if (st != NULL) {
		e->st.fences = p->nvm->stats.fences - e->fences0;
		persist_stats_add(st, &e->st);
	}
	return err;
}

uint64_t persist_invalidate_torn(struct pool *p)
{
	if (p->read_only)
		return 0;
	if (persist_get_fault() == PERSIST_FAULT_SKIP_INVALIDATE) {
		p->torn_invalidated = true;
		return 0;
	}
	if (pool_accept(p) != 0)
		return 0;	/* nothing is written after an error (nvm.h) */
	const uint64_t v = *p->ver_d;
	uint64_t count = 0;
	/* One flush per line of the seq table (four pages' pairs), not per
	 * copy: an interrupted epoch leaves runs of torn copies. */
	uintptr_t line = 0;
	const uint64_t seq_pages = pool_seq_pages(p);
	for (uint64_t i = 0; i < seq_pages; i++) {
		for (int c = 0; c < 2; c++) {
			uint64_t s = p->seq[i][c];
			if (s != POOL_SEQ_INVALID && s > v) {
				p->seq[i][c] = POOL_SEQ_INVALID;
				uintptr_t l = (uintptr_t)&p->seq[i][c] & ~(uintptr_t)(NVM_LINE - 1);
				if (l != line && line != 0)
					nvm_flush(p->nvm, (const void *)line, NVM_LINE);
				line = l;
				count++;
			}
		}
	}
	if (line != 0)
		nvm_flush(p->nvm, (const void *)line, NVM_LINE);
	if (count != 0)
		nvm_fence(p->nvm);
	p->torn_invalidated = true;
	if (count != 0)
		log_msg(LOG_INFO, "pool %s: invalidated %llu copies left by an interrupted epoch",
			p->path, (unsigned long long)count);
	return count;
}
