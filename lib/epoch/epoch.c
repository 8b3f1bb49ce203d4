/* SPDX-License-Identifier: BSD-3-Clause */
/* epoch -- the epoch pipeline.  See epoch.h. */
#include "epoch/epoch.h"

#include "epoch/epoch_log.h"
#include "base/assert.h"
#include "base/log.h"
#include "persist/persist.h"
#include "prim/prim.h"
#include "quiesce/quiesce.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

/* One pipeline per open pool.  Made by epoch_pipeline_open before the
 * epoch thread starts and freed by epoch_pipeline_close after it stopped
 * (or by a fork child's abandon, where it never runs); in between, both
 * halves (epoch_on_quiescent, epoch_on_reopened) run on the epoch thread.
 * Each field says who writes it: "set at open" is read-only after; "epoch
 * thread" is touched by nothing else. */
struct epoch_pipeline {
	/* Set at open: */
	struct pool *pool;
	struct tracker *tracker;
	unsigned char *heap;
	size_t ps;
	size_t capacity;		/* pages: the whole heap */
	size_t (*extent_fn)(void);
	struct epoch_options opts;

	/* Epoch thread.  The one batch in flight: filled by epoch_pause,
	 * consumed by epoch_writeback. */
	struct epoch_batch batch;
	struct epoch_batch *inflight;	/* between epoch_on_quiescent and _reopened */
	unsigned char *slots;		/* capacity pages, reserved (set at open;
					 * their contents: epoch thread) */
	uint8_t *heat;			/* per heap page: write-backs it stays hot */

	/* Epoch thread.  Attempts carried over in a row (not published;
	 * persist.h): the pool's working copies at VER_d+1 wait for the next
	 * publication. */
	unsigned carried;
	/* The next pause is awaited (epoch_note_awaited, from
	 * epoch_on_quiescent). */
	bool awaited;
	/* The pages of the last attempt, when it was written in place and put
	 * back unpublished (persist.h): the next batch lists them too.  merge
	 * is where the two lists are joined (then swapped with the batch's). */
	uint64_t *redo, *merge;
	size_t nredo;

	/* Epoch thread.  Slot memory: [0, slots_resident) pages have been
	 * used and stay faulted in; recent_max / low_epochs decide when to
	 * give back. */
	size_t slots_resident;
	size_t recent_max;
	unsigned low_epochs;

	/* Epoch thread (populate's first value set at open).  Pool pages [0,
	 * populated) have both copies allocated and mapped (populate_pool);
	 * populate is cleared when the NVM kind gains nothing from it or the
	 * kernel refuses. */
	size_t populated;
	bool populate;

	/* Written by the epoch thread; read by epoch_get_counters on any
	 * thread (the statistics report): a count momentarily stale. */
	struct epoch_counters counters;
	uint64_t started_ns;		/* for the epoch log's clock: set at open */
	/* Epoch thread: the pool's device counters at the previous epoch log
	 * line. */
	uint64_t logged_flushes, logged_device_bytes;
	/* Atomic: set by the epoch thread, read by the runtime's exit. */
	atomic_bool final_done;
};

/* ---- the write-back's view of each page (persist_source) ---- */

static const void *writeback_begin(void *ctx, size_t k, uint64_t page)
{
	struct epoch_pipeline *ep = ctx;
	uint32_t s = ep->batch.slot[k];
	if (s == EPOCH_LIVE)
		return ep->heap + page * ep->ps;
	PMT_ASSERT(s < ep->batch.nslots);
	return ep->slots + (size_t)s * ep->ps;
}

static void writeback_end(void *ctx, size_t k, size_t lines)
{
	struct epoch_pipeline *ep = ctx;
	ep->batch.changed[k] = lines != 0;
	/* Between batches of pages: the progress, and the epoch thread's
	 * tick (the statistics file keeps its period through a write-back
	 * of seconds).  A clock read per batch, not per page or line. */
	if ((k + 1) % EPOCH_PROGRESS_PAGES == 0) {
		ep->counters.writeback_pages_done = k + 1;
		quiesce_tick_now();
	}
}

