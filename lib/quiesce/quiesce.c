/* SPDX-License-Identifier: BSD-3-Clause */
/* quiesce -- failure-atomic sections, the gate and the epoch thread.  See
 * quiesce.h for the model; the comments here say why the code is shaped as
 * it is. */
#include "quiesce/quiesce.h"

#include "base/config.h"
#include "base/histogram.h"
#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

/* The record (struct quiesce_rec), the gate states and the lock fast path
 * are in quiesce.h, so the preload wrappers can inline the fast path. */

/* Records come in slabs from prim_map_any, never from malloc (the malloc
 * wrappers may themselves enter a FASE), and are never unmapped, so the epoch
 * thread can walk the list without a lock. */
#define RECS_PER_SLAB 255
struct slab {
	struct slab *_Atomic next;
	char pad[64 - sizeof(void *)];
	struct quiesce_rec recs[RECS_PER_SLAB];
};

/* The state of this module, one struct per concern; each field says what
 * guards it.  A fork child resets them in quiesce_atfork_child. */

/* The threads: every application thread's record, how many there are, the
 * runtime's own threads, and how to create them. */
static struct threads {
	/* The slab list: pushed under lock, walked without it (slabs are never
	 * unmapped). */
	struct slab *_Atomic slabs;
	prim_lock_t lock;		/* adding a slab */
	atomic_uint registered;		/* records in use (atomic) */
	/* The end of the process (quiesce_set_last_thread_fn): application
	 * threads alive (main counts from the start) and the runtime's own
	 * threads alive (atomics), the function that ends it (atomic), and the
	 * signal mask of the thread that installed it, for the exit on the
	 * epoch thread (written before fn is published, read after). */
	atomic_int app;
	atomic_int internal;
	_Atomic(quiesce_last_thread_fn) last_thread_fn;
	sigset_t start_mask;
	/* How the runtime's threads are created and joined: set before
	 * quiesce_start (quiesce_set_thread_functions), read after. */
	quiesce_create_fn create;
	quiesce_join_fn join;
} threads = {
	.lock = PRIM_LOCK_INIT,
	.app = 1,
	.create = pthread_create,
	.join = pthread_join,
};

/* A thread's record inside a runtime scope (quiesce_runtime_enter): never in
 * a slab, so the scan never sees it, and its depth starts far from 0, so the
 * lock fast path only moves it (heap operations in the epoch procedure, a
 * library's locks in a handler) and never reaches the gate. */
#define RUNTIME_REC_DEPTH (1u << 30)

/* The epoch thread: its procedure, its schedule and the requests it
 * serves. */
static struct epoch_thread {
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
	 * CLOSING) bumps it and wakes it. */
	atomic_uint wake_word;
	/* The end of the process by a signal (quiesce_end_on_epoch_thread):
	 * the function the first caller asked for, and how far the epoch
	 * thread has got with it (END_*; futex).  Atomics. */
	_Atomic(quiesce_end_fn) end_fn;
	atomic_uint end_state;
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
} epoch = {
	.lock = PRIM_LOCK_INIT,
	.control_lock = PRIM_LOCK_INIT,
};

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
	/* Under stats.lock (the snapshot is read by the report and the
	 * statistics): stood_ns of the next report, whether this stall was
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

/* Statistics.  The counters the report shows are kept in the report's own
 * struct; the pause and period histograms are base/histogram.h's
 * log-linear ones. */
static struct quiesce_counters {
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
} stats = { .lock = PRIM_LOCK_INIT };

/* The classifier's answers by call site: open addressing, lock-free
 * (a site is claimed with a CAS, its verdict published after it). */
#define SITE_SLOTS 1024

/* PMTHREADS_NOT_FASE: the classifier of call sites and its answers. */
static struct sites {
	_Atomic(quiesce_site_fn) fn;	/* atomic */
	struct {
		_Atomic uintptr_t site;	/* claimed with a CAS */
		atomic_uchar verdict;	/* published (release) after it */
	} cache[SITE_SLOTS];
} sites;

/* The gate and what the fast path in quiesce.h reads (declared there). */
__thread struct quiesce_thread quiesce_self __attribute__((tls_model("initial-exec")));
/* The gate; threads wait on it with a futex. */
atomic_uint quiesce_gate = GATE_OPEN;
/* When membarrier(2) is unavailable fase_enter pays a full fence instead.
 * Until quiesce_init or the first quiesce_start has registered it, fence.
 * Only ever goes from 1 to 0 while other threads may run (fence_settle):
 * 0 means this process is registered, so the epoch thread's membarrier
 * covers every thread whatever it read. */
atomic_uint quiesce_need_fence = 1;
atomic_uint quiesce_exclusions;

bool quiesce_in_final_epoch(void) { return atomic_load(&epoch.in_final_attempt); }
bool quiesce_epoch_awaited(void)
{
	return atomic_load_explicit(&epoch.attempt_awaited, memory_order_relaxed);
}

/* ---- records ---- */

static struct quiesce_rec *claim_record(void)
{
	for (;;) {
		for (struct slab *s = atomic_load_explicit(&threads.slabs, memory_order_acquire); s != NULL;
		     s = atomic_load_explicit(&s->next, memory_order_acquire))
			for (unsigned i = 0; i < RECS_PER_SLAB; i++) {
				unsigned free_ = 0;
				if (atomic_load_explicit(&s->recs[i].in_use, memory_order_relaxed) == 0 &&
				    atomic_compare_exchange_strong(&s->recs[i].in_use, &free_, 1)) {
					atomic_fetch_add(&threads.registered, 1);
					atomic_store_explicit(&s->recs[i].tid, (int)prim_gettid(),
							      memory_order_relaxed);
					return &s->recs[i];
				}
			}
		/* All taken: add a slab, unless another thread just did. */
		prim_lock(&threads.lock);
		struct slab *head = atomic_load(&threads.slabs);
		bool full = true;
		for (struct slab *s = head; s != NULL && full; s = atomic_load(&s->next))
			for (unsigned i = 0; i < RECS_PER_SLAB && full; i++)
				full = atomic_load(&s->recs[i].in_use) != 0;
		if (full) {
			struct slab *n = prim_map_any(sizeof(struct slab));
			if (n == NULL)
				log_fatal("cannot map memory for thread records");
			atomic_store_explicit(&n->next, head, memory_order_relaxed);
			atomic_store_explicit(&threads.slabs, n, memory_order_release);
		}
		prim_unlock(&threads.lock);
	}
}

static inline struct quiesce_rec *my_record(void)
{
	/* A claimed record has depth 0, like quiesce_self.depth of a thread
	 * without one. */
	struct quiesce_rec *r = quiesce_self.rec;
	if (__builtin_expect(r == NULL, 0))
		quiesce_self.rec = r = claim_record();
	return r;
}

void quiesce_thread_start(void)
{
	if (quiesce_self.runtime == 0)
		(void)my_record();
}

