/* SPDX-License-Identifier: BSD-3-Clause */
/* stall_detect -- what blocks durability and when to say so: the FASEs that
 * outlasted an abandoned attempt (marked in their records, quiesce.h), the
 * stall they cause from the last quiescent point on, the reports due at 2 s,
 * 4 s, 8 s... and the one a timed-out pmthreads_sync asks for.  The report's
 * text is diagnose/stall.c's, behind quiesce_set_stall_fn. */
#include "quiesce/quiesce_internal.h"

#include "base/config.h"
#include "base/log.h"

#include <limits.h>
#include <stdatomic.h>
#include <string.h>

/* The FASEs that blocked the last abandoned attempt; more than fit are not
 * waited for (the next attempt marks them). */
#define MAX_BLOCKERS 16

/* Stalls (quiesce.h): what blocks durability, and its reports. */
static struct stall_state {
	/* The blocking FASEs' records, marked (bit 0 of lock), and how many
	 * there were: epoch thread only. */
	struct quiesce_rec *blockers[MAX_BLOCKERS];
	unsigned n_blockers;
	unsigned n_blocked_total;
	/* When the last quiescent point was reached (at quiesce_start: then);
	 * atomic. */
	_Atomic uint64_t last_point_ns;
	atomic_bool on;			/* attempts abandoned since then (atomic) */
	/* Under quiesce_counters.lock (the snapshot is read by the report and
	 * the statistics): stood_ns of the next report, whether this stall was
	 * reported, the last snapshot (for quiesce_get_stall). */
	uint64_t next_report_ns;
	bool reported;
	struct quiesce_stall now;
	/* A pmthreads_sync timed out: report now, whatever the schedule
	 * (atomic); reports_answered is bumped (and woken: futex) when such a
	 * report is out. */
	atomic_bool report_asked;
	atomic_uint reports_answered;
	_Atomic(quiesce_stall_fn) fn;	/* atomic */
	atomic_uint sync_timeout_ms;	/* atomic */
} stall = {
	.sync_timeout_ms = CONFIG_DEFAULT_SYNC_TIMEOUT_MS,
};

void quiesce_set_stall_fn(quiesce_stall_fn fn) { atomic_store(&stall.fn, fn); }
void quiesce_set_sync_timeout(unsigned ms) { atomic_store(&stall.sync_timeout_ms, ms > 0 ? ms : 1); }

static uint64_t first_report_ns(void)
{
	/* With a long interval durability stands still that long anyway. */
	uint64_t twice = 2 * quiesce_interval_ns();
	return twice > QUIESCE_STALL_REPORT_NS ? twice : QUIESCE_STALL_REPORT_NS;
}

uint64_t quiesce_stall_sync_timeout_ns(void)
{
	return (uint64_t)atomic_load(&stall.sync_timeout_ms) * 1000000ULL;
}

void quiesce_stall_start(void)
{
	atomic_store(&stall.last_point_ns, prim_now_ns());
	prim_lock(&quiesce_counters.lock);
	stall.next_report_ns = first_report_ns();
	prim_unlock(&quiesce_counters.lock);
}

void quiesce_stall_abandoned(void)
{
	/* Every record with depth > 0 is a FASE that outlasted the bound.
	 * Mark it, unless its owner has just begun another (the CAS fails
	 * then). */
	stall.n_blockers = 0;
	stall.n_blocked_total = 0;
	QUIESCE_FOR_EACH_REC(r) {
		if (atomic_load_explicit(&r->depth, memory_order_acquire) == 0)
			continue;
		uintptr_t l = atomic_load_explicit(&r->lock, memory_order_relaxed);
		if ((l & 1) == 0 && !atomic_compare_exchange_strong(&r->lock, &l, l | 1))
			continue;
		log_msg(LOG_DEBUG, "epoch abandoned: thread %d holds lock %#lx, taken at %#lx",
			atomic_load_explicit(&r->tid, memory_order_relaxed),
			(unsigned long)(l & ~(uintptr_t)1),
			(unsigned long)atomic_load_explicit(&r->site, memory_order_relaxed));
		stall.n_blocked_total++;
		if (stall.n_blockers < MAX_BLOCKERS)
			stall.blockers[stall.n_blockers++] = r;
	}
	atomic_store(&stall.on, true);
}

