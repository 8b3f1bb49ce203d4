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

struct epoch_pipeline {
	struct pool *pool;
	struct tracker *tracker;
	unsigned char *heap;
	size_t ps;
	size_t capacity;		/* pages: the whole heap */
	size_t (*extent_fn)(void);
	struct epoch_options opts;

	/* The one batch in flight: filled by epoch_pause, consumed by
	 * epoch_writeback on the same (epoch) thread; the write faults of
	 * application threads reach it through `guarded` meanwhile. */
	struct epoch_batch batch;
	struct epoch_batch *inflight;	/* between epoch_on_quiescent and _reopened */
	unsigned char *slots;		/* capacity pages, reserved */

	/* Slot memory: [0, slots_resident) pages have been used and stay
	 * faulted in; recent_max / low_epochs decide when to give back. */
	size_t slots_resident;
	size_t recent_max;
	unsigned low_epochs;

	/* Pool pages [0, populated) have both copies allocated and mapped
	 * (populate_pool); populate is cleared when the NVM kind gains
	 * nothing from it or the kernel refuses. */
	size_t populated;
	bool populate;

	struct epoch_counters counters;
	uint64_t started_ns;		/* for the epoch log's clock */
	atomic_bool final_done;
};

/* The pipeline whose batch is guarded right now (write faults save pages of
 * it), and the number of cow hooks running: the epoch thread waits for them
 * before it reuses the batch's arrays.  Process-wide, like the signal
 * handler that reads them. */
static _Atomic(struct epoch_pipeline *) guarded;
static atomic_int hooks_inside;

static void wait_for_hooks(void)
{
	while (atomic_load(&hooks_inside) != 0)
		prim_yield();
}

/* Spin briefly, then give the processor to whoever we wait for (on a
 * loaded machine it may be the epoch thread itself). */
static void wait_step(unsigned *spins)
{
	if (++*spins < 256)
		prim_cpu_relax();
	else
		prim_yield();
}

/* Copy-before-write of batch page k.  Async-signal-safe: atomics, memcpy,
 * sched_yield. */
static void save_page(struct epoch_pipeline *ep, struct epoch_batch *b, size_t k)
{
	unsigned spins = 0;
	for (;;) {
		uint8_t s = __atomic_load_n(&b->state[k], __ATOMIC_ACQUIRE);
		if (s == EP_SAVED || s == EP_DONE)
			return;
		if (s == EP_PENDING) {
			if (!__atomic_compare_exchange_n(&b->state[k], &s, EP_SAVING, false, __ATOMIC_ACQ_REL,
							 __ATOMIC_ACQUIRE))
				continue;
			uint32_t slot = __atomic_fetch_add(&b->nslots, 1, __ATOMIC_RELAXED);
			/* Each batch page is saved at most once (the CAS above). */
			PMT_ASSERT(slot < b->n);
			memcpy(ep->slots + (size_t)slot * ep->ps, ep->heap + b->pages[k] * ep->ps,
			       ep->ps);
			b->slot[k] = slot;
			__atomic_store_n(&b->state[k], EP_SAVED, __ATOMIC_RELEASE);
			return;
		}
		/* WRITING (the write-back reads the live page: one page's NVM
		 * write) or SAVING on another thread. */
		wait_step(&spins);
	}
}

/* tracker_cow_hook: pages of [lo, hi) are about to become writable. */
static void save_range(uintptr_t lo, uintptr_t hi)
{
	atomic_fetch_add(&hooks_inside, 1);
	struct epoch_pipeline *ep = atomic_load(&guarded);
	if (ep != NULL) {
		struct epoch_batch *b = &ep->batch;
		uintptr_t base = (uintptr_t)ep->heap;
		uintptr_t end = base + ep->capacity * ep->ps;
		if (lo < base)
			lo = base;
		if (hi > end)
			hi = end;
		if (lo < hi) {
			uint64_t first = (lo - base) / ep->ps;
			uint64_t last = (hi - base + ep->ps - 1) / ep->ps;	/* exclusive */
			/* The batch is ascending: binary search the first page. */
			size_t a = 0, z = b->n;
			while (a < z) {
				size_t m = a + (z - a) / 2;
				if (b->pages[m] < first)
					a = m + 1;
				else
					z = m;
			}
			for (size_t k = a; k < b->n && b->pages[k] < last; k++)
				save_page(ep, b, k);
		}
	}
	atomic_fetch_sub(&hooks_inside, 1);
}

/* ---- the write-back's view of each page (persist_source) ---- */