void quiesce_thread_exit(void)
{
	struct quiesce_rec *r = quiesce_self.rec;
	if (r == NULL || quiesce_self.runtime != 0)
		return;
	quiesce_self.rec = NULL;
	quiesce_self.depth = 0;
	quiesce_self.n_excluded = 0;
	/* A thread that exits holding locks holds them forever; counting them
	 * would stall every later epoch until abandonment. */
	atomic_store_explicit(&r->depth, 0, memory_order_release);
	atomic_store_explicit(&r->in_use, 0, memory_order_release);
	unsigned was_registered = atomic_fetch_sub(&threads.registered, 1);
	PMT_ASSERT(was_registered > 0);
	if (atomic_load_explicit(&quiesce_gate, memory_order_relaxed) == GATE_CLOSING) {
		atomic_fetch_add(&epoch.wake_word, 1);
		prim_futex_wake(&epoch.wake_word, 1);
	}
}

unsigned quiesce_registered_threads(void) { return atomic_load(&threads.registered); }

unsigned quiesce_busy_threads(void)
{
	unsigned busy = 0;
	for (struct slab *s = atomic_load_explicit(&threads.slabs, memory_order_acquire); s != NULL;
	     s = atomic_load_explicit(&s->next, memory_order_acquire))
		for (unsigned i = 0; i < RECS_PER_SLAB; i++)
			if (atomic_load_explicit(&s->recs[i].depth, memory_order_acquire) != 0)
				busy++;
	return busy;
}

/* ---- the application side ---- */

static void wait_for_open(void)
{
	unsigned s;
	while ((s = atomic_load_explicit(&quiesce_gate, memory_order_acquire)) != GATE_OPEN)
		prim_futex_wait(&quiesce_gate, s, 0);
}

void fase_enter(void) { fase_enter_fast(); }

/* The 0 -> 1 transition when the fast path could not finish it: the thread
 * is unregistered (r NULL), the gate is not open, or fences are needed. */
void fase_enter_slow(struct quiesce_rec *r, const void *lock, const void *site)
{
	if (r == NULL) {
		/* Unregistered, so depth is 0 (the fast path took d != 0); never
		 * in a runtime scope, whose record is always set. */
		r = my_record();
		atomic_store_explicit(&r->lock, (uintptr_t)lock, memory_order_relaxed);
		atomic_store_explicit(&r->site, (uintptr_t)site, memory_order_relaxed);
		quiesce_self.depth = 1;
		atomic_store_explicit(&r->depth, 1, memory_order_relaxed);
	}
	/* depth is 1 here. */
	PMT_ASSERT(quiesce_self.depth == 1 && atomic_load(&r->depth) == 1);
	for (;;) {
		/* As in fase_enter_fast: the store must be visible before the
		 * gate is read; without membarrier only a full fence does it. */
		if (atomic_load_explicit(&quiesce_need_fence, memory_order_relaxed))
			atomic_thread_fence(memory_order_seq_cst);
		else
			atomic_signal_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&quiesce_gate, memory_order_acquire) == GATE_OPEN)
			return;
		/* An epoch is due: back off so it can start, wait, retry. */
		quiesce_self.depth = 0;
		atomic_store_explicit(&r->depth, 0, memory_order_release);
		fase_wake_epoch();
		wait_for_open();
		/* A new FASE: an abandoned attempt may have marked the old
		 * one's record before this thread backed off. */
		atomic_store_explicit(&r->lock, (uintptr_t)lock, memory_order_relaxed);
		quiesce_self.depth = 1;
		atomic_store_explicit(&r->depth, 1, memory_order_relaxed);
	}
}

void fase_wake_epoch(void)
{
	atomic_fetch_add(&epoch.wake_word, 1);
	prim_futex_wake(&epoch.wake_word, 1);
}

void fase_reenter(void)
{
	fase_reenter_lock(NULL, __builtin_return_address(0));
}

void fase_reenter_lock(const void *lock, const void *site)
{
	if (quiesce_self.runtime != 0) {
		/* The private record: a level, never the gate. */
		fase_enter_site(lock, site);
		return;
	}
	struct quiesce_rec *r = my_record();
	unsigned d = quiesce_self.depth;
	PMT_ASSERT(d + 1 != 0);
	quiesce_self.depth = d + 1;
	if (d != 0) {
		atomic_store_explicit(&r->depth, d + 1, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&r->lock, (uintptr_t)lock, memory_order_relaxed);
	atomic_store_explicit(&r->site, (uintptr_t)site, memory_order_relaxed);
	atomic_store_explicit(&r->depth, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&quiesce_gate, memory_order_acquire) == GATE_OPEN)
		return;
	/* CLOSING: the epoch thread scans under epoch.lock, so once we hold it
	 * any later scan sees our depth and waits for us -- we keep the mutex
	 * and proceed.  RUNNING: the epoch thread holds epoch.lock until the
	 * gate reopens, so taking it waits the epoch out without waiting for
	 * any application lock. */
	prim_lock(&epoch.lock);
	prim_unlock(&epoch.lock);
}

void fase_leave(void) { fase_leave_fast(); }

/* ---- locks that are no critical section (PMTHREADS_NOT_FASE) ---- */

enum { VERDICT_UNKNOWN = 0, VERDICT_COUNTS = 1, VERDICT_EXCLUDED = 2 };

void quiesce_set_site_classifier(quiesce_site_fn fn)
{
	atomic_store(&sites.fn, fn);
	atomic_store(&quiesce_exclusions, fn != NULL);
}

static unsigned site_verdict(uintptr_t site)
{
	unsigned h = (unsigned)((site * 0x9e3779b97f4a7c15ULL) >> 54) % SITE_SLOTS;
	for (unsigned i = 0; i < SITE_SLOTS; i++) {
		unsigned at = (h + i) % SITE_SLOTS;
		uintptr_t k = atomic_load_explicit(&sites.cache[at].site, memory_order_acquire);
		if (k == site)
			return atomic_load_explicit(&sites.cache[at].verdict, memory_order_acquire);
		if (k == 0)
			return VERDICT_UNKNOWN;
	}
	return VERDICT_UNKNOWN;
}

static void site_remember(uintptr_t site, unsigned verdict)
{
	unsigned h = (unsigned)((site * 0x9e3779b97f4a7c15ULL) >> 54) % SITE_SLOTS;
	for (unsigned i = 0; i < SITE_SLOTS; i++) {
		unsigned at = (h + i) % SITE_SLOTS;
		uintptr_t k = 0;
		if (atomic_compare_exchange_strong(&sites.cache[at].site, &k, site) || k == site) {
			atomic_store_explicit(&sites.cache[at].verdict, (unsigned char)verdict,
					      memory_order_release);
			return;
		}
	}
	/* Full: asked again next time. */
}

