/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * epoch -- the epoch pipeline: from a quiescent point to a durable image.
 *
 * Owns: the batch an epoch carries from the pause to the write-back, the
 * copy-before-write slots, and the counters of persisted work.
 *
 * One epoch, in two halves (quiesce_start_split):
 *   epoch_pause      at the quiescent point, gate closed: collect the dirty
 *                    pages and re-arm tracking (one tracker call), then
 *                    guard them (tracker_protect_batch) so that the next
 *                    write to any of them faults.  Nothing is copied: the
 *                    pause does not grow with the number of dirty pages.
 *   epoch_writeback  on the epoch thread once the gate is open again:
 *                    persist each page of the batch from the live shadow
 *                    page (epoch_persist_from), unless the program wrote it
 *                    in the meantime -- then from the copy its write fault
 *                    saved first (copy-before-write).  Then release the
 *                    guard.  Durable on return.
 * Per page a small state machine decides who reads the live page:
 *   PENDING -> WRITING (write-back reads the live page) -> DONE
 *   PENDING -> SAVING (a writer copies it to a slot) -> SAVED -> DONE
 * A writer that finds WRITING waits until DONE (one page's NVM write); the
 * write-back that finds SAVING waits until SAVED.  Either way the image
 * persisted is the page as it was at the quiescent point.
 *
 * When the tracker cannot guard a batch (or copy_in_pause is asked), the
 * pause copies every dirty page into the slots instead and the write-back
 * reads the slots: the previous, pause-bound pipeline, kept as the fallback
 * and as the baseline of bench_persist.
 *
 * Memory: the dirty list, the per-page state and the slots are reserved
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

enum epoch_page_state { EP_PENDING = 0, EP_WRITING, EP_SAVING, EP_SAVED, EP_DONE };

/* What an epoch carries from epoch_pause to epoch_writeback. */
struct epoch_batch {
	uint64_t *pages;		/* dirty pages, ascending */
	size_t n;
	uint8_t *state;			/* enum epoch_page_state, per page
					 * (accessed atomically) */
	uint32_t *slot;			/* per page: its slot once SAVED */
	uint8_t *summed;		/* per page: gets a checksum (the pool's
					 * summed(), asked in the pause) */
	uint32_t nslots;		/* slots handed out in this batch
					 * (accessed atomically) */
	bool guarded;			/* tracker_protect_batch succeeded */
	bool final;			/* shutdown's final epoch */
	uint64_t collect_ns;		/* the pause's share: collect + guard (or copy) */
};

struct epoch_counters {
	uint64_t epochs;		/* epochs that persisted at least one page */
	uint64_t empty_epochs;		/* quiescent points with nothing dirty */
	uint64_t pages;			/* dirty pages persisted */
	uint64_t lines_written;		/* 64-byte lines written to NVM */
	uint64_t bytes_written;
	uint64_t bytes_compared;	/* bytes diffed against the old copy */
	uint64_t fences;
	uint64_t persist_ns;		/* collect + write-back, all epochs */
	uint64_t stage_ns;		/* of which inside the pause */
	uint64_t pages_saved;		/* copied before a write (or in the pause) */
	uint64_t unguarded_epochs;	/* epochs that copied inside the pause */
	uint64_t slot_bytes_resident;	/* slot memory currently faulted in */
	uint64_t slot_shrinks;		/* times slot memory was given back */
	uint64_t pool_bytes_populated;	/* pool pages allocated ahead of the
					 * write-back (pmem kind only) */
};

/* What one epoch did, for the epoch log. */
struct epoch_result {
	uint64_t epoch;			/* VER_d after it */
	uint64_t pages;
	uint64_t bytes_written;
	uint64_t pages_saved;
	uint64_t collect_ns;		/* inside the pause */
	uint64_t persist_ns;		/* collect + write-back */
};

struct epoch_pipeline;

struct epoch_options {
	bool copy_in_pause;		/* never guard: copy in the pause */
};

/* Set up the pipeline over the heap [heap, heap + pool->npages pages),
 * tracked by t.  extent_fn, when not NULL, gives the heap's high-water mark
 * (collections look no higher).  Installs the tracker's cow hook.  Returns
 * 0 or -1 with err_get() set.  One pipeline at a time per process. */
int epoch_pipeline_open(struct epoch_pipeline **out, struct pool *pool, struct tracker *t,
			void *heap, size_t (*extent_fn)(void), const struct epoch_options *o);
/* Release it (after the epoch thread stopped).  NULL is a no-op. */
void epoch_pipeline_close(struct epoch_pipeline *ep);
/* In a fork child: forget the batch in flight (the parent persists it)
 * without touching the pool, and free the pipeline. */
void epoch_pipeline_abandon(struct epoch_pipeline *ep);

/* The two halves (see above).  final: this is shutdown's final epoch.
 * epoch_pause returns the batch epoch_writeback must be given. */
struct epoch_batch *epoch_pause(struct epoch_pipeline *ep, bool final);
void epoch_writeback(struct epoch_pipeline *ep, struct epoch_batch *b,
		     struct epoch_result *res);

/* The same pair as quiesce_epoch_fn procedures (arg: the pipeline):
 * epoch_on_quiescent runs epoch_pause (final when quiesce_in_final_epoch),
 * epoch_on_reopened the write-back, then writes the epoch log's line. */
void epoch_on_quiescent(void *arg);
void epoch_on_reopened(void *arg);

/* True once a final batch (epoch_pause(ep, true)) is durable. */
bool epoch_final_done(const struct epoch_pipeline *ep);

void epoch_get_counters(const struct epoch_pipeline *ep, struct epoch_counters *out);

#endif
