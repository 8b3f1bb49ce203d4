/* SPDX-License-Identifier: BSD-3-Clause */
/* epoch_loop -- the epoch thread: its schedule (when the next attempt is
 * due, and what a late, abandoned, deferred or carried-over attempt does to
 * it), the loop that follows it, the tick, shutdown's final epoch, and
 * quiesce_start / quiesce_stop.  An attempt itself is attempt.c's. */
#include "quiesce/quiesce_internal.h"

#include "base/log.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

struct quiesce_epoch quiesce_epoch = {
	.lock = PRIM_LOCK_INIT,
	.control_lock = PRIM_LOCK_INIT,
};
/* The child has no epoch thread: quiesce_atfork_child starts it over. */
PRIM_LOCK_NAMED(quiesce_epoch.lock, epoch_scan, "quiesce: the epoch thread's scan and pause",
		PRIM_FORK_RESET);
PRIM_LOCK_NAMED(quiesce_epoch.control_lock, epoch_control,
		"quiesce: the epoch thread's start and stop", PRIM_FORK_RESET);

/* ---- the schedule ---- */

/* How often the loop looks whether only the runtime's threads are left while
 * no application thread is counted: soon, then less often while threads
 * remain (quiesce_no_app_thread). */
#define LAST_THREAD_POLL_MIN_NS 1000000ULL
#define LAST_THREAD_POLL_MAX_NS 64000000ULL
/* The first back-off after an abandoned attempt, doubled at each further
 * one up to the interval. */
#define BACKOFF_MIN_NS 5000000ULL

/* When the next attempt is due.  Three policies: a fixed rate (next_due, one
 * interval after the previous epoch started or was due), at once for a sync
 * request or to complete a carried-over epoch (retry), and after an
 * abandoned attempt a back-off that both respect (not_before).  A local of
 * the epoch thread's loop: no other thread sees it. */
struct schedule {
	uint64_t next_due;		/* the next periodic attempt */
	/* After an abandoned attempt, nothing before not_before; backoff is
	 * how long that was (0: the last attempt was not abandoned). */
	uint64_t not_before;
	uint64_t backoff;
	/* The last epoch was carried over (its write-back saw the program
	 * write pages it read): complete it at once, while the pages written
	 * since are few -- each retry's batch is what the program wrote during
	 * the previous write-back, so the retries shrink. */
	bool retry;
	uint64_t last_thread_poll;	/* ns, doubled while threads remain */
};

static void schedule_init(struct schedule *s, uint64_t now)
{
	*s = (struct schedule){
		.next_due = now + quiesce_interval_ns(),
		.last_thread_poll = LAST_THREAD_POLL_MIN_NS,
	};
}

/* When the next attempt is due, as of now. */
static uint64_t schedule_due(const struct schedule *s, uint64_t now, bool sync_pending)
{
	if (sync_pending || s->retry)
		return s->not_before > now ? s->not_before : now;
	return s->next_due;
}

/* Epochs failed for good: nothing to complete, and a turn each interval
 * (the tick, the last-thread check), never an attempt. */
static void schedule_idle(struct schedule *s, uint64_t now)
{
	s->retry = false;
	if (s->next_due <= now)
		s->next_due = now + quiesce_interval_ns();
}

/* due, brought forward to the next look for the last thread while watching
 * (no application thread counted). */
static uint64_t schedule_last_thread(struct schedule *s, bool watching, uint64_t now, uint64_t due)
{
	if (!watching) {
		s->last_thread_poll = LAST_THREAD_POLL_MIN_NS;
		return due;
	}
	if (now < due && due - now > s->last_thread_poll)
		due = now + s->last_thread_poll;
	if (s->last_thread_poll < LAST_THREAD_POLL_MAX_NS)
		s->last_thread_poll *= 2;
	return due;
}

/* An attempt is due but deferred: the FASE that blocked the last one has not
 * ended.  Counts one deferral per interval; returns how long to wait before
 * looking again (soon: a sync waits). */
static uint64_t schedule_deferred(struct schedule *s, uint64_t now)
{
	uint64_t interval = quiesce_interval_ns();
	if (now >= s->next_due) {
		prim_lock(&quiesce_counters.lock);
		quiesce_counters.counts.attempts_deferred++;
		prim_unlock(&quiesce_counters.lock);
		s->next_due = now + interval;
	}
	uint64_t poll = interval / 10;
	return poll < 1000000 ? 1000000 : poll > 10000000 ? 10000000 : poll;
}