bool fase_excluded_acquire(const void *lock, const void *site)
{
	quiesce_site_fn fn = atomic_load_explicit(&sites.fn, memory_order_acquire);
	/* The runtime's own locks are no FASE anyway, and must not take the
	 * program's entries of excluded[]. */
	if (fn == NULL || lock == NULL || quiesce_self.classifying || quiesce_self.runtime != 0)
		return false;
	unsigned v = site_verdict((uintptr_t)site);
	if (v == VERDICT_UNKNOWN) {
		/* The classifier may take locks of its own (the dynamic
		 * loader's): those count as usual rather than recurse. */
		quiesce_self.classifying = true;
		bool excluded = fn(site);
		quiesce_self.classifying = false;
		v = excluded ? VERDICT_EXCLUDED : VERDICT_COUNTS;
		if (site_verdict((uintptr_t)site) == VERDICT_UNKNOWN) {
			site_remember((uintptr_t)site, v);
			if (excluded)
				atomic_fetch_add_explicit(&stats.not_fase_sites, 1, memory_order_relaxed);
		}
	}
	if (v != VERDICT_EXCLUDED || quiesce_self.n_excluded == QUIESCE_MAX_EXCLUDED)
		return false;
	quiesce_self.excluded[quiesce_self.n_excluded++] = lock;
	return true;
}

bool fase_excluded_release(const void *lock)
{
	unsigned n = quiesce_self.n_excluded;
	for (unsigned i = n; i-- > 0;)
		if (quiesce_self.excluded[i] == lock) {
			quiesce_self.excluded[i] = quiesce_self.excluded[n - 1];
			quiesce_self.n_excluded = n - 1;
			return true;
		}
	return false;
}

bool fase_cond_leave(const void *lock)
{
	for (unsigned i = 0; i < quiesce_self.n_excluded; i++)
		if (quiesce_self.excluded[i] == lock)
			return false;
	fase_leave_fast();
	return true;
}

void fase_pass_gate(void)
{
	if (quiesce_self.depth != 0)
		return;
	fase_enter_fast();
	fase_leave_fast();
}

unsigned fase_depth(void)
{
	/* In a scope the record only looks busy (runtime_rec). */
	return quiesce_self.runtime != 0 ? quiesce_self.app_depth : quiesce_self.depth;
}

/* ---- the runtime's own code (quiesce.h) ---- */