/* Whether the marked record r is still in the FASE that blocked (its
 * owner's next 0 -> 1 stores an unmarked lock). */
static bool still_in_blocking_fase(const struct quiesce_rec *r)
{
	return atomic_load_explicit(&r->depth, memory_order_acquire) != 0 &&
	       (atomic_load_explicit(&r->lock, memory_order_relaxed) & 1) != 0;
}

bool quiesce_stall_still_blocked(void)
{
	for (unsigned i = 0; i < stall.n_blockers; i++)
		if (still_in_blocking_fase(stall.blockers[i]))
			return true;
	return false;
}

static void stall_snapshot(struct quiesce_stall *st, uint64_t now)
{
	memset(st, 0, sizeof(*st));
	st->stalled = true;
	st->stood_ns = now - atomic_load(&stall.last_point_ns);
	st->durable_pause = atomic_load(&quiesce_epoch.durable_pause);
	st->sync_timeout_ns = quiesce_stall_sync_timeout_ns();
	for (unsigned i = 0; i < stall.n_blockers; i++) {
		struct quiesce_rec *r = stall.blockers[i];
		if (!still_in_blocking_fase(r))
			continue;	/* ended since */
		st->n_holders++;
		if (st->n_holders > QUIESCE_STALL_HOLDERS)
			continue;
		struct quiesce_stall_holder *h = &st->holders[st->n_holders - 1];
		h->tid = atomic_load_explicit(&r->tid, memory_order_relaxed);
		h->lock = atomic_load_explicit(&r->lock, memory_order_relaxed) & ~(uintptr_t)1;
		h->site = atomic_load_explicit(&r->site, memory_order_relaxed);
	}
	if (stall.n_blocked_total > stall.n_blockers)
		st->n_holders += stall.n_blocked_total - stall.n_blockers;
}

/* A timed-out pmthreads_sync's request for a report has been dealt with. */
static void answer_ask(void)
{
	atomic_fetch_add(&stall.reports_answered, 1);
	prim_futex_wake(&stall.reports_answered, INT_MAX);
}

/* Only a procedure that persists makes durability something to wait for;
 * without a stall function nobody is told. */
static quiesce_stall_fn stall_reporter(void)
{
	quiesce_stall_fn fn = atomic_load(&stall.fn);
	prim_lock(&quiesce_epoch.lock);
	bool persisting = quiesce_epoch.fn != NULL;
	prim_unlock(&quiesce_epoch.lock);
	return persisting ? fn : NULL;
}

void quiesce_stall_check(uint64_t now)
{
	bool asked = atomic_exchange(&stall.report_asked, false);
	if (!atomic_load(&stall.on)) {
		if (asked)
			answer_ask();
		return;
	}
	struct quiesce_stall st;
	stall_snapshot(&st, now);
	quiesce_stall_fn fn = stall_reporter();
	prim_lock(&quiesce_counters.lock);
	if (stall.next_report_ns == 0)
		stall.next_report_ns = first_report_ns();
	bool due = fn != NULL && (asked || st.stood_ns >= stall.next_report_ns);
	if (due) {
		if (!stall.reported)
			quiesce_counters.counts.stalls++;
		stall.reported = true;
		while (stall.next_report_ns <= st.stood_ns)
			stall.next_report_ns *= 2;
	}
	st.next_report_ns = stall.next_report_ns;
	if (st.stood_ns > quiesce_counters.counts.stall_ns_max)
		quiesce_counters.counts.stall_ns_max = st.stood_ns;
	stall.now = st;
	prim_unlock(&quiesce_counters.lock);
	if (due)
		fn(&st, false);
	if (asked)
		answer_ask();
}