/* ---- set-up ---- */

static void *reserve(size_t len, const char *what, size_t pages)
{
	void *p = prim_map_any(len);
	if (p == NULL)
		err_set_errno(errno, "cannot reserve the %s for %zu pages", what, pages);
	return p;
}

static void unmap_arrays(struct epoch_pipeline *ep)
{
	size_t cap = ep->capacity;
	if (ep->batch.pages != NULL)
		prim_unmap(ep->batch.pages, cap * sizeof(uint64_t));
	if (ep->batch.slot != NULL)
		prim_unmap(ep->batch.slot, cap * sizeof(uint32_t));
	if (ep->batch.written != NULL)
		prim_unmap(ep->batch.written, cap);
	if (ep->batch.changed != NULL)
		prim_unmap(ep->batch.changed, cap);
	if (ep->heat != NULL)
		prim_unmap(ep->heat, cap);
	if (ep->redo != NULL)
		prim_unmap(ep->redo, cap * sizeof(uint64_t));
	if (ep->merge != NULL)
		prim_unmap(ep->merge, cap * sizeof(uint64_t));
	if (ep->slots != NULL)
		prim_unmap(ep->slots, cap * ep->ps);
	prim_unmap(ep, sizeof(*ep));
}

int epoch_pipeline_open(struct epoch_pipeline **out, struct pool *pool, struct tracker *t,
			void *heap, size_t (*extent_fn)(void), const struct epoch_options *o)
{
	*out = NULL;
	struct epoch_pipeline *ep = prim_map_any(sizeof(*ep));
	if (ep == NULL) {
		err_set_errno(errno, "cannot allocate the epoch pipeline");
		return -1;
	}
	ep->pool = pool;
	ep->tracker = t;
	ep->heap = heap;
	ep->ps = pool->page_size;
	ep->capacity = (size_t)pool->npages;
	ep->extent_fn = extent_fn;
	if (o != NULL)
		ep->opts = *o;
	ep->started_ns = prim_now_ns();
	/* Address space only (MAP_NORESERVE): memory is used as pages are. */
	size_t cap = ep->capacity;
	if ((ep->batch.pages = reserve(cap * sizeof(uint64_t), "dirty-page list", cap)) == NULL ||
	    (ep->batch.slot = reserve(cap * sizeof(uint32_t), "slot index", cap)) == NULL ||
	    (ep->batch.written = reserve(cap, "written-page flags", cap)) == NULL ||
	    (ep->batch.changed = reserve(cap, "changed-page flags", cap)) == NULL ||
	    (ep->heat = reserve(cap, "hot-page counters", cap)) == NULL ||
	    (ep->redo = reserve(cap * sizeof(uint64_t), "redo list", cap)) == NULL ||
	    (ep->merge = reserve(cap * sizeof(uint64_t), "redo merge list", cap)) == NULL ||
	    (ep->slots = reserve(cap * ep->ps, "pause copy slots", cap)) == NULL) {
		unmap_arrays(ep);
		return -1;
	}
	/* A huge page would make the first copy of one page zero 2 MiB. */
	prim_no_huge_pages(ep->slots, cap * ep->ps);
	/* Only for memory-like pools (tmpfs or DAX under libpmem): on an
	 * ordinary file, populating for write would dirty page-cache pages
	 * that msync then writes whether the epoch changed them or not. */
	ep->populate = nvm_is_memory_like(pool->nvm);
	*out = ep;
	return 0;
}

void epoch_pipeline_close(struct epoch_pipeline *ep)
{
	if (ep == NULL)
		return;
	unmap_arrays(ep);
}

void epoch_pipeline_abandon(struct epoch_pipeline *ep)
{
	/* The fork child writes nothing to the pool: the parent persists
	 * (or carries over) the batch in flight. */
	epoch_pipeline_close(ep);
}

/* ---- the two halves ---- */

