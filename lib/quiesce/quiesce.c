/* SPDX-License-Identifier: BSD-3-Clause */
/* quiesce -- the module's statistics and its fork child.  The model is
 * quiesce.h's; which file owns what, quiesce_internal.h's. */
#include "quiesce/quiesce_internal.h"

#include "base/log.h"

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

struct quiesce_counters quiesce_counters = { .lock = PRIM_LOCK_INIT };
PRIM_LOCK_NAMED(quiesce_counters.lock, counters, "quiesce: the counters and the stall snapshot",
		PRIM_FORK_RESET);

void quiesce_atfork_child(void)
{
	/* Only the forking thread exists here: the parent's epoch thread, the
	 * other threads' records and the locks they held are not the child's.
	 * The shared state is reset here, each file's own by its reset (the
	 * locks: prim_locks_atfork_child). */
	unsigned n = 0;
	QUIESCE_FOR_EACH_REC(r) {
		if (r == quiesce_self.rec) {
			atomic_store(&r->tid, (int)prim_gettid());
			n++;
			continue;
		}
		atomic_store(&r->depth, 0);
		atomic_store(&r->in_use, 0);
	}
	atomic_store(&quiesce_records.registered, n);
	quiesce_internal_threads_atfork_child();
	quiesce_ending_atfork_child();
	/* A registration the kernel does not carry into the child is made
	 * again; without it, fence (no other thread runs yet to have read 0). */
	if (atomic_load(&quiesce_need_fence) == 0 && !prim_membarrier_register())
		atomic_store(&quiesce_need_fence, 1);

	/* No epoch thread; the procedure and the interval stay for a
	 * quiesce_start in the child. */
	struct quiesce_epoch *e = &quiesce_epoch;
	atomic_store(&e->running, false);
	atomic_store(&e->stopping, false);
	atomic_store(&e->failed_for_good, false);
	atomic_store(&e->working, false);
	atomic_store(&e->tick, NULL);
	atomic_store(&e->tick_period_ns, 0);
	atomic_store(&e->requested, 0);
	atomic_store(&e->served, 0);
	atomic_store(&quiesce_gate, GATE_OPEN);

	/* The counters under the lock start again; the relaxed atomics after
	 * them are kept. */
	memset(&quiesce_counters, 0, offsetof(struct quiesce_counters, not_fase_sites));

	quiesce_stall_atfork_child();
}

void quiesce_note_blocking_in_fase(const char *call)
{
	if (atomic_fetch_add_explicit(&quiesce_counters.blocking_in_fase, 1, memory_order_relaxed) < 8)
		log_msg(LOG_INFO, "a thread blocks in %s while holding a lock: epochs cannot start "
			"until it returns (attempts are abandoned and retried meanwhile)", call);
}

void quiesce_get_stats(struct quiesce_stats *st)
{
	struct quiesce_counters *c = &quiesce_counters;
	prim_lock(&c->lock);
	*st = c->counts;
	st->pause_ns_p50 = hist_percentile(c->pause_hist, st->epochs, 50, st->pause_ns_max);
	st->pause_ns_p99 = hist_percentile(c->pause_hist, st->epochs, 99, st->pause_ns_max);
	st->period_ns_p50 = hist_percentile(c->period_hist, c->periods, 50, st->period_ns_max);
	st->period_ns_p99 = hist_percentile(c->period_hist, c->periods, 99, st->period_ns_max);
	st->period_ns_mean = c->periods != 0 ? c->period_total / c->periods : 0;
	prim_unlock(&c->lock);
	st->stalled = quiesce_stall_stands(&st->stall_ns);
	if (st->stall_ns > st->stall_ns_max)
		st->stall_ns_max = st->stall_ns;
	st->not_fase_sites = atomic_load_explicit(&c->not_fase_sites, memory_order_relaxed);
	st->membarrier = !atomic_load(&quiesce_need_fence);
	st->blocking_in_fase = atomic_load_explicit(&c->blocking_in_fase, memory_order_relaxed);
}