/* The attempt started at started (due then) ended as a says. */
static void schedule_after(struct schedule *s, enum attempt a, uint64_t started, bool sync_pending)
{
	uint64_t interval = quiesce_interval_ns();
	if (a == ATTEMPT_ABANDONED) {
		/* Retry soon, then less often while the lock stays held: every
		 * attempt stalls new FASEs for the bound. */
		s->backoff = s->backoff == 0 ? BACKOFF_MIN_NS : s->backoff * 2;
		if (s->backoff > interval)
			s->backoff = interval;
		s->not_before = s->next_due = prim_now_ns() + s->backoff;
		return;
	}
	s->backoff = 0;
	s->not_before = 0;
	bool was_retry = s->retry;
	s->retry = a == ATTEMPT_CARRIED;
	/* A retry keeps the schedule the carried-over attempt set for its
	 * period. */
	if (was_retry)
		return;
	/* Fixed rate: the next epoch is due one interval after this one started
	 * (or was due), not after its write-back ended -- else every epoch
	 * stretches the period by its own persist time.  A sync epoch restarts
	 * the schedule. */
	uint64_t base = !sync_pending && s->next_due <= started ? s->next_due : started;
	s->next_due = base + interval;
	uint64_t now = prim_now_ns();
	if (now > s->next_due) {
		/* Late: the write-back overran the interval, a backlog.  Start
		 * the next epoch at once and say so. */
		prim_lock(&quiesce_counters.lock);
		quiesce_counters.counts.late_epochs++;
		quiesce_counters.counts.late_ns_total += now - s->next_due;
		prim_unlock(&quiesce_counters.lock);
		s->next_due = now;
	}
}

/* ---- the tick (quiesce.h) ---- */

void quiesce_set_tick(quiesce_tick_fn fn, uint64_t period_ns)
{
	atomic_store(&quiesce_epoch.tick_period_ns, fn != NULL ? period_ns : 0);
	atomic_store(&quiesce_epoch.tick, fn);
	/* A wait already under way may have no bound: look again now. */
	fase_wake_epoch();
}

/* The epoch thread's wait for wake_word, bounded by the tick's period. */
static void loop_wait(unsigned seen, uint64_t ns)
{
	uint64_t period = atomic_load(&quiesce_epoch.tick_period_ns);
	if (period != 0 && ns > period)
		ns = period;
	prim_futex_wait(&quiesce_epoch.wake_word, seen, ns);
}

static void loop_tick(void)
{
	quiesce_tick_fn fn = atomic_load(&quiesce_epoch.tick);
	if (fn != NULL)
		fn();
}

void quiesce_tick_now(void)
{
	if (quiesce_self.on_epoch_thread)
		loop_tick();
}

/* ---- the loop ---- */

/* Shutdown's final epoch; an attempt carried over is completed as at any
 * other time (the pipeline bounds how many in a row there can be). */
static void final_epoch(void)
{
	/* Exit never waits for a lock held at exit: not the exiting thread's
	 * own, not one that has blocked every attempt so far. */
	bool skip = atomic_load(&quiesce_epoch.final_skip);
	if (skip || quiesce_stall_still_blocked()) {
		log_msg(LOG_INFO, "no final epoch: %s holds a lock at exit",
			skip ? "the exiting thread" : "a thread that blocked the last attempt still");
		return;
	}
	atomic_store(&quiesce_epoch.in_final_attempt, true);
	enum attempt a = quiesce_attempt(false);
	for (int tries = 0; a == ATTEMPT_CARRIED && tries < 16; tries++)
		a = quiesce_attempt(true);
	atomic_store(&quiesce_epoch.in_final_attempt, false);
}

/* Epochs failed for good: the sync requests pending are served by none;
 * their callers learn it (and report the error). */
static void release_sync_waiters(void)
{
	atomic_store_explicit(&quiesce_epoch.served, atomic_load(&quiesce_epoch.requested),
			      memory_order_release);
	prim_futex_wake(&quiesce_epoch.served, INT_MAX);
}