/* Copy batch pages into slots now, while paused: every page when all; else
 * first those likely to be written the moment the gate reopens -- hot pages
 * (written during a recent write-back) and the last EPOCH_RUN_TAIL pages of
 * each run of dirty pages longer than one (where a thread filling memory in
 * order stood, and the pages a tracker opened ahead of it) -- then, in a
 * retry (others), the rest, up to budget pages in all.  Pages adjacent in
 * the heap and in the slots are copied with one memcpy. */
static void copy_in_pause(struct epoch_pipeline *ep, struct epoch_batch *b, bool all,
			  bool others, size_t budget)
{
	const size_t ps = ep->ps;
	uint32_t used = 0;
	for (size_t s = 0; s < b->n;) {
		size_t e = s + 1;	/* the run of consecutive pages [s, e) */
		while (e < b->n && b->pages[e] == b->pages[e - 1] + 1)
			e++;
		size_t tail = e - s > 1 ? (e - s < EPOCH_RUN_TAIL ? s : e - EPOCH_RUN_TAIL) : e;
		for (size_t k = s; k < e; k++)
			b->slot[k] = all || (used < budget && (k >= tail || ep->heat[b->pages[k]] != 0))
					     ? used++
					     : EPOCH_LIVE;
		s = e;
	}
	for (size_t k = 0; others && k < b->n && used < budget; k++)
		if (b->slot[k] == EPOCH_LIVE)
			b->slot[k] = used++;
	size_t run_k = 0, run_len = 0;	/* pages[run_k..] -> slots[slot[run_k]..] */
	for (size_t k = 0; k <= b->n; k++) {
		if (k < b->n && b->slot[k] == EPOCH_LIVE)
			continue;
		if (k < b->n && run_len > 0 && b->pages[k] == b->pages[run_k] + run_len &&
		    b->slot[k] == b->slot[run_k] + run_len) {
			run_len++;
			continue;
		}
		if (run_len > 0)
			memcpy(ep->slots + (size_t)b->slot[run_k] * ps,
			       ep->heap + b->pages[run_k] * ps, run_len * ps);
		run_k = k;
		run_len = 1;
	}
	b->nslots = used;
}

/* Pages the tracker reported without seeing a write to them (the mprotect
 * backend's hot pages, kept writable) whose bytes are still those of their
 * durable copy have nothing to persist: they leave the batch before anything
 * is copied, chosen or compared -- under output commit most hot pages, most
 * epochs.  Compared inside the pause, so against the quiescent point's bytes
 * (a thread outside any FASE may write one later: the tracker reports a hot
 * page again at the next collection).  Not while an attempt is carried over:
 * a page it chose has a working copy at VER_d+1, which the next publication
 * makes valid, so it must be written again. */
static void drop_unchanged(struct epoch_pipeline *ep, struct epoch_batch *b)
{
	if (ep->carried != 0 ||
	    tracker_written_unknown(ep->tracker, b->pages, b->n, b->written) == 0)
		return;
	size_t kept = 0;
	for (size_t k = 0; k < b->n; k++) {
		uint64_t i = b->pages[k];
		if (b->written[k]) {
			int c = pool_valid_copy(ep->pool, i);
			if (c >= 0 && memcmp(ep->heap + i * ep->ps, pool_copy(ep->pool, i, c), ep->ps) == 0) {
				ep->counters.pages_unchanged++;
				continue;
			}
		}
		b->pages[kept++] = i;
	}
	b->n = kept;
}

/* The batch and the redo list, both sorted: their union, sorted. */
static void add_redo(struct epoch_pipeline *ep, struct epoch_batch *b)
{
	size_t i = 0, j = 0, k = 0;
	while (i < b->n || j < ep->nredo) {
		uint64_t x = i < b->n ? b->pages[i] : UINT64_MAX;
		uint64_t y = j < ep->nredo ? ep->redo[j] : UINT64_MAX;
		ep->merge[k++] = x < y ? x : y;
		i += x <= y;
		j += y <= x;
	}
	PMT_ASSERT(k <= ep->capacity);
	uint64_t *t = b->pages;
	b->pages = ep->merge;
	ep->merge = t;
	b->n = k;
	ep->nredo = 0;
}