static const void *writeback_begin(void *ctx, size_t k, uint64_t page)
{
	struct epoch_pipeline *ep = ctx;
	struct epoch_batch *b = &ep->batch;
	if (b->guarded) {
		uint8_t s = EP_PENDING;
		if (__atomic_compare_exchange_n(&b->state[k], &s, EP_WRITING, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return ep->heap + page * ep->ps;
		unsigned spins = 0;
		while (__atomic_load_n(&b->state[k], __ATOMIC_ACQUIRE) == EP_SAVING)
			wait_step(&spins);
	}
	PMT_ASSERT(__atomic_load_n(&b->state[k], __ATOMIC_ACQUIRE) == EP_SAVED);
	PMT_ASSERT(b->slot[k] < __atomic_load_n(&b->nslots, __ATOMIC_RELAXED));
	return ep->slots + (size_t)b->slot[k] * ep->ps;
}

static bool writeback_summed(void *ctx, size_t k, uint64_t page)
{
	(void)page;
	return ((struct epoch_pipeline *)ctx)->batch.summed[k] != 0;
}

static void writeback_end(void *ctx, size_t k)
{
	struct epoch_pipeline *ep = ctx;
	__atomic_store_n(&ep->batch.state[k], EP_DONE, __ATOMIC_RELEASE);
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
	if (ep->batch.state != NULL)
		prim_unmap((void *)ep->batch.state, cap);
	if (ep->batch.slot != NULL)
		prim_unmap(ep->batch.slot, cap * sizeof(uint32_t));
	if (ep->batch.summed != NULL)
		prim_unmap(ep->batch.summed, cap);
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
	ep->batch.pages = reserve(ep->capacity * sizeof(uint64_t), "dirty-page list", ep->capacity);
	ep->batch.state = ep->batch.pages == NULL ? NULL
			  : reserve(ep->capacity, "write-back page states", ep->capacity);
	ep->batch.slot = ep->batch.state == NULL ? NULL
			 : reserve(ep->capacity * sizeof(uint32_t), "slot index", ep->capacity);
	ep->batch.summed = ep->batch.slot == NULL ? NULL
			   : reserve(ep->capacity, "checksum flags", ep->capacity);
	ep->slots = ep->batch.summed == NULL ? NULL
		    : reserve(ep->capacity * ep->ps, "copy-before-write slots", ep->capacity);
	if (ep->slots == NULL) {
		unmap_arrays(ep);
		return -1;
	}
	/* A huge page would make the first save of one page zero 2 MiB. */
	(void)madvise(ep->slots, ep->capacity * ep->ps, MADV_NOHUGEPAGE);
	/* Only for memory-like pools (tmpfs or DAX under libpmem): on an
	 * ordinary file, populating for write would dirty page-cache pages
	 * that msync then writes whether the epoch changed them or not. */
	ep->populate = strcmp(pool->nvm->ops->name, "pmem") == 0;
	tracker_set_cow_hook(save_range);
	*out = ep;
	return 0;
}

void epoch_pipeline_close(struct epoch_pipeline *ep)
{
	if (ep == NULL)
		return;
	if (atomic_load(&guarded) == ep) {
		atomic_store(&guarded, NULL);
		wait_for_hooks();
	}
	tracker_set_cow_hook(NULL);
	unmap_arrays(ep);
}

void epoch_pipeline_abandon(struct epoch_pipeline *ep)
{
	/* The fork child has one thread: no hook can be running. */
	atomic_store(&guarded, NULL);
	epoch_pipeline_close(ep);
}

/* ---- the two halves ---- */

/* Without a guard: copy the batch into slots 0..n-1 now, while paused. */
static void copy_batch(struct epoch_pipeline *ep, struct epoch_batch *b)
{
	const size_t ps = ep->ps;
	for (size_t k = 0; k < b->n;) {
		size_t j = k + 1;
		while (j < b->n && b->pages[j] == b->pages[j - 1] + 1)
			j++;
		memcpy(ep->slots + k * ps, ep->heap + b->pages[k] * ps, (j - k) * ps);
		for (size_t i = k; i < j; i++) {
			b->slot[i] = (uint32_t)i;
			__atomic_store_n(&b->state[i], EP_SAVED, __ATOMIC_RELAXED);
		}
		k = j;
	}
	__atomic_store_n(&b->nslots, (uint32_t)b->n, __ATOMIC_RELAXED);
}

struct epoch_batch *epoch_pause(struct epoch_pipeline *ep, bool final)
{
	struct epoch_batch *b = &ep->batch;
	uint64_t t0 = prim_now_ns();
	b->final = final;
	b->guarded = false;
	__atomic_store_n(&b->nslots, 0, __ATOMIC_RELAXED);
	/* Nothing above the heap's high-water mark is ever written, and
	 * scanning a mostly unused pool costs ~1 ms per GiB with uffd. */
	if (ep->extent_fn != NULL)
		tracker_set_extent(ep->tracker, ep->extent_fn());
	b->n = tracker_collect_dirty(ep->tracker, b->pages, ep->capacity);
	PMT_ASSERT(b->n <= ep->capacity);
	/* save_range binary-searches the batch. */
	for (size_t k = 1; k < b->n; k++)
		PMT_ASSERT(b->pages[k - 1] < b->pages[k]);
	PMT_ASSERT(b->n == 0 || b->pages[b->n - 1] < ep->capacity);
	if (b->n != 0) {
		/* Which pages get a checksum is decided now, at the quiescent
		 * point whose image the write-back persists: the heap may move
		 * its metadata once the gate reopens. */
		struct pool_range sr[POOL_SUMMED_MAX];
		size_t nsr = pool_summed_ranges(ep->pool, sr);
		for (size_t k = 0; k < b->n; k++) {
			__atomic_store_n(&b->state[k], EP_PENDING, __ATOMIC_RELAXED);
			b->summed[k] = pool_in_ranges(sr, nsr, b->pages[k]);
		}
		if (!ep->opts.copy_in_pause) {
			/* Published first: a fault on a page the guard just
			 * protected must find the batch. */
			atomic_store(&guarded, ep);
			if (tracker_protect_batch(ep->tracker, b->pages, b->n) == 0) {
				b->guarded = true;
			} else {
				atomic_store(&guarded, NULL);
				wait_for_hooks();
			}
		}
		if (!b->guarded) {
			copy_batch(ep, b);
			ep->counters.unguarded_epochs++;
		}
	}
	b->collect_ns = prim_now_ns() - t0;
	return b;
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
	/* Copies 0 and 1 of a page are adjacent: one contiguous range. */
	/* In steps of EPOCH_POPULATE_STEP pages: each holds the process's
	 * mmap lock, which stalls the program's own page faults and
	 * mprotects meanwhile. */
	while (ep->populated < want) {
		size_t n = want - ep->populated;
		if (n > EPOCH_POPULATE_STEP)
			n = EPOCH_POPULATE_STEP;
		size_t len = 2 * n * ep->ps;
		if (prim_populate_write(pool_copy(ep->pool, ep->populated, 0), len) != 0) {
			/* EINVAL: a kernel before 5.14.  Anything else (the
			 * file system full, say) surfaces, as before, when
			 * the write-back stores there.  Either way: stop. */
			ep->populate = false;
			return;
		}
		ep->counters.pool_bytes_populated += len;
		ep->populated += n;
	}
}

void epoch_writeback(struct epoch_pipeline *ep, struct epoch_batch *b, struct epoch_result *res)
{
	uint64_t t0 = prim_now_ns();
	struct pool *p = ep->pool;
	struct epoch_result r = { .epoch = *p->ver_d, .collect_ns = b->collect_ns };
	if (b->n == 0) {
		ep->counters.empty_epochs++;
	} else {
		struct persist_stats st = { 0 };
		struct persist_source src = { writeback_begin, writeback_end, ep, writeback_summed };
		populate_pool(ep, b);
		epoch_persist_from(p, &src, b->pages, b->n, &st);
		ep->counters.epochs++;
		ep->counters.pages += st.pages;
		ep->counters.lines_written += st.lines_written;
		ep->counters.bytes_written += st.bytes_written;
		ep->counters.bytes_compared += st.bytes_compared;
		ep->counters.fences += st.fences;
		r.epoch = *p->ver_d;
		r.pages = st.pages;
		r.bytes_written = st.bytes_written;
	}
	if (b->guarded) {
		/* Every page is DONE: writes need no saving any more.  No hook
		 * may still look at the arrays when the next pause refills
		 * them. */
		atomic_store(&guarded, NULL);
		wait_for_hooks();
		tracker_release_batch(ep->tracker);
	}
	size_t used = __atomic_load_n(&b->nslots, __ATOMIC_RELAXED);
	ep->counters.pages_saved += used;
	account_slots(ep, used);
	r.pages_saved = used;
	r.persist_ns = b->collect_ns + (prim_now_ns() - t0);
	ep->counters.persist_ns += r.persist_ns;
	ep->counters.stage_ns += b->collect_ns;
	/* Only now, durable, may shutdown mark the pool clean. */
	if (b->final)
		atomic_store(&ep->final_done, true);
	b->n = 0;
	if (res != NULL)
		*res = r;
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
	ep->inflight = epoch_pause(ep, quiesce_in_final_epoch());
}

void epoch_on_reopened(void *arg)
{
	struct epoch_pipeline *ep = arg;
	struct epoch_batch *b = ep->inflight;
	ep->inflight = NULL;
	if (b == NULL)
		return;
	struct epoch_result r;
	epoch_writeback(ep, b, &r);
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
	};
	epoch_log_record(&rec);
}
