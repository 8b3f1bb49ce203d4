/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * epoch -- the epoch pipeline: from a quiescent point to a durable image.
 *
 * Owns: the batch an epoch carries from the pause to the write-back, the
 * pages copied inside the pause, which pages are hot, carried-over attempts,
 * and the counters of persisted work.
 *
 * One epoch, in two halves (quiesce_start_split):
 *   epoch_pause      at the quiescent point, gate closed: collect the dirty
 *                    pages and re-arm tracking (one tracker call), and copy
 *                    the batch's hot pages (written during a recent
 *                    write-back) into slots, at most a budget of them.
 *   epoch_writeback  on the epoch thread once the gate is open again:
 *                    persist each page from its slot or else from the live
 *                    shadow page, then ask the tracker, read-only, which
 *                    batch pages were written since the pause
 *                    (tracker_written_since).  A page read live and written
 *                    meanwhile may hold a mix of two states: then the
 *                    attempt is not published but carried over (its working
 *                    copies stay at VER_d+1, persist.h) -- the next pause
 *                    collects every page written since, including those, so
 *                    the next attempt completes the same VER_d+1 with the
 *                    image of its own quiescent point.  Otherwise VER_d+1
 *                    is published: every page equal to the heap at the
 *                    quiescent point.
 * Nothing ever write-protects a live page for the write-back's sake: the
 * only faults the program takes are the tracker's own (none with uffd).
 *
 * Progress: pages written during a write-back become hot and are copied in
 * the next pauses (EPOCH_HOT_EPOCHS); each attempt carried over in a row
 * doubles the budget (EPOCH_COPY_BUDGET, up to 4 times), and after
 * EPOCH_CARRY_MAX of them the next pause copies the whole batch, which
 * cannot conflict.  A carried-over attempt is completed at once
 * (quiesce.h), shutdown's final epoch too; a retry copies every page of its
 * batch within the budget: it holds what the program wrote during the last
 * write-back, recent pages, and few.  So does an awaited pause (a sync or
 * output commit's held replies wait for it: epoch_note_awaited), with the
 * largest budget, so that its waiters do not wait for a retry too.
 * PMTHREADS_WRITEBACK=paused (copy_in_pause) always copies the whole batch.
 *
 * Memory: the dirty list, the per-page arrays and the slots are reserved
 * once for the whole heap (address space only).  Slots are handed out from
 * the bottom, so those in use are always the low ones; they stay faulted in
 * from epoch to epoch and are given back only after EPOCH_SHRINK_EPOCHS
 * epochs in a row used less than a quarter of them.
 *
 * Pool pages: on a pmem-kind pool (tmpfs or DAX) the write-back's first
 * store to a pool page faults to allocate it; the epoch thread populates
 * both copies of the heap's pages up to its high-water mark ahead of the
 * write-back instead, in chunks, outside the pause (populate_pool).
 */
#ifndef PMT_EPOCH_H
#define PMT_EPOCH_H

#include "persist/persist.h"
#include "persist/pool.h"
#include "track/tracker.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EPOCH_SHRINK_EPOCHS 64
/* Heap pages per step of pool population (both copies: 16 MiB of pool). */
#define EPOCH_POPULATE_CHUNK 2048
/* Heap pages per madvise of that population (both copies: 1 MiB). */
#define EPOCH_POPULATE_STEP 128

/* Pages copied inside a pause, at most (4 MiB of 4 KiB pages: a copy small
 * beside the pause itself, docs/benchmarks.md "Figures behind the design"); doubled for each attempt carried over in a row, up to
 * EPOCH_COPY_BUDGET_GROWTH times that. */
#define EPOCH_COPY_BUDGET 1024
/* The write-back's progress is recorded, and the epoch thread's tick
 * called (quiesce_tick_now), every this many pages: at least 64 x 4 KiB
 * compared, so the tick's clock read is lost in it. */
#define EPOCH_PROGRESS_PAGES 64
#define EPOCH_COPY_BUDGET_GROWTH 4	/* _MAX = 4 x the first */
/* After this many attempts in a row carried over, the next pause copies its
 * whole batch (and so publishes).  Retries start at once and their batches
 * shrink (each is what the program wrote during the previous write-back),
 * so this is the guarantee, seldom the way. */
#define EPOCH_CARRY_MAX 6
/* A page written during a write-back stays hot (copied in the pause when
 * dirty) for this many of its later write-backs without such a write. */
#define EPOCH_HOT_EPOCHS 8

/* The last pages of a run of dirty pages copied in the pause (where a
 * thread writing in order stands; the mprotect tracker opens up to 16 pages
 * ahead of it). */
#define EPOCH_RUN_TAIL 16

/* slot[] of a page read from the live heap. */
#define EPOCH_LIVE UINT32_MAX

/* What an epoch carries from epoch_pause to epoch_writeback. */
struct epoch_batch {
	uint64_t *pages;		/* dirty pages, ascending */
	size_t n;
	uint32_t *slot;			/* per page: its slot, or EPOCH_LIVE */
	uint8_t *written;		/* per page: written since the pause
					 * (tracker_written_since); in the
					 * pause, of unknown writes
					 * (drop_unchanged) */
	uint8_t *changed;		/* per page: the write-back rewrote
					 * some of its lines */
	uint32_t nslots;		/* slots used by this batch */
	bool final;			/* shutdown's final epoch */
	uint64_t collect_ns;		/* the pause's share: collect + copies */
};

/* X(kind, field, report key): base/stats_fields.h. */
#define EPOCH_COUNTERS_FIELDS(X) \
	X(count, epochs, "epochs_persisted") /* epochs published with at least one page */ \
	X(count, empty_epochs, "epochs_empty") /* quiescent points with nothing dirty */ \
	/* dirty pages written back (a page of a carried-over attempt counts \
	 * again in the attempt that rewrites it) */ \
	X(count, pages, "pages_persisted") \
	X(count, persist_ns, "persist_ns") /* collect + write-back, all epochs */ \
	X(count, stage_ns, "stage_ns") /* of which inside the pause */ \
	X(count, pages_saved, "pages_saved") /* copied into slots inside the pause */ \
	/* reported without a write seen (mprotect's hot pages) and found, \
	 * inside the pause, equal to their durable copy: left out */ \
	X(count, pages_unchanged, "pages_unchanged") \
	/* epochs that copied their whole batch inside the pause */ \
	X(count, paused_epochs, "paused_epochs") \
	/* pauses someone waited for (epoch_note_awaited): whole batch copied */ \
	X(count, awaited_epochs, "awaited_epochs") \
	/* write-backs not published: a page read live was written meanwhile */ \
	X(count, carried_epochs, "carried_epochs") \
	X(count, conflict_pages, "conflict_pages") /* such pages, in all */ \
	/* pool pages allocated ahead of the write-back (pmem kind only) */ \
	X(count, pool_bytes_populated, "pool_bytes_populated") \
	X(value, slot_bytes_resident, "slot_bytes_resident") /* slot memory currently faulted in */ \
	X(count, slot_shrinks, "slot_shrinks") /* times slot memory was given back */ \
	/* the write-back under way (0, 0: none): its pages, and how many of \
	 * them are written, updated every EPOCH_PROGRESS_PAGES pages -- what \
	 * the statistics file shows while one write-back lasts for seconds */ \
	X(value, writeback_pages, "writeback_pages") \
	X(value, writeback_pages_done, "writeback_pages_done")

struct epoch_counters {
	EPOCH_COUNTERS_FIELDS(STATS_DECLARE)
	struct persist_stats persist;	/* the write-backs', summed (persist.h) */
};

/* What one epoch did, for the epoch log. */
struct epoch_result {
	uint64_t epoch;			/* VER_d after it */
	bool durable;			/* false: carried over to the next epoch */
	uint64_t pages;
	uint64_t bytes_written;
	uint64_t pages_saved;		/* copied in the pause */
	uint64_t conflicts;		/* pages read live and written meanwhile */
	uint64_t collect_ns;		/* inside the pause */
	uint64_t persist_ns;		/* collect + write-back */
};

struct epoch_pipeline;

struct epoch_options {
	bool copy_in_pause;		/* copy every batch whole in the pause */
	unsigned copy_budget;		/* pages copied in a pause at first
					 * (doubling per retry up to 4 times
					 * that); 0: EPOCH_COPY_BUDGET */
};

/* Set up the pipeline over the heap [heap, heap + pool->npages pages),
 * tracked by t.  extent_fn, when not NULL, gives the heap's high-water mark
 * (collections look no higher).  Returns 0 or -1 with err_get() set. */
int epoch_pipeline_open(struct epoch_pipeline **out, struct pool *pool, struct tracker *t,
			void *heap, size_t (*extent_fn)(void), const struct epoch_options *o);
/* Release it (after the epoch thread stopped).  NULL is a no-op. */
void epoch_pipeline_close(struct epoch_pipeline *ep);
/* In a fork child: forget the batch in flight (the parent persists it)
 * without touching the pool, and free the pipeline. */
void epoch_pipeline_abandon(struct epoch_pipeline *ep);

/* The two halves (see above).  final: this is shutdown's final epoch.
 * epoch_pause returns the batch epoch_writeback must be given.
 * epoch_writeback returns true when the image of that quiescent point is
 * durable: published, or nothing was dirty and no attempt is pending. */
struct epoch_batch *epoch_pause(struct epoch_pipeline *ep, bool final);
/* Someone waits for the next epoch_pause's image to be durable: that pause
 * copies every page of its batch within EPOCH_COPY_BUDGET_GROWTH times the
 * first budget, so the attempt is not carried over (unless the batch is
 * larger).  epoch_on_quiescent calls it for quiesce_epoch_awaited(). */
void epoch_note_awaited(struct epoch_pipeline *ep);
bool epoch_writeback(struct epoch_pipeline *ep, struct epoch_batch *b,
		     struct epoch_result *res);

/* The same pair as quiesce procedures (arg: the pipeline):
 * epoch_on_quiescent runs epoch_pause (final when quiesce_in_final_epoch),
 * epoch_on_reopened the write-back, then writes the epoch log's line, and
 * returns what epoch_writeback did. */
void epoch_on_quiescent(void *arg);
bool epoch_on_reopened(void *arg);

/* True once a final batch (epoch_pause(ep, true)) is durable. */
bool epoch_final_done(const struct epoch_pipeline *ep);

void epoch_get_counters(const struct epoch_pipeline *ep, struct epoch_counters *out);

#endif