struct epoch_batch *epoch_pause(struct epoch_pipeline *ep, bool final)
{
	struct epoch_batch *b = &ep->batch;
	uint64_t t0 = prim_now_ns();
	b->final = final;
	b->nslots = 0;
	/* Nothing above the heap's high-water mark is ever written, and
	 * the scan's cost grows with the range scanned, used or not (the
	 * "Figures behind the design" in docs/benchmarks.md). */
	if (ep->extent_fn != NULL)
		tracker_set_extent(ep->tracker, ep->extent_fn());
	b->n = tracker_collect_dirty(ep->tracker, b->pages, ep->capacity);
	PMT_ASSERT(b->n <= ep->capacity);
	for (size_t k = 1; k < b->n; k++)
		PMT_ASSERT(b->pages[k - 1] < b->pages[k]);
	PMT_ASSERT(b->n == 0 || b->pages[b->n - 1] < ep->capacity);
	if (ep->nredo != 0)
		add_redo(ep, b);
	drop_unchanged(ep, b);
	if (b->n != 0) {
		bool all = ep->opts.copy_in_pause || ep->carried >= EPOCH_CARRY_MAX;
		size_t first = ep->opts.copy_budget != 0 ? ep->opts.copy_budget : EPOCH_COPY_BUDGET;
		size_t budget = first << (ep->carried < 8 ? ep->carried : 8);
		/* An awaited epoch carried over would make its waiters (held
		 * replies, a sync) wait for a second pause and write-back:
		 * far more than copying the batch, within the largest
		 * budget. */
		if (ep->awaited)
			budget = first * EPOCH_COPY_BUDGET_GROWTH;
		if (budget > first * EPOCH_COPY_BUDGET_GROWTH)
			budget = first * EPOCH_COPY_BUDGET_GROWTH;
		/* A retry's batch is what the program wrote during the last
		 * write-back: recent, so all of it is likely to be written
		 * again, and few. */
		copy_in_pause(ep, b, all, ep->carried > 0 || ep->awaited, budget);
		if (ep->awaited)
			ep->counters.awaited_epochs++;
		if (all)
			ep->counters.paused_epochs++;
	}
	ep->awaited = false;
	b->collect_ns = prim_now_ns() - t0;
	return b;
}

void epoch_note_awaited(struct epoch_pipeline *ep)
{
	ep->awaited = true;
}

/* Keep the slots a busy epoch faulted in; give back the top three quarters
 * only once EPOCH_SHRINK_EPOCHS epochs in a row used under a quarter. */
static void account_slots(struct epoch_pipeline *ep, size_t used)
{
	PMT_ASSERT(used <= ep->capacity);
	if (used > ep->slots_resident)
		ep->slots_resident = used;
	if (used > ep->recent_max)
		ep->recent_max = used;
	if (used * 4 >= ep->slots_resident) {
		ep->low_epochs = 0;
		ep->recent_max = used;
	} else if (++ep->low_epochs >= EPOCH_SHRINK_EPOCHS) {
		size_t keep = ep->recent_max * 2;
		if (keep < ep->slots_resident) {
			prim_discard(ep->slots + keep * ep->ps, (ep->slots_resident - keep) * ep->ps);
			ep->slots_resident = keep;
			ep->counters.slot_shrinks++;
		}
		ep->low_epochs = 0;
		ep->recent_max = 0;
	}
	/* Every slot this epoch used stays resident (no discard below it). */
	PMT_ASSERT(used <= ep->slots_resident && ep->slots_resident <= ep->capacity);
	ep->counters.slot_bytes_resident = (uint64_t)ep->slots_resident * ep->ps;
}

