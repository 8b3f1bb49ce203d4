/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * quiesce_internal -- what the files of quiesce/ share: the state more than
 * one of them reads or writes, each field saying what guards it, and the
 * steps one file owns and another calls.  Private to the .c files of
 * lib/quiesce/; everything else uses quiesce.h.
 *
 *   gate.c             the records (one per thread), the gate, FASE enter
 *                      and leave (a condition wait's too), membarrier's
 *                      registration
 *   runtime_scope.c    the runtime's own code: a private record per scope
 *   not_fase.c         PMTHREADS_NOT_FASE: call sites whose locks are no FASE
 *   attempt.c          one attempt at a quiescent point: close the gate, wait
 *                      for every depth 0, run the procedures or abandon
 *   epoch_loop.c       the epoch thread: its schedule, its loop, the tick,
 *                      the final epoch, quiesce_start / quiesce_stop
 *   sync.c             durability waits: pmthreads_sync, epochs on demand
 *   stall_detect.c     what blocks durability (the FASEs that outlasted an
 *                      attempt) and when to report it (the text is
 *                      diagnose/stall.c's)
 *   internal_threads.c the runtime's own threads: their stacks, creation
 *                      and join
 *   ending.c           the end of the process: the last application thread,
 *                      or a signal, handled on the epoch thread
 *   quiesce.c          the module's statistics and its fork child
 *
 * A fork child resets all of it in quiesce_atfork_child (quiesce.c), which
 * calls the reset of each file that keeps state of its own.
 */
#ifndef PMT_QUIESCE_INTERNAL_H
#define PMT_QUIESCE_INTERNAL_H

/* The shared structs are declared hidden, as quiesce.h's fast-path state is:
 * the compiler then addresses them as it did when they were one file's
 * statics (PC-relative, no GOT), on the gate's slow paths too. */

#include "base/histogram.h"
#include "prim/prim.h"
#include "quiesce/quiesce.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- the records (gate.c) ---- */

/* Records come in slabs from prim_map_any, never from malloc (the malloc
 * wrappers may themselves enter a FASE), and are never unmapped, so the epoch
 * thread can walk the list without a lock. */
#define RECS_PER_SLAB 255
struct slab {
	struct slab *_Atomic next;
	char pad[64 - sizeof(void *)];
	struct quiesce_rec recs[RECS_PER_SLAB];
};

/* Every application thread's record and how many are in use. */
struct quiesce_records {
	/* The slab list: pushed under lock, walked without it (slabs are never
	 * unmapped). */
	struct slab *_Atomic slabs;
	prim_lock_t lock;		/* adding a slab */
	atomic_uint registered;		/* records in use (atomic) */
};
extern struct quiesce_records quiesce_records __attribute__((visibility("hidden")));

/* For each record r of every slab, in use or not; a lock-free walk. */
#define QUIESCE_FOR_EACH_REC(r)                                                                    \
	for (struct slab *slab_ = atomic_load_explicit(&quiesce_records.slabs, memory_order_acquire); \
	     slab_ != NULL; slab_ = atomic_load_explicit(&slab_->next, memory_order_acquire))      \
		for (struct quiesce_rec *r = slab_->recs; r < slab_->recs + RECS_PER_SLAB; r++)

/* Register this process for membarrier(2) unless it is already, and say
 * whether the lock path may skip its fence (quiesce_need_fence). */
bool quiesce_fence_settle(void);

/* ---- the epoch thread (epoch_loop.c, attempt.c, sync.c) ---- */

/* The epoch thread: its procedure and the requests it serves.  (Its schedule
 * is epoch_loop.c's, a local of its loop.) */
struct quiesce_epoch {
	/* Held by the epoch thread from each scan that finds every depth 0
	 * until the gate is open again, so fase_reenter can wait out a running
	 * epoch by taking it, and a reentry that saw CLOSING is serialised
	 * against the final scan. */
	prim_lock_t lock;
	prim_lock_t control_lock;	/* quiesce_start / quiesce_stop */
	pthread_t thread;		/* under control_lock */
	/* The procedure, under lock (swapped between epochs, never during
	 * one).  after runs after the gate reopened, before sync waiters are
	 * released: the slow half of the epoch (persisting what fn staged)
	 * must not stall FASEs, yet pmthreads_sync promises durability, not a
	 * snapshot. */
	quiesce_epoch_fn fn;
	quiesce_after_fn after;
	void *arg;
	atomic_uint interval_ms;	/* set by quiesce_start (atomic) */
	/* Atomics: the thread runs; it was asked to stop (after a final
	 * epoch: final_requested; final_skip: the exiting thread holds a
	 * lock). */
	atomic_bool running;
	atomic_bool stopping;
	atomic_bool final_requested;
	atomic_bool final_skip;
	/* An after procedure said QUIESCE_FAILED: nothing becomes durable
	 * again, so the program is never paused again (the epoch thread stays,
	 * for sync requests and the end of the process).  Atomic. */
	atomic_bool failed_for_good;
	/* Set on the epoch thread around the final attempt only, so the
	 * runtime can tell shutdown's final epoch from a regular one that
	 * happened to run while shutdown was starting.  Atomic. */
	atomic_bool in_final_attempt;
	/* Set by the epoch thread while the procedures of an attempt run that
	 * a sync or a demand (output commit) issued before it began waits for.
	 * Atomic. */
	atomic_bool attempt_awaited;
	/* Set by the epoch thread from a quiescent point until the end of its
	 * procedures (the pause's collect, the write-back after it): the
	 * program is not stalled then, however long the write-back takes,
	 * and pmthreads_sync's timeout does not run.  Atomic. */
	atomic_bool working;
	/* The epoch thread sleeps on wake_word (futex); everything that wants
	 * it to look again (a sync request, stop, the last lock released while
	 * CLOSING) bumps it and wakes it (fase_wake_epoch). */
	atomic_uint wake_word;
	/* Sync requests issued, and the latest request an epoch has covered
	 * (the requests issued before that epoch closed the gate).  Waiters
	 * sleep on served (futex). */
	atomic_uint requested;
	atomic_uint served;
	/* Quiescent points reached, and the latest one made durable
	 * (quiesce.h).  Atomic. */
	_Atomic uint64_t pauses;
	_Atomic uint64_t durable_pause;
	/* Written and read on the epoch thread only: the last pause and
	 * period, and the attempt start of the previous epoch. */
	uint64_t last_pause_ns;
	uint64_t last_period_ns;
	uint64_t last_start_ns;
	/* quiesce_set_tick: called each turn, the loop's waits bounded by
	 * tick_period_ns (0: unbounded).  Atomics. */
	_Atomic(quiesce_tick_fn) tick;
	_Atomic uint64_t tick_period_ns;
};
extern struct quiesce_epoch quiesce_epoch __attribute__((visibility("hidden")));

/* The epoch interval in ns, as quiesce_start set it last. */
static inline uint64_t quiesce_interval_ns(void)
{
	return (uint64_t)atomic_load(&quiesce_epoch.interval_ms) * 1000000ULL;
}

/* How an attempt at a quiescent point ended: abandoned (a lock held too
 * long), ended (its image durable, or failed for good: nothing to retry), or
 * carried over (to be completed at once). */
enum attempt { ATTEMPT_ABANDONED, ATTEMPT_ENDED, ATTEMPT_CARRIED };

/* One attempt at a quiescent point, on the epoch thread (attempt.c).  retry:
 * the previous one was carried over and this one completes it -- not the
 * start of a new period. */
enum attempt quiesce_attempt(bool retry);

/* ---- statistics (quiesce.c) ---- */

/* The counters the report shows are kept in the report's own struct; the
 * pause and period histograms are base/histogram.h's log-linear ones. */
struct quiesce_counters {
	prim_lock_t lock;
	/* Under lock, written by the epoch thread (syncs, sync_timeouts: by the
	 * caller of quiesce_sync).  The percentiles, stalled, stall_ns,
	 * not_fase_sites, membarrier and blocking_in_fase are filled in by
	 * quiesce_get_stats. */
	struct quiesce_stats counts;
	uint64_t pause_hist[HIST_BUCKETS];	/* under lock */
	/* Achieved period: from one quiescent point's attempt start to the
	 * next one's; under lock. */
	uint64_t periods;
	uint64_t period_total;
	uint64_t period_hist[HIST_BUCKETS];
	/* Relaxed atomics, any thread; a fork child keeps them. */
	atomic_uint_fast64_t not_fase_sites;
	atomic_uint_fast64_t blocking_in_fase;
};
extern struct quiesce_counters quiesce_counters __attribute__((visibility("hidden")));

/* ---- stalls (stall_detect.c) ---- */

/* The epoch thread starts: durability stands still from now. */
void quiesce_stall_start(void);
/* At the end of an abandoned attempt, gate still CLOSING: the FASEs that
 * outlasted the bound are marked, and durability is stalled. */
void quiesce_stall_abandoned(void);
/* Whether a FASE that blocked the last attempt has not ended: an attempt
 * now would close the gate against it again. */
bool quiesce_stall_still_blocked(void);
/* Epoch thread, each turn of its loop: report a stall when it is due. */
void quiesce_stall_check(uint64_t now);
/* A quiescent point was reached at now. */
void quiesce_stall_clear(uint64_t now);
/* A pmthreads_sync timed out: the stall report, now, from the epoch thread,
 * out before this returns (at most a second); then whether a FASE is the
 * cause (attempts abandoned, or the gate closing against one). */
bool quiesce_stall_report_now(void);
/* The sync timeout in ns. */
uint64_t quiesce_stall_sync_timeout_ns(void);
/* Whether durability is stalled now, and for how long (0 when not). */
bool quiesce_stall_stands(uint64_t *ns);
void quiesce_stall_atfork_child(void);

/* ---- the runtime's threads and the end of the process ---- */

/* internal_threads.c: how many of the runtime's own threads are alive. */
int quiesce_internal_threads_alive(void);
void quiesce_internal_threads_atfork_child(void);

/* ending.c, on the epoch thread.  quiesce_end_if_asked: the end a signal's
 * handler asked for (quiesce_end_on_epoch_thread); does not return once it
 * has run.  quiesce_no_app_thread: whether no application thread is counted,
 * and if so the end of the process when only the runtime's threads are left
 * (does not return then). */
void quiesce_end_if_asked(void);
bool quiesce_no_app_thread(void);
void quiesce_ending_atfork_child(void);

#endif
