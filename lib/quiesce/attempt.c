/* SPDX-License-Identifier: BSD-3-Clause */
/* attempt -- one attempt at a quiescent point, on the epoch thread: the gate
 * closed, every record's depth waited for (membarrier pairs with the lock fast
 * path's plain stores), then either the epoch procedures run and the gate
 * reopens, or the bound passes and the attempt is abandoned.  The pause and
 * period it measures go to the statistics.  When attempts are made is
 * epoch_loop.c's schedule. */
#include "quiesce/quiesce_internal.h"

#include "base/log.h"

#include <limits.h>
#include <stdatomic.h>

/* Make every thread's earlier depth store visible to this thread. */
static void barrier_all_threads(void)
{
	if (atomic_load_explicit(&quiesce_need_fence, memory_order_relaxed) ||
	    prim_membarrier() != 0)
		atomic_thread_fence(memory_order_seq_cst);
}

static bool all_idle(void)
{
	QUIESCE_FOR_EACH_REC(r)
		if (atomic_load_explicit(&r->depth, memory_order_acquire) != 0)
			return false;
	return true;
}

static uint64_t abandon_bound_ns(void)
{
	uint64_t half = (uint64_t)atomic_load(&quiesce_epoch.interval_ms) * 500000ULL;
	return half > 20000000ULL ? half : 20000000ULL;
}

static void open_gate(void)
{
	atomic_store_explicit(&quiesce_gate, GATE_OPEN, memory_order_release);
	prim_futex_wake(&quiesce_gate, INT_MAX);
}

/* A quiescent point's pause (from t0, when the gate began closing) and the
 * period since the previous one's. */
static void count_pause(uint64_t t0, uint64_t pause, bool retry)
{
	struct quiesce_epoch *e = &quiesce_epoch;
	struct quiesce_counters *c = &quiesce_counters;
	prim_lock(&c->lock);
	c->counts.epochs++;
	c->counts.pause_ns_total += pause;
	if (pause > c->counts.pause_ns_max)
		c->counts.pause_ns_max = pause;
	c->pause_hist[hist_bucket_of(pause)]++;
	/* For a retry: since the attempt it completes began; only the attempts
	 * that start a period make the histogram. */
	e->last_period_ns = e->last_start_ns != 0 ? t0 - e->last_start_ns : 0;
	if (e->last_period_ns != 0 && !retry) {
		c->periods++;
		c->period_total += e->last_period_ns;
		if (e->last_period_ns > c->counts.period_ns_max)
			c->counts.period_ns_max = e->last_period_ns;
		c->period_hist[hist_bucket_of(e->last_period_ns)]++;
	}
	prim_unlock(&c->lock);
	if (!retry)
		e->last_start_ns = t0;
	e->last_pause_ns = pause;
}

/* Every depth is 0 and quiesce_epoch.lock is held (released here): the
 * procedures run, the gate reopens between them.  covers: the sync requests
 * this epoch serves; awaited: whether any of them was pending. */
static enum attempt quiescent_point(uint64_t t0, unsigned covers, bool awaited, bool retry)
{
	struct quiesce_epoch *e = &quiesce_epoch;
	atomic_store(&quiesce_gate, GATE_RUNNING);
	/* Numbered before the procedure collects: a writer that reads the old
	 * number stamps its output with this one, and every heap write it made
	 * is collected here. */
	atomic_store(&e->working, true);
	uint64_t this_pause = atomic_fetch_add(&e->pauses, 1) + 1;
	/* Taken under the lock, so that quiesce_start swapping the procedure
	 * cannot pair one epoch's fn with another's after. */
	quiesce_epoch_fn fn = e->fn;
	quiesce_after_fn after = e->after;
	void *arg = e->arg;
	atomic_store_explicit(&e->attempt_awaited, awaited, memory_order_relaxed);
	if (fn != NULL)
		fn(arg);
	open_gate();
	prim_unlock(&e->lock);
	/* The pause is what the application waited for: the gate is open now,
	 * whatever after still does. */
	uint64_t pause = prim_now_ns() - t0;
	quiesce_stall_clear(t0 + pause);
	count_pause(t0, pause, retry);
	/* On this thread, so the next quiescent point (which this thread also
	 * runs) cannot start before it is done: epochs stay ordered and never
	 * overlap. */
	enum quiesce_outcome o = after == NULL ? QUIESCE_DURABLE : after(arg);
	atomic_store_explicit(&e->attempt_awaited, false, memory_order_relaxed);
	atomic_store(&e->working, false);
	if (o == QUIESCE_CARRIED)
		return ATTEMPT_CARRIED;
	if (o == QUIESCE_DURABLE)
		atomic_store(&e->durable_pause, this_pause);
	if (o == QUIESCE_FAILED)
		atomic_store(&e->failed_for_good, true);
	atomic_store_explicit(&e->served, covers, memory_order_release);
	prim_futex_wake(&e->served, INT_MAX);
	return ATTEMPT_ENDED;
}

/* The bound passed with the gate CLOSING after waited ns. */
static enum attempt abandon(uint64_t waited)
{
	quiesce_stall_abandoned();
	open_gate();
	prim_lock(&quiesce_counters.lock);
	quiesce_counters.counts.abandoned++;
	quiesce_counters.counts.abandoned_ns_total += waited;
	prim_unlock(&quiesce_counters.lock);
	log_msg(LOG_DEBUG, "epoch abandoned: a thread held a lock for %llu ms",
		(unsigned long long)(waited / 1000000));
	return ATTEMPT_ABANDONED;
}

enum attempt quiesce_attempt(bool retry)
{
	unsigned covers = atomic_load(&quiesce_epoch.requested);
	bool awaited = covers != atomic_load(&quiesce_epoch.served);
	uint64_t t0 = prim_now_ns();
	uint64_t bound = abandon_bound_ns();
	atomic_store(&quiesce_gate, GATE_CLOSING);
	prim_lock(&quiesce_counters.lock);
	quiesce_counters.counts.gate_closings++;
	prim_unlock(&quiesce_counters.lock);
	barrier_all_threads();
	uint64_t sleep_ns = 20000;
	for (;;) {
		unsigned seen = atomic_load(&quiesce_epoch.wake_word);
		prim_lock(&quiesce_epoch.lock);
		if (all_idle())
			return quiescent_point(t0, covers, awaited, retry);
		prim_unlock(&quiesce_epoch.lock);
		uint64_t waited = prim_now_ns() - t0;
		if (waited >= bound)
			return abandon(waited);
		/* Threads leaving their last lock wake us; the timed wait only
		 * covers wake-ups lost to the relaxed check in fase_leave.  No
		 * sched_yield: on a loaded machine it gives the processor away
		 * for a whole time slice. */
		uint64_t left = bound - waited;
		prim_futex_wait(&quiesce_epoch.wake_word, seen, sleep_ns < left ? sleep_ns : left);
		if (sleep_ns < 1000000)
			sleep_ns *= 2;
	}
}

uint64_t quiesce_last_pause_ns(void)
{
	return quiesce_epoch.last_pause_ns;
}

uint64_t quiesce_last_period_ns(void)
{
	return quiesce_epoch.last_period_ns;
}