/* The write-back's first store to a pool page (each copy of each heap page)
 * would take a page fault that allocates and zeroes it: on a pool on tmpfs
 * that was most of the write-back of a growing heap.  Instead, once per
 * EPOCH_POPULATE_CHUNK pages of heap growth, populate both copies of the
 * pages up to the heap's high-water mark with one madvise, on the epoch
 * thread with the gate open. */
static void populate_pool(struct epoch_pipeline *ep, const struct epoch_batch *b)
{
	if (!ep->populate)
		return;
	size_t want = ep->extent_fn != NULL ? (ep->extent_fn() + ep->ps - 1) / ep->ps : 0;
	if (b->n != 0 && b->pages[b->n - 1] + 1 > want)
		want = (size_t)b->pages[b->n - 1] + 1;
	if (want <= ep->populated)
		return;
	want = (want + EPOCH_POPULATE_CHUNK - 1) / EPOCH_POPULATE_CHUNK * EPOCH_POPULATE_CHUNK;
	if (want > ep->capacity)
		want = ep->capacity;
	/* In steps of EPOCH_POPULATE_STEP pages: each holds the process's
	 * mmap lock, which stalls the program's own page faults and
	 * mprotects meanwhile.  Each copy's pages are one range (a plane, or
	 * both copies side by side: then one madvise covers both). */
	const bool side_by_side = ep->pool->copy_step == ep->ps;
	while (ep->populated < want) {
		size_t n = want - ep->populated;
		if (n > EPOCH_POPULATE_STEP)
			n = EPOCH_POPULATE_STEP;
		for (int c = 0; c < (side_by_side ? 1 : 2); c++) {
			size_t len = (side_by_side ? 2 : 1) * n * ep->ps;
			if (prim_populate_write(pool_copy(ep->pool, ep->populated, c), len) != 0) {
				/* EINVAL: a kernel before 5.14.  Anything else
				 * (the file system full, say) surfaces, as
				 * before, when the write-back stores there.
				 * Either way: stop. */
				ep->populate = false;
				return;
			}
			ep->counters.pool_bytes_populated += len;
		}
		ep->populated += n;
	}
}

/* After the live pages were read: which of them were written meanwhile
 * (conflicts: never published from that read), and which pages are hot. */
static size_t count_conflicts(struct epoch_pipeline *ep, struct epoch_batch *b)
{
	int known = tracker_written_since(ep->tracker, b->pages, b->n, b->written);
	size_t conflicts = 0;
	for (size_t k = 0; k < b->n; k++) {
		uint8_t *h = &ep->heat[b->pages[k]];
		if (b->written[k]) {
			if (b->slot[k] == EPOCH_LIVE)
				conflicts++;
			if (known == 0)
				*h = EPOCH_HOT_EPOCHS;
		} else if (*h != 0) {
			(*h)--;
		}
	}
	return conflicts;
}