static void *epoch_main(void *unused)
{
	(void)unused;
	struct quiesce_epoch *e = &quiesce_epoch;
	/* In a runtime scope already (quiesce_create_internal_thread). */
	quiesce_self.on_epoch_thread = true;
	struct schedule sched;
	schedule_init(&sched, prim_now_ns());
	while (!atomic_load(&e->stopping)) {
		unsigned seen = atomic_load(&e->wake_word);
		quiesce_end_if_asked();
		uint64_t now = prim_now_ns();
		bool sync_pending = atomic_load(&e->requested) != atomic_load(&e->served);
		if (atomic_load(&e->failed_for_good)) {
			/* A pause would persist nothing: stay idle but for the
			 * tick and the last-thread check. */
			if (sync_pending)
				release_sync_waiters();
			sync_pending = false;
			schedule_idle(&sched, now);
		}
		uint64_t due = schedule_due(&sched, now, sync_pending);
		due = schedule_last_thread(&sched, quiesce_no_app_thread(), now, due);
		quiesce_stall_check(now);
		loop_tick();
		if (now < due || atomic_load(&e->failed_for_good)) {
			if (now < due)
				loop_wait(seen, due - now);
			continue;
		}
		if (quiesce_stall_still_blocked()) {
			/* No gate churn: the FASE that blocked the last attempt
			 * would block this one too. */
			loop_wait(seen, schedule_deferred(&sched, now));
			continue;
		}
		schedule_after(&sched, quiesce_attempt(sched.retry), now, sync_pending);
	}
	if (atomic_load(&e->final_requested) && !atomic_load(&e->failed_for_good))
		final_epoch();
	quiesce_internal_thread_done();
	return NULL;
}

/* ---- start and stop ---- */

/* The procedure and the interval, under quiesce_epoch.lock while the thread
 * runs; a new procedure has not failed. */
static void install(unsigned ms, quiesce_epoch_fn fn, quiesce_after_fn after, void *arg)
{
	quiesce_epoch.fn = fn;
	quiesce_epoch.after = after;
	quiesce_epoch.arg = arg;
	atomic_store(&quiesce_epoch.interval_ms, ms);
	atomic_store(&quiesce_epoch.failed_for_good, false);
}

int quiesce_start(unsigned ms, quiesce_epoch_fn fn, void *arg)
{
	return quiesce_start_split(ms, fn, NULL, arg);
}

int quiesce_start_split(unsigned ms, quiesce_epoch_fn fn, quiesce_after_fn after, void *arg)
{
	struct quiesce_epoch *e = &quiesce_epoch;
	if (ms == 0) {
		err_set("quiesce: the epoch interval must be at least 1 ms");
		return -1;
	}
	prim_lock(&e->control_lock);
	if (atomic_load(&e->running)) {
		/* Swap the procedure between epochs, never during one. */
		prim_lock(&e->lock);
		install(ms, fn, after, arg);
		prim_unlock(&e->lock);
		fase_wake_epoch();
		prim_unlock(&e->control_lock);
		return 0;
	}
	if (!quiesce_fence_settle())
		log_msg(LOG_INFO, "membarrier(2) is unavailable; the lock path uses a full fence");
	install(ms, fn, after, arg);
	atomic_store(&e->stopping, false);
	atomic_store(&e->final_requested, false);
	atomic_store(&e->final_skip, false);
	quiesce_stall_start();
	int err = quiesce_create_internal_thread(&e->thread, epoch_main, NULL);
	if (err != 0) {
		prim_unlock(&e->control_lock);
		err_set_errno(err, "quiesce: cannot create the epoch thread");
		return -1;
	}
	atomic_store(&e->running, true);
	prim_unlock(&e->control_lock);
	return 0;
}

void quiesce_stop(bool final)
{
	struct quiesce_epoch *e = &quiesce_epoch;
	prim_lock(&e->control_lock);
	if (!atomic_load(&e->running)) {
		prim_unlock(&e->control_lock);
		return;
	}
	atomic_store(&e->final_requested, final);
	atomic_store(&e->final_skip, fase_depth() != 0);
	atomic_store(&e->stopping, true);
	if (quiesce_self.on_epoch_thread) {
		/* exit() on the epoch thread (quiesce_set_last_thread_fn): it
		 * cannot join itself; the final attempt runs here, and the
		 * thread ends with the process.  The exit handlers run as the
		 * application's (ending.c); the epoch as the runtime's. */
		if (final) {
			struct quiesce_scope s;
			quiesce_runtime_enter(&s);
			final_epoch();
			quiesce_runtime_leave(&s);
		}
		atomic_store(&e->running, false);
		prim_futex_wake(&e->served, INT_MAX);
		prim_unlock(&e->control_lock);
		return;
	}
	fase_wake_epoch();
	quiesce_join_internal_thread(e->thread, NULL);
	atomic_store(&e->running, false);
	/* Sync waiters learn that no epoch will come. */
	prim_futex_wake(&e->served, INT_MAX);
	prim_unlock(&e->control_lock);
}

bool quiesce_running(void) { return atomic_load(&quiesce_epoch.running); }