void quiesce_runtime_enter(struct quiesce_scope *s)
{
	/* What this scope found, whatever an interrupted enter or leave had
	 * done of its own steps: restored as found. */
	s->rec = quiesce_self.rec;
	s->depth = quiesce_self.depth;
	s->runtime = quiesce_self.runtime;
	s->app_depth = quiesce_self.app_depth;
	atomic_signal_fence(memory_order_seq_cst);
	if (s->runtime == 0) {
		/* The outermost scope: the application's depth is what the
		 * thread has now, unless an enter this interrupts has already
		 * swapped the record (and set app_depth). */
		if (s->rec != &quiesce_self.runtime_rec)
			quiesce_self.app_depth = s->depth;
		atomic_store_explicit(&quiesce_self.runtime_rec.depth, RUNTIME_REC_DEPTH,
				      memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		quiesce_self.rec = &quiesce_self.runtime_rec;
		quiesce_self.depth = RUNTIME_REC_DEPTH;
	}
	/* Last: until here a handler that interrupts sees runtime == 0 and
	 * makes its own switch, which it undoes before returning. */
	atomic_signal_fence(memory_order_seq_cst);
	quiesce_self.runtime = s->runtime + 1;
	atomic_signal_fence(memory_order_seq_cst);
}

void quiesce_runtime_leave(const struct quiesce_scope *s)
{
	atomic_signal_fence(memory_order_seq_cst);
	/* First: from here a handler that interrupts switches for itself. */
	quiesce_self.runtime = s->runtime;
	atomic_signal_fence(memory_order_seq_cst);
	if (s->runtime == 0) {
		quiesce_self.depth = s->depth;
		quiesce_self.rec = s->rec;
		/* An enter interrupted half-way had swapped the record. */
		if (s->rec == &quiesce_self.runtime_rec)
			atomic_store_explicit(&quiesce_self.runtime_rec.depth, s->depth,
					      memory_order_relaxed);
	}
	quiesce_self.app_depth = s->app_depth;
	atomic_signal_fence(memory_order_seq_cst);
}

unsigned quiesce_runtime_depth(void) { return quiesce_self.runtime; }

void quiesce_runtime_become_app(void)
{
	struct quiesce_scope fresh = { 0 };
	quiesce_runtime_leave(&fresh);
}

/* ---- the epoch thread ---- */

/* Make every thread's earlier depth store visible to this thread. */
static void barrier_all_threads(void)
{
	if (atomic_load_explicit(&quiesce_need_fence, memory_order_relaxed) ||
	    prim_membarrier() != 0)
		atomic_thread_fence(memory_order_seq_cst);
}

static bool all_idle(void)
{
	for (struct slab *s = atomic_load_explicit(&threads.slabs, memory_order_acquire); s != NULL;
	     s = atomic_load_explicit(&s->next, memory_order_acquire))
		for (unsigned i = 0; i < RECS_PER_SLAB; i++)
			if (atomic_load_explicit(&s->recs[i].depth, memory_order_acquire) != 0)
				return false;
	return true;
}

static uint64_t abandon_bound_ns(void)
{
	uint64_t half = (uint64_t)atomic_load(&epoch.interval_ms) * 500000ULL;
	return half > 20000000ULL ? half : 20000000ULL;
}

/* ---- stalls (quiesce.h) ---- */

void quiesce_set_stall_fn(quiesce_stall_fn fn) { atomic_store(&stall.fn, fn); }
void quiesce_set_sync_timeout(unsigned ms) { atomic_store(&stall.sync_timeout_ms, ms > 0 ? ms : 1); }

static uint64_t first_report_ns(void)
{
	/* With a long interval durability stands still that long anyway. */
	uint64_t twice = 2ULL * atomic_load(&epoch.interval_ms) * 1000000ULL;
	return twice > QUIESCE_STALL_REPORT_NS ? twice : QUIESCE_STALL_REPORT_NS;
}

/* At the end of an abandoned attempt, gate still CLOSING: every record with
 * depth > 0 is a FASE that outlasted the bound.  Mark it, unless its owner
 * has just begun another (the CAS fails then). */
static void mark_blockers(void)
{
	stall.n_blockers = 0;
	stall.n_blocked_total = 0;
	for (struct slab *s = atomic_load_explicit(&threads.slabs, memory_order_acquire); s != NULL;
	     s = atomic_load_explicit(&s->next, memory_order_acquire))
		for (unsigned i = 0; i < RECS_PER_SLAB; i++) {
			struct quiesce_rec *r = &s->recs[i];
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
}

/* Whether a FASE that blocked the last attempt has not ended: an attempt
 * now would close the gate against it again. */
static bool still_blocked(void)
{
	for (unsigned i = 0; i < stall.n_blockers; i++) {
		struct quiesce_rec *r = stall.blockers[i];
		if (atomic_load_explicit(&r->depth, memory_order_acquire) != 0 &&
		    (atomic_load_explicit(&r->lock, memory_order_relaxed) & 1) != 0)
			return true;
	}
	return false;
}

static void stall_snapshot(struct quiesce_stall *st, uint64_t now)
{
	memset(st, 0, sizeof(*st));
	st->stalled = true;
	st->stood_ns = now - atomic_load(&stall.last_point_ns);
	st->durable_pause = atomic_load(&epoch.durable_pause);
	st->sync_timeout_ns = (uint64_t)atomic_load(&stall.sync_timeout_ms) * 1000000ULL;
	for (unsigned i = 0; i < stall.n_blockers; i++) {
		struct quiesce_rec *r = stall.blockers[i];
		if (atomic_load_explicit(&r->depth, memory_order_acquire) == 0 ||
		    (atomic_load_explicit(&r->lock, memory_order_relaxed) & 1) == 0)
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
	prim_lock(&epoch.lock);
	bool persisting = epoch.fn != NULL;
	prim_unlock(&epoch.lock);
	return persisting ? fn : NULL;
}

/* Epoch thread, each turn of its loop: report a stall when it is due. */
static void stall_check(uint64_t now)
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
	prim_lock(&stats.lock);
	if (stall.next_report_ns == 0)
		stall.next_report_ns = first_report_ns();
	bool due = fn != NULL && (asked || st.stood_ns >= stall.next_report_ns);
	if (due) {
		if (!stall.reported)
			stats.counts.stalls++;
		stall.reported = true;
		while (stall.next_report_ns <= st.stood_ns)
			stall.next_report_ns *= 2;
	}
	st.next_report_ns = stall.next_report_ns;
	if (st.stood_ns > stats.counts.stall_ns_max)
		stats.counts.stall_ns_max = st.stood_ns;
	stall.now = st;
	prim_unlock(&stats.lock);
	if (due)
		fn(&st, false);
	if (asked)
		answer_ask();
}

/* A quiescent point was reached at now. */
static void stall_clear(uint64_t now)
{
	uint64_t since = atomic_exchange(&stall.last_point_ns, now);
	if (!atomic_exchange(&stall.on, false))
		return;
	stall.n_blockers = 0;
	stall.n_blocked_total = 0;
	struct quiesce_stall st;
	memset(&st, 0, sizeof(st));
	st.stood_ns = now - since;
	st.durable_pause = atomic_load(&epoch.durable_pause);
	prim_lock(&stats.lock);
	bool reported = stall.reported;
	stall.reported = false;
	stall.next_report_ns = first_report_ns();
	if (st.stood_ns > stats.counts.stall_ns_max)
		stats.counts.stall_ns_max = st.stood_ns;
	memset(&stall.now, 0, sizeof(stall.now));
	prim_unlock(&stats.lock);
	atomic_store(&stall.report_asked, false);
	quiesce_stall_fn fn = reported ? stall_reporter() : NULL;
	if (fn != NULL)
		fn(&st, true);
}

bool quiesce_get_stall(struct quiesce_stall *st)
{
	prim_lock(&stats.lock);
	*st = stall.now;
	prim_unlock(&stats.lock);
	if (!st->stalled)
		return false;
	/* How long until now, not until the epoch thread's last look. */
	uint64_t since = atomic_load(&stall.last_point_ns);
	uint64_t now = prim_now_ns();
	if (atomic_load(&stall.on) && now > since)
		st->stood_ns = now - since;
	return true;
}

static void open_gate(void)
{
	atomic_store_explicit(&quiesce_gate, GATE_OPEN, memory_order_release);
	prim_futex_wake(&quiesce_gate, INT_MAX);
}

enum { END_NONE, END_RUNNING, END_DONE };

/* On the epoch thread, between attempts: the end the handler asked for.  Does
 * not return once it has run. */
static void end_if_asked(void)
{
	quiesce_end_fn fn = atomic_load(&epoch.end_fn);
	if (fn == NULL)
		return;
	atomic_store(&epoch.end_state, END_RUNNING);
	fn();
	atomic_store(&epoch.end_state, END_DONE);
	prim_futex_wake(&epoch.end_state, INT_MAX);
	/* The handler ends the process now; this thread has nothing left to
	 * do, and must not start another epoch on a closed pool. */
	for (;;)
		prim_futex_wait(&epoch.end_state, END_DONE, 0);
}

bool quiesce_end_on_epoch_thread(quiesce_end_fn fn, uint64_t bound_ns)
{
	if (!atomic_load(&epoch.running) || atomic_load(&epoch.stopping) ||
	    quiesce_self.on_epoch_thread)
		return false;
	quiesce_end_fn none = NULL;
	(void)atomic_compare_exchange_strong(&epoch.end_fn, &none, fn);
	atomic_fetch_add(&epoch.wake_word, 1);
	prim_futex_wake(&epoch.wake_word, 1);
	uint64_t until = prim_now_ns() + bound_ns;
	for (;;) {
		unsigned st = atomic_load(&epoch.end_state);
		if (st == END_DONE)
			return true;
		/* Stopped by an exit before it began ours: that exit ends the
		 * process its own way. */
		if (st == END_NONE && !atomic_load(&epoch.running))
			return false;
		uint64_t now = prim_now_ns();
		if (now >= until)
			return false;
		uint64_t left = until - now;
		prim_futex_wait(&epoch.end_state, st, left < 10000000ULL ? left : 10000000ULL);
	}
}

/* How an attempt at a quiescent point ended: abandoned (a lock held too
 * long), ended (its image durable, or failed for good: nothing to retry), or
 * carried over (to be completed at once). */
enum attempt { ATTEMPT_ABANDONED, ATTEMPT_ENDED, ATTEMPT_CARRIED };

/* One attempt at a quiescent point.  retry: the previous one was carried
 * over and this one completes it -- not the start of a new period. */
static enum attempt attempt_epoch(bool retry)
{
	unsigned covers = atomic_load(&epoch.requested);
	bool awaited = covers != atomic_load(&epoch.served);
	uint64_t t0 = prim_now_ns();
	uint64_t bound = abandon_bound_ns();
	atomic_store(&quiesce_gate, GATE_CLOSING);
	prim_lock(&stats.lock);
	stats.counts.gate_closings++;
	prim_unlock(&stats.lock);
	barrier_all_threads();
	uint64_t sleep_ns = 20000;
	for (;;) {
		unsigned seen = atomic_load(&epoch.wake_word);
		prim_lock(&epoch.lock);
		if (all_idle()) {
			atomic_store(&quiesce_gate, GATE_RUNNING);
			/* Numbered before the procedure collects: a writer that
			 * reads the old number stamps its output with this one,
			 * and every heap write it made is collected here. */
			atomic_store(&epoch.working, true);
			uint64_t this_pause = atomic_fetch_add(&epoch.pauses, 1) + 1;
			/* Taken under epoch.lock, so that quiesce_start swapping
			 * the procedure cannot pair one epoch's fn with another's
			 * after. */
			quiesce_epoch_fn fn = epoch.fn;
			quiesce_after_fn after = epoch.after;
			void *arg = epoch.arg;
			atomic_store_explicit(&epoch.attempt_awaited, awaited, memory_order_relaxed);
			if (fn != NULL)
				fn(arg);
			open_gate();
			prim_unlock(&epoch.lock);
			/* The pause is what the application waited for: the gate
			 * is open now, whatever after still does. */
			uint64_t pause = prim_now_ns() - t0;
			stall_clear(t0 + pause);
			prim_lock(&stats.lock);
			stats.counts.epochs++;
			stats.counts.pause_ns_total += pause;
			if (pause > stats.counts.pause_ns_max)
				stats.counts.pause_ns_max = pause;
			stats.pause_hist[hist_bucket_of(pause)]++;
			/* For a retry: since the attempt it completes began; only
			 * the attempts that start a period make the histogram. */
			epoch.last_period_ns = epoch.last_start_ns != 0 ? t0 - epoch.last_start_ns : 0;
			if (epoch.last_period_ns != 0 && !retry) {
				stats.periods++;
				stats.period_total += epoch.last_period_ns;
				if (epoch.last_period_ns > stats.counts.period_ns_max)
					stats.counts.period_ns_max = epoch.last_period_ns;
				stats.period_hist[hist_bucket_of(epoch.last_period_ns)]++;
			}
			prim_unlock(&stats.lock);
			if (!retry)
				epoch.last_start_ns = t0;
			epoch.last_pause_ns = pause;
			/* On this thread, so the next quiescent point (which
			 * this thread also runs) cannot start before it is
			 * done: epochs stay ordered and never overlap. */
			enum quiesce_outcome o = after == NULL ? QUIESCE_DURABLE : after(arg);
			atomic_store_explicit(&epoch.attempt_awaited, false, memory_order_relaxed);
			atomic_store(&epoch.working, false);
			if (o == QUIESCE_CARRIED)
				return ATTEMPT_CARRIED;
			if (o == QUIESCE_DURABLE)
				atomic_store(&epoch.durable_pause, this_pause);
			if (o == QUIESCE_FAILED)
				atomic_store(&epoch.failed_for_good, true);
			atomic_store_explicit(&epoch.served, covers, memory_order_release);
			prim_futex_wake(&epoch.served, INT_MAX);
			return ATTEMPT_ENDED;
		}
		prim_unlock(&epoch.lock);
		uint64_t waited = prim_now_ns() - t0;
		if (waited >= bound) {
			mark_blockers();
			atomic_store(&stall.on, true);
			open_gate();
			prim_lock(&stats.lock);
			stats.counts.abandoned++;
			stats.counts.abandoned_ns_total += waited;
			prim_unlock(&stats.lock);
			log_msg(LOG_DEBUG, "epoch abandoned: a thread held a lock for %llu ms",
				(unsigned long long)(waited / 1000000));
			return ATTEMPT_ABANDONED;
		}
		/* Threads leaving their last lock wake us; the timed wait only
		 * covers wake-ups lost to the relaxed check in fase_leave.  No
		 * sched_yield: on a loaded machine it gives the processor away
		 * for a whole time slice. */
		uint64_t left = bound - waited;
		prim_futex_wait(&epoch.wake_word, seen, sleep_ns < left ? sleep_ns : left);
		if (sleep_ns < 1000000)
			sleep_ns *= 2;
	}
}

/* ---- the tick (quiesce.h) ---- */

void quiesce_set_tick(quiesce_tick_fn fn, uint64_t period_ns)
{
	atomic_store(&epoch.tick_period_ns, fn != NULL ? period_ns : 0);
	atomic_store(&epoch.tick, fn);
	/* A wait already under way may have no bound: look again now. */
	atomic_fetch_add(&epoch.wake_word, 1);
	prim_futex_wake(&epoch.wake_word, 1);
}

/* The epoch thread's wait for wake_word, bounded by the tick's period. */
static void loop_wait(unsigned seen, uint64_t ns)
{
	uint64_t period = atomic_load(&epoch.tick_period_ns);
	if (period != 0 && ns > period)
		ns = period;
	prim_futex_wait(&epoch.wake_word, seen, ns);
}

static void loop_tick(void)
{
	quiesce_tick_fn fn = atomic_load(&epoch.tick);
	if (fn != NULL)
		fn();
}

/* ---- the end of the process ---- */

void quiesce_set_last_thread_fn(quiesce_last_thread_fn fn)
{
	pthread_sigmask(SIG_BLOCK, NULL, &threads.start_mask);
	atomic_store(&threads.last_thread_fn, fn);
}

void quiesce_app_thread_added(void)
{
	atomic_fetch_add(&threads.app, 1);
}

void quiesce_app_thread_gone(void)
{
	if (atomic_fetch_sub(&threads.app, 1) == 1) {
		atomic_fetch_add(&epoch.wake_word, 1);
		prim_futex_wake(&epoch.wake_word, 1);
	}
}

/* The runtime's threads run on stacks of its own memory (prim_map_any):
 * counted in its share of RLIMIT_AS and RLIMIT_DATA (runtime/memory_limits.h)
 * where glibc's would come out of the program's.  INTERNAL_STACK bytes each,
 * below them a read-only page that an overflow faults on. */
#define INTERNAL_STACK (8u << 20)
#define INTERNAL_STACKS_MAX 16
static struct {
	prim_lock_t lock;
	struct internal_stack {
		pthread_t th;
		unsigned char *map;	/* NULL: the slot is free */
		size_t len;
	} slot[INTERNAL_STACKS_MAX];
	/* The function and argument a new runtime thread starts with
	 * (internal_main), handed over under start.lock: the creator waits
	 * until the thread has taken them (no allocation, which may be the
	 * persistent heap's). */
	struct {
		prim_lock_t lock;
		void *(*fn)(void *);
		void *arg;
		atomic_uint taken;	/* futex */
	} start;
} stacks = { .lock = PRIM_LOCK_INIT, .start.lock = PRIM_LOCK_INIT };

/* A stack in a free slot (its index), or -1: then glibc's. */
static int stack_take(pthread_attr_t *attr)
{
	size_t page = prim_page_size(), len = INTERNAL_STACK + page;
	prim_lock(&stacks.lock);
	int k = 0;
	while (k < INTERNAL_STACKS_MAX && stacks.slot[k].map != NULL)
		k++;
	unsigned char *map = k < INTERNAL_STACKS_MAX ? prim_map_any(len) : NULL;
	if (map == NULL || prim_protect(map, page, false) != 0 ||
	    pthread_attr_setstack(attr, map + page, INTERNAL_STACK) != 0) {
		if (map != NULL)
			prim_unmap(map, len);
		prim_unlock(&stacks.lock);
		return -1;
	}
	stacks.slot[k] = (struct internal_stack){ .map = map, .len = len };
	prim_unlock(&stacks.lock);
	return k;
}

/* Every runtime thread's first function: a runtime scope from the first
 * instruction to the last (quiesce_runtime_enter), so that no lock it or a
 * library takes for it is ever a FASE or waits at the gate. */
static void *internal_main(void *unused)
{
	(void)unused;
	struct quiesce_scope s;
	quiesce_runtime_enter(&s);
	void *(*fn)(void *) = stacks.start.fn;
	void *arg = stacks.start.arg;
	atomic_store_explicit(&stacks.start.taken, 1, memory_order_release);
	prim_futex_wake(&stacks.start.taken, 1);
	void *ret = fn(arg);
	quiesce_runtime_leave(&s);
	return ret;
}

int quiesce_create_internal_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	/* Except SIGBUS: the write-back's store into a pool page the file
	 * system cannot provide raises it, and the runtime's handler turns
	 * it into an error (nvm.h); blocked, it would end the process. */
	sigdelset(&all, SIGBUS);
	pthread_attr_t attr;
	bool have_attr = pthread_attr_init(&attr) == 0;
	int k = have_attr ? stack_take(&attr) : -1;
	pthread_sigmask(SIG_SETMASK, &all, &old);
	atomic_fetch_add(&threads.internal, 1);
	prim_lock(&stacks.start.lock);
	stacks.start.fn = fn;
	stacks.start.arg = arg;
	atomic_store_explicit(&stacks.start.taken, 0, memory_order_relaxed);
	int e = threads.create(th, k >= 0 ? &attr : NULL, internal_main, NULL);
	if (e != 0)
		atomic_fetch_sub(&threads.internal, 1);
	else
		while (atomic_load_explicit(&stacks.start.taken, memory_order_acquire) == 0)
			prim_futex_wait(&stacks.start.taken, 0, 0);
	prim_unlock(&stacks.start.lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (have_attr)
		pthread_attr_destroy(&attr);
	if (k >= 0) {
		prim_lock(&stacks.lock);
		if (e == 0) {
			stacks.slot[k].th = *th;
		} else {
			prim_unmap(stacks.slot[k].map, stacks.slot[k].len);
			stacks.slot[k].map = NULL;
		}
		prim_unlock(&stacks.lock);
	}
	return e;
}

int quiesce_join_internal_thread(pthread_t th, void **ret)
{
	int e = threads.join(th, ret);
	if (e != 0)
		return e;
	/* Ended and joined: nothing runs on its stack any more. */
	prim_lock(&stacks.lock);
	for (int k = 0; k < INTERNAL_STACKS_MAX; k++) {
		if (stacks.slot[k].map != NULL && pthread_equal(stacks.slot[k].th, th)) {
			prim_unmap(stacks.slot[k].map, stacks.slot[k].len);
			stacks.slot[k].map = NULL;
		}
	}
	prim_unlock(&stacks.lock);
	return 0;
}

void quiesce_internal_thread_done(void)
{
	atomic_fetch_sub(&threads.internal, 1);
}

/* On the epoch thread, while no application thread is counted: whether
 * only the runtime's threads are left, and if so the end of the process
 * (never returns then).  A thread counted as the runtime's that is still
 * finishing, or one the wrapper never saw, only delays it. */
static void check_last_thread(void)
{
	quiesce_last_thread_fn fn = atomic_load(&threads.last_thread_fn);
	if (fn == NULL)
		return;
	int live = prim_live_threads();
	if (live < 0 || live > atomic_load(&threads.internal))
		return;
	/* The exit handlers (the program's too) run here: with the mask the
	 * program started with, as on its own last thread. */
	pthread_sigmask(SIG_SETMASK, &threads.start_mask, NULL);
	/* The program's exit handlers run here as on its own last thread:
	 * their locks are FASEs, their allocations the program's. */
	quiesce_runtime_become_app();
	fn();
}

/* Shutdown's final epoch; an attempt carried over is completed as at any
 * other time (the pipeline bounds how many in a row there can be). */


static void final_epoch(void)
{
	/* Exit never waits for a lock held at exit: not the exiting thread's
	 * own, not one that has blocked every attempt so far. */
	if (atomic_load(&epoch.final_skip) || still_blocked()) {
		log_msg(LOG_INFO, "no final epoch: %s holds a lock at exit",
			atomic_load(&epoch.final_skip) ? "the exiting thread" : "a thread that blocked the "
			"last attempt still");
		return;
	}
	atomic_store(&epoch.in_final_attempt, true);
	enum attempt a = attempt_epoch(false);
	for (int tries = 0; a == ATTEMPT_CARRIED && tries < 16; tries++)
		a = attempt_epoch(true);
	atomic_store(&epoch.in_final_attempt, false);
}

static void *epoch_main(void *unused)
{
	(void)unused;
	/* In a runtime scope already (quiesce_create_internal_thread). */
	quiesce_self.on_epoch_thread = true;

	uint64_t backoff = 0;
	uint64_t next_due = prim_now_ns() + (uint64_t)atomic_load(&epoch.interval_ms) * 1000000ULL;
	uint64_t not_before = 0;	/* after an abandoned attempt */
	/* The last epoch was carried over (its write-back saw the program
	 * write pages it read): complete it at once, while the pages written
	 * since are few -- each retry's batch is what the program wrote during
	 * the previous write-back, so the retries shrink. */
	bool retry = false;
	uint64_t last_thread_poll = 1000000;	/* ns, doubled while threads remain */
	while (!atomic_load(&epoch.stopping)) {
		unsigned seen = atomic_load(&epoch.wake_word);
		end_if_asked();
		uint64_t now = prim_now_ns();
		bool sync_pending = atomic_load(&epoch.requested) != atomic_load(&epoch.served);
		if (atomic_load(&epoch.failed_for_good)) {
			/* A pause would persist nothing: release what waits
			 * for one (its caller reports the error) and stay
			 * idle, each interval, but for the last-thread check. */
			if (sync_pending) {
				atomic_store_explicit(&epoch.served, atomic_load(&epoch.requested),
						      memory_order_release);
				prim_futex_wake(&epoch.served, INT_MAX);
				sync_pending = false;
			}
			retry = false;
			if (next_due <= now)
				next_due = now + (uint64_t)atomic_load(&epoch.interval_ms) * 1000000ULL;
		}
		uint64_t due = sync_pending || retry ? (not_before > now ? not_before : now) : next_due;
		if (atomic_load(&threads.app) <= 0) {
			check_last_thread();
			if (now < due && due - now > last_thread_poll)
				due = now + last_thread_poll;
			if (last_thread_poll < 64000000)
				last_thread_poll *= 2;
		} else {
			last_thread_poll = 1000000;
		}
		stall_check(now);
		loop_tick();
		if (now < due || atomic_load(&epoch.failed_for_good)) {
			if (now < due)
				loop_wait(seen, due - now);
			continue;
		}
		uint64_t interval_ns = (uint64_t)atomic_load(&epoch.interval_ms) * 1000000ULL;
		if (still_blocked()) {
			/* No gate churn: the FASE that blocked the last attempt
			 * would block this one too.  Look again soon (a
			 * sync waits), count one deferral per interval. */
			if (now >= next_due) {
				prim_lock(&stats.lock);
				stats.counts.attempts_deferred++;
				prim_unlock(&stats.lock);
				next_due = now + interval_ns;
			}
			uint64_t poll = interval_ns / 10;
			poll = poll < 1000000 ? 1000000 : poll > 10000000 ? 10000000 : poll;
			loop_wait(seen, poll);
			continue;
		}
		uint64_t started = now;
		enum attempt a = attempt_epoch(retry);
		if (a != ATTEMPT_ABANDONED) {
			backoff = 0;
			not_before = 0;
			bool was_retry = retry;
			retry = a == ATTEMPT_CARRIED;
			/* A retry keeps the schedule the carried-over attempt
			 * set for its period. */
			if (was_retry)
				continue;
			/* Fixed rate: the next epoch is due one interval after
			 * this one started (or was due), not after its write-back
			 * ended -- else every epoch stretches the period by its
			 * own persist time.  A sync epoch restarts the schedule. */
			uint64_t base = !sync_pending && next_due <= started ? next_due : started;
			next_due = base + interval_ns;
			now = prim_now_ns();
			if (now > next_due) {
				/* The write-back overran the interval: a backlog.
				 * Start the next epoch at once and say so. */
				prim_lock(&stats.lock);
				stats.counts.late_epochs++;
				stats.counts.late_ns_total += now - next_due;
				prim_unlock(&stats.lock);
				next_due = now;
			}
		} else {
			/* Retry soon, then less often while the lock stays held:
			 * every attempt stalls new FASEs for the bound. */
			backoff = backoff == 0 ? 5000000ULL : backoff * 2;
			if (backoff > interval_ns)
				backoff = interval_ns;
			not_before = next_due = prim_now_ns() + backoff;
		}
	}
	if (atomic_load(&epoch.final_requested) && !atomic_load(&epoch.failed_for_good))
		final_epoch();
	quiesce_internal_thread_done();
	return NULL;
}

void quiesce_set_thread_functions(quiesce_create_fn create, quiesce_join_fn join)
{
	threads.create = create != NULL ? create : pthread_create;
	threads.join = join != NULL ? join : pthread_join;
}


/* Register this process for membarrier(2) unless it is already, and say
 * whether the lock path may skip its fence.  Never sets quiesce_need_fence
 * while it is 0: a thread may have taken the fast path on that value
 * without a fence, which only the registration makes safe. */
static bool fence_settle(void)
{
	if (atomic_load(&quiesce_need_fence) != 0 && prim_membarrier_register())
		atomic_store(&quiesce_need_fence, 0);
	return atomic_load(&quiesce_need_fence) == 0;
}

void quiesce_init(void)
{
	(void)fence_settle();
}

int quiesce_start(unsigned ms, quiesce_epoch_fn fn, void *arg)
{
	return quiesce_start_split(ms, fn, NULL, arg);
}

int quiesce_start_split(unsigned ms, quiesce_epoch_fn fn, quiesce_after_fn after, void *arg)
{
	if (ms == 0) {
		err_set("quiesce: the epoch interval must be at least 1 ms");
		return -1;
	}
	prim_lock(&epoch.control_lock);
	if (atomic_load(&epoch.running)) {
		/* Swap the procedure between epochs, never during one. */
		prim_lock(&epoch.lock);
		epoch.fn = fn;
		epoch.after = after;
		epoch.arg = arg;
		atomic_store(&epoch.interval_ms, ms);
		atomic_store(&epoch.failed_for_good, false);	/* a new procedure */
		prim_unlock(&epoch.lock);
		atomic_fetch_add(&epoch.wake_word, 1);
		prim_futex_wake(&epoch.wake_word, 1);
		prim_unlock(&epoch.control_lock);
		return 0;
	}
	if (!fence_settle())
		log_msg(LOG_INFO, "membarrier(2) is unavailable; the lock path uses a full fence");
	epoch.fn = fn;
	epoch.after = after;
	epoch.arg = arg;
	atomic_store(&epoch.interval_ms, ms);
	atomic_store(&epoch.stopping, false);
	atomic_store(&epoch.final_requested, false);
	atomic_store(&epoch.final_skip, false);
	atomic_store(&epoch.failed_for_good, false);
	atomic_store(&stall.last_point_ns, prim_now_ns());
	prim_lock(&stats.lock);
	stall.next_report_ns = first_report_ns();
	prim_unlock(&stats.lock);
	int e = quiesce_create_internal_thread(&epoch.thread, epoch_main, NULL);
	if (e != 0) {
		prim_unlock(&epoch.control_lock);
		err_set_errno(e, "quiesce: cannot create the epoch thread");
		return -1;
	}
	atomic_store(&epoch.running, true);
	prim_unlock(&epoch.control_lock);
	return 0;
}

void quiesce_stop(bool final)
{
	prim_lock(&epoch.control_lock);
	if (!atomic_load(&epoch.running)) {
		prim_unlock(&epoch.control_lock);
		return;
	}
	atomic_store(&epoch.final_requested, final);
	atomic_store(&epoch.final_skip, fase_depth() != 0);
	atomic_store(&epoch.stopping, true);
	if (quiesce_self.on_epoch_thread) {
		/* exit() on the epoch thread (quiesce_set_last_thread_fn): it
		 * cannot join itself; the final attempt runs here, and the
		 * thread ends with the process.  The exit handlers run as the
		 * application's (check_last_thread); the epoch as the
		 * runtime's. */
		if (final) {
			struct quiesce_scope s;
			quiesce_runtime_enter(&s);
			final_epoch();
			quiesce_runtime_leave(&s);
		}
		atomic_store(&epoch.running, false);
		prim_futex_wake(&epoch.served, INT_MAX);
		prim_unlock(&epoch.control_lock);
		return;
	}
	atomic_fetch_add(&epoch.wake_word, 1);
	prim_futex_wake(&epoch.wake_word, 1);
	quiesce_join_internal_thread(epoch.thread, NULL);
	atomic_store(&epoch.running, false);
	/* Sync waiters learn that no epoch will come. */
	prim_futex_wake(&epoch.served, INT_MAX);
	prim_unlock(&epoch.control_lock);
}

bool quiesce_running(void) { return atomic_load(&epoch.running); }

int quiesce_sync(void)
{
	if (fase_depth() != 0) {
		err_set("pmthreads_sync called while holding a lock: no quiescent point can "
			"be reached until it is released");
		errno = EDEADLK;
		return -1;
	}
	if (!atomic_load(&epoch.running)) {
		err_set("pmthreads_sync: no epoch thread is running");
		errno = ESRCH;
		return -1;
	}
	prim_lock(&stats.lock);
	stats.counts.syncs++;
	prim_unlock(&stats.lock);
	unsigned mine = atomic_fetch_add(&epoch.requested, 1) + 1;
	atomic_fetch_add(&epoch.wake_word, 1);
	prim_futex_wake(&epoch.wake_word, 1);
	/* The timeout measures a stall: time in which no quiescent point is
	 * reached while the epoch thread is not working either.  A write-back
	 * under way, however slow (a device, an emulated latency, a batch of
	 * a whole heap), is progress and is waited for; its failure is an
	 * error of its own (EIO, through the caller). */
	uint64_t timeout = (uint64_t)atomic_load(&stall.sync_timeout_ms) * 1000000ULL;
	uint64_t points = atomic_load(&epoch.pauses), since = prim_now_ns();
	for (;;) {
		unsigned s = atomic_load_explicit(&epoch.served, memory_order_acquire);
		if ((int)(s - mine) >= 0)
			return 0;
		if (!atomic_load(&epoch.running) || atomic_load(&epoch.stopping)) {
			err_set("pmthreads_sync: the epoch thread stopped");
			errno = ESRCH;
			return -1;
		}
		uint64_t now = prim_now_ns(), p = atomic_load(&epoch.pauses);
		if (p != points || atomic_load(&epoch.working)) {
			points = p;
			since = now;
		} else if (now - since >= timeout) {
			prim_lock(&stats.lock);
			stats.counts.sync_timeouts++;
			prim_unlock(&stats.lock);
			/* The stall report, now, from the epoch thread, out
			 * before this returns (the program may exit next). */
			unsigned answered = atomic_load(&stall.reports_answered);
			atomic_store(&stall.report_asked, true);
			atomic_fetch_add(&epoch.wake_word, 1);
			prim_futex_wake(&epoch.wake_word, 1);
			uint64_t ask_end = prim_now_ns() + 1000000000ULL;
			while (atomic_load(&stall.reports_answered) == answered && atomic_load(&epoch.running) &&
			       prim_now_ns() < ask_end)
				prim_futex_wait(&stall.reports_answered, answered, 10000000ULL);
			/* The cause as it stands: attempts abandoned or the gate
			 * closing against a FASE, or else none that is a lock. */
			if (atomic_load(&stall.on) || atomic_load(&quiesce_gate) == GATE_CLOSING)
				err_set("pmthreads_sync: no quiescent point for %llu ms: a thread "
					"holds a lock (see the stall report on standard error; "
					"PMTHREADS_SYNC_TIMEOUT_MS sets the bound)",
					(unsigned long long)(timeout / 1000000));
			else
				err_set("pmthreads_sync: no quiescent point for %llu ms, and no thread "
					"was seen holding a lock: the epoch thread did not get to run "
					"(an overloaded machine?); PMTHREADS_SYNC_TIMEOUT_MS sets the "
					"bound", (unsigned long long)(timeout / 1000000));
			errno = ETIMEDOUT;
			return -1;
		}
		uint64_t left = timeout - (now - since);
		prim_futex_wait(&epoch.served, s, left < 100000000ULL ? left : 100000000ULL);
	}
}

uint64_t quiesce_pauses(void) { return atomic_load(&epoch.pauses); }
uint64_t quiesce_durable_pause(void) { return atomic_load(&epoch.durable_pause); }
uint64_t quiesce_current_pause(void) { return atomic_load(&epoch.pauses); }

void quiesce_request_epoch(void)
{
	/* Like quiesce_sync's request, without the wait: the epoch thread
	 * starts an epoch at once while requested != served.  The wake-up
	 * costs a system call, so only when no request is pending already
	 * (a pending one is served by an epoch that closes the gate after
	 * this bump was made, or by an earlier one that leaves requested !=
	 * served behind it, which the loop sees). */
	unsigned before = atomic_fetch_add(&epoch.requested, 1);
	if (before == atomic_load(&epoch.served)) {
		atomic_fetch_add(&epoch.wake_word, 1);
		prim_futex_wake(&epoch.wake_word, 1);
	}
}

void quiesce_atfork_child(void)
{
	/* Only the forking thread exists here: the parent's epoch thread, the
	 * other threads' records and the locks they held are not the child's.
	 * Each struct of the module is reset here and nowhere else. */
	threads.lock = (prim_lock_t)PRIM_LOCK_INIT;
	/* The parent's threads are not here; their stacks stay mapped (the
	 * child's copy of them), their slots are free. */
	stacks.lock = (prim_lock_t)PRIM_LOCK_INIT;
	memset(stacks.slot, 0, sizeof(stacks.slot));
	stacks.start.lock = (prim_lock_t)PRIM_LOCK_INIT;
	unsigned n = 0;
	for (struct slab *s = atomic_load(&threads.slabs); s != NULL; s = atomic_load(&s->next))
		for (unsigned i = 0; i < RECS_PER_SLAB; i++) {
			struct quiesce_rec *r = &s->recs[i];
			if (r == quiesce_self.rec) {
				atomic_store(&r->tid, (int)prim_gettid());
				n++;
				continue;
			}
			atomic_store(&r->depth, 0);
			atomic_store(&r->in_use, 0);
		}
	atomic_store(&threads.registered, n);
	atomic_store(&threads.app, 1);
	atomic_store(&threads.internal, 0);
	/* A registration the kernel does not carry into the child is made
	 * again; without it, fence (no other thread runs yet to have read 0). */
	if (atomic_load(&quiesce_need_fence) == 0 && !prim_membarrier_register())
		atomic_store(&quiesce_need_fence, 1);

	/* No epoch thread; the procedure and the interval stay for a
	 * quiesce_start in the child. */
	epoch.lock = (prim_lock_t)PRIM_LOCK_INIT;
	epoch.control_lock = (prim_lock_t)PRIM_LOCK_INIT;
	atomic_store(&epoch.running, false);
	atomic_store(&epoch.stopping, false);
	atomic_store(&epoch.failed_for_good, false);
	atomic_store(&epoch.working, false);
	atomic_store(&epoch.tick, NULL);
	atomic_store(&epoch.tick_period_ns, 0);
	atomic_store(&epoch.requested, 0);
	atomic_store(&epoch.served, 0);
	atomic_store(&epoch.end_fn, NULL);
	atomic_store(&epoch.end_state, END_NONE);
	atomic_store(&quiesce_gate, GATE_OPEN);

	/* The counters under the lock start again; the relaxed atomics after
	 * them are kept. */
	memset(&stats, 0, offsetof(struct quiesce_counters, not_fase_sites));

	stall.n_blockers = 0;
	stall.n_blocked_total = 0;
	atomic_store(&stall.on, false);
	stall.reported = false;
	memset(&stall.now, 0, sizeof(stall.now));
}

void quiesce_note_blocking_in_fase(const char *call)
{
	if (atomic_fetch_add_explicit(&stats.blocking_in_fase, 1, memory_order_relaxed) < 8)
		log_msg(LOG_INFO, "a thread blocks in %s while holding a lock: epochs cannot start "
			"until it returns (attempts are abandoned and retried meanwhile)", call);
}

uint64_t quiesce_last_pause_ns(void)
{
	return epoch.last_pause_ns;
}

uint64_t quiesce_last_period_ns(void)
{
	return epoch.last_period_ns;
}

void quiesce_get_stats(struct quiesce_stats *st)
{
	prim_lock(&stats.lock);
	*st = stats.counts;
	st->pause_ns_p50 = hist_percentile(stats.pause_hist, st->epochs, 50, st->pause_ns_max);
	st->pause_ns_p99 = hist_percentile(stats.pause_hist, st->epochs, 99, st->pause_ns_max);
	st->period_ns_p50 = hist_percentile(stats.period_hist, stats.periods, 50, st->period_ns_max);
	st->period_ns_p99 = hist_percentile(stats.period_hist, stats.periods, 99, st->period_ns_max);
	st->period_ns_mean = stats.periods != 0 ? stats.period_total / stats.periods : 0;
	prim_unlock(&stats.lock);
	st->stalled = atomic_load(&stall.on);
	if (st->stalled) {
		uint64_t now = prim_now_ns(), since = atomic_load(&stall.last_point_ns);
		st->stall_ns = now > since ? now - since : 0;
		if (st->stall_ns > st->stall_ns_max)
			st->stall_ns_max = st->stall_ns;
	}
	st->not_fase_sites = atomic_load_explicit(&stats.not_fase_sites, memory_order_relaxed);
	st->membarrier = !atomic_load(&quiesce_need_fence);
	st->blocking_in_fase = atomic_load_explicit(&stats.blocking_in_fase, memory_order_relaxed);
}