bool epoch_writeback(struct epoch_pipeline *ep, struct epoch_batch *b, struct epoch_result *res)
{
	uint64_t t0 = prim_now_ns();
	struct pool *p = ep->pool;
	struct epoch_result r = { .epoch = *p->ver_d, .collect_ns = b->collect_ns };
	bool durable;
	if (b->n == 0 && ep->carried == 0) {
		ep->counters.empty_epochs++;
		durable = true;
	} else {
		/* With an attempt pending and nothing dirty since, its copies
		 * are the image of this quiescent point: publish them alone. */
		struct persist_stats st = { 0 };
		struct persist_source src = { writeback_begin, writeback_end, ep };
		struct persist_attempt pe;
		populate_pool(ep, b);
		ep->counters.writeback_pages_done = 0;
		ep->counters.writeback_pages = b->n;
		persist_attempt_begin(&pe, p, b->pages, b->n);
		persist_attempt_write(&pe, &src, b->pages, b->n);
		ep->counters.writeback_pages_done = b->n;
		tracker_note_changed(ep->tracker, b->pages, b->n, b->changed);
		/* Asked even when every page was copied: which pages are hot
		 * follows the writes (not in the paused mode, which has no
		 * use for it). */
		size_t conflicts = b->n != 0 && !ep->opts.copy_in_pause ? count_conflicts(ep, b) : 0;
		/* An I/O error (nvm.h) is never published either; the runtime
		 * reads it from the pool's nvm and says so. */
		durable = persist_attempt_end(&pe, conflicts == 0, &st) == 0 && conflicts == 0 &&
			  !pe.reverted;
		ep->counters.writeback_pages = 0;
		ep->counters.writeback_pages_done = 0;
		if (pe.reverted) {
			memcpy(ep->redo, b->pages, b->n * sizeof(uint64_t));
			ep->nredo = b->n;
		}
		if (durable) {
			ep->carried = 0;
			ep->counters.epochs++;
		} else if (conflicts != 0 || pe.reverted) {
			/* Its working copies wait at VER_d+1 (drop_unchanged). */
			ep->carried++;
			ep->counters.carried_epochs++;
			ep->counters.conflict_pages += conflicts;
		}
		ep->counters.pages += b->n;	/* as the epoch log counts them */
		persist_stats_add(&ep->counters.persist, &st);
		r.epoch = *p->ver_d;
		r.conflicts = conflicts;
		r.pages = b->n;
		r.bytes_written = st.bytes_written;
	}
	r.durable = durable;
	size_t used = b->nslots;
	ep->counters.pages_saved += used;
	account_slots(ep, used);
	r.pages_saved = used;
	r.persist_ns = b->collect_ns + (prim_now_ns() - t0);
	ep->counters.persist_ns += r.persist_ns;
	ep->counters.stage_ns += b->collect_ns;
	/* Only now, durable, may shutdown mark the pool clean. */
	if (b->final && durable)
		atomic_store(&ep->final_done, true);
	b->n = 0;
	if (res != NULL)
		*res = r;
	return durable;
}

bool epoch_final_done(const struct epoch_pipeline *ep)
{
	return ep != NULL && atomic_load(&ep->final_done);
}

void epoch_get_counters(const struct epoch_pipeline *ep, struct epoch_counters *out)
{
	/* Read at a quiescent point or at exit; a counter being updated by the
	 * epoch thread only makes a statistic momentarily stale. */
	if (ep == NULL)
		memset(out, 0, sizeof(*out));
	else
		*out = ep->counters;
}

/* ---- the procedures handed to quiesce ---- */

void epoch_on_quiescent(void *arg)
{
	struct epoch_pipeline *ep = arg;
	if (quiesce_epoch_awaited())
		epoch_note_awaited(ep);
	ep->inflight = epoch_pause(ep, quiesce_in_final_epoch());
}

bool epoch_on_reopened(void *arg)
{
	struct epoch_pipeline *ep = arg;
	struct epoch_batch *b = ep->inflight;
	ep->inflight = NULL;
	if (b == NULL)
		return true;
	struct epoch_result r;
	bool durable = epoch_writeback(ep, b, &r);
	struct epoch_record rec = {
		.t_ns = prim_now_ns() - ep->started_ns,
		.epoch = r.epoch,
		.pause_ns = quiesce_last_pause_ns(),
		.pages = r.pages,
		.bytes_dirty = r.pages * ep->ps,
		.bytes_written = r.bytes_written,
		.stage_ns = r.collect_ns,
		.persist_ns = r.persist_ns,
		.period_ns = quiesce_last_period_ns(),
		.pages_saved = r.pages_saved,
		.conflicts = r.conflicts,
		.durable = durable,
		.device_flushes = ep->pool->nvm->stats.device_flushes - ep->logged_flushes,
		.device_bytes = ep->pool->nvm->stats.device_bytes - ep->logged_device_bytes,
	};
	ep->logged_flushes = ep->pool->nvm->stats.device_flushes;
	ep->logged_device_bytes = ep->pool->nvm->stats.device_bytes;
	epoch_log_record(&rec);
	return durable;
}