void quiesce_stall_clear(uint64_t now)
{
	uint64_t since = atomic_exchange(&stall.last_point_ns, now);
	if (!atomic_exchange(&stall.on, false))
		return;
	stall.n_blockers = 0;
	stall.n_blocked_total = 0;
	struct quiesce_stall st;
	memset(&st, 0, sizeof(st));
	st.stood_ns = now - since;
	st.durable_pause = atomic_load(&quiesce_epoch.durable_pause);
	prim_lock(&quiesce_counters.lock);
	bool reported = stall.reported;
	stall.reported = false;
	stall.next_report_ns = first_report_ns();
	if (st.stood_ns > quiesce_counters.counts.stall_ns_max)
		quiesce_counters.counts.stall_ns_max = st.stood_ns;
	memset(&stall.now, 0, sizeof(stall.now));
	prim_unlock(&quiesce_counters.lock);
	atomic_store(&stall.report_asked, false);
	quiesce_stall_fn fn = reported ? stall_reporter() : NULL;
	if (fn != NULL)
		fn(&st, true);
}

bool quiesce_get_stall(struct quiesce_stall *st)
{
	prim_lock(&quiesce_counters.lock);
	*st = stall.now;
	prim_unlock(&quiesce_counters.lock);
	if (!st->stalled)
		return false;
	/* How long until now, not until the epoch thread's last look. */
	uint64_t since = atomic_load(&stall.last_point_ns);
	uint64_t now = prim_now_ns();
	if (atomic_load(&stall.on) && now > since)
		st->stood_ns = now - since;
	return true;
}

bool quiesce_stall_at_exit(struct quiesce_stall *st)
{
	/* The epoch thread is gone: the records hold still but for their
	 * owners', which are the threads still in a FASE. */
	memset(st, 0, sizeof(*st));
	st->stalled = true;
	uint64_t now = prim_now_ns(), since = atomic_load(&stall.last_point_ns);
	st->stood_ns = now > since ? now - since : 0;
	st->durable_pause = atomic_load(&quiesce_epoch.durable_pause);
	st->sync_timeout_ns = quiesce_stall_sync_timeout_ns();
	QUIESCE_FOR_EACH_REC(r) {
		if (atomic_load(&r->in_use) == 0 ||
		    atomic_load_explicit(&r->depth, memory_order_acquire) == 0)
			continue;
		if (++st->n_holders > QUIESCE_STALL_HOLDERS)
			continue;
		struct quiesce_stall_holder *h = &st->holders[st->n_holders - 1];
		h->tid = atomic_load_explicit(&r->tid, memory_order_relaxed);
		h->lock = atomic_load_explicit(&r->lock, memory_order_relaxed) & ~(uintptr_t)1;
		h->site = atomic_load_explicit(&r->site, memory_order_relaxed);
	}
	return st->n_holders != 0;
}

bool quiesce_stall_report_now(void)
{
	unsigned answered = atomic_load(&stall.reports_answered);
	atomic_store(&stall.report_asked, true);
	fase_wake_epoch();
	uint64_t ask_end = prim_now_ns() + 1000000000ULL;
	while (atomic_load(&stall.reports_answered) == answered &&
	       atomic_load(&quiesce_epoch.running) && prim_now_ns() < ask_end)
		prim_futex_wait(&stall.reports_answered, answered, 10000000ULL);
	/* The cause as it stands: attempts abandoned or the gate closing
	 * against a FASE, or else none that is a lock. */
	return atomic_load(&stall.on) || atomic_load(&quiesce_gate) == GATE_CLOSING;
}

bool quiesce_stall_stands(uint64_t *ns)
{
	*ns = 0;
	if (!atomic_load(&stall.on))
		return false;
	uint64_t now = prim_now_ns(), since = atomic_load(&stall.last_point_ns);
	*ns = now > since ? now - since : 0;
	return true;
}

void quiesce_stall_atfork_child(void)
{
	/* No epoch thread, no blocker; the reporter and the timeout stay. */
	stall.n_blockers = 0;
	stall.n_blocked_total = 0;
	atomic_store(&stall.on, false);
	stall.reported = false;
	memset(&stall.now, 0, sizeof(stall.now));
}
