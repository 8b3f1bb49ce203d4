/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * quiesce -- failure-atomic sections, the gate and the epoch thread.
 *
 * Owns: each thread's lock depth, the global quiescent point, the epoch
 * trigger (every interval, or on demand), durability waits; the runtime's
 * own threads, and the end of the process when the last application thread
 * has ended (quiesce_set_last_thread_fn).
 *
 * A thread is inside a FASE while its depth > 0.  Entering the first lock
 * (depth 0 -> 1) passes the gate: while an epoch is due the thread waits
 * there.  The epoch starts when no registered thread has depth > 0; threads
 * outside FASEs never delay it.  The lock fast path touches only the
 * thread's own record (no shared read-modify-write); the epoch thread pairs
 * it with membarrier(2).  An epoch that cannot start within a bound (a thread
 * blocked while holding a lock) is abandoned, counted and retried.
 *
 * The gate: OPEN -> CLOSING (epoch due: new FASEs wait; the epoch thread
 * waits for every depth to reach 0) -> RUNNING (the epoch procedure runs;
 * every thread is outside its FASEs) -> OPEN.  A CLOSING phase that lasts
 * longer than the bound goes straight back to OPEN (abandoned).
 */
#ifndef PMT_QUIESCE_H
#define PMT_QUIESCE_H

#include "base/assert.h"
#include "base/stats_fields.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A lock was (about to be) acquired / released by the calling thread.  The
 * preload wrappers call these around the real pthread functions; the heap
 * calls them around each allocator operation.  fase_enter may block at the
 * gate when depth is 0.  A thread's first call registers it (records come
 * from the runtime's own memory, never from malloc).  Both are no-ops on the
 * epoch thread.  fase_leave at depth 0 does nothing (a lock taken before the
 * interposition was in place).  C callers on a hot path use the inline
 * fase_enter_fast / fase_leave_fast below, which behave identically. */
void fase_enter(void);
void fase_leave(void);

/* The calling thread has just acquired a lock it could not give up instead
 * of waiting at the gate: the mutex that glibc re-acquires on return from
 * pthread_cond_wait.  Never waits at the gate for an epoch that has not yet
 * started (a thread the epoch waits for may be blocked on that mutex); waits
 * only while an epoch procedure is running, which needs no application lock.
 * Counts as one level of depth, like fase_enter. */
void fase_reenter(void);
/* The same, saying which lock and from where (the stall report names
 * them). */
void fase_reenter_lock(const void *lock, const void *site);
/* A condition wait on lock is about to release it: leaves its level and
 * returns true, or returns false when lock is one the user said is no
 * critical section (it took no level; fase_reenter_lock is then not called
 * on return). */
bool fase_cond_leave(const void *lock);

/* The calling thread is about to wait for its turn in a sequence and will
 * then hold the turn like a lock (OpenMP's ordered construct): the thread
 * whose turn comes first may itself be waiting at the gate, so waiting for a
 * turn inside a FASE would hold every epoch up until it is abandoned.  This
 * passes the gate now, while the thread holds nothing (waits while an epoch is
 * due, at depth 0 only); the caller then waits for the turn outside any FASE
 * and takes its level with fase_reenter once the turn is given.  At most the
 * threads that passed the gate before it closed can still enter that way, so
 * the epoch is not starved. */
void fase_pass_gate(void);

/* The calling thread's current depth (0: outside any FASE): the
 * application's, also inside a runtime scope (0 on the runtime's threads). */
unsigned fase_depth(void);

/*
 * The runtime's own code.  A lock the runtime takes, or a library takes on its
 * behalf (libunwind, libdw, the dynamic loader, libpmem, a malloc arena), on
 * one of its threads or in one of its signal handlers, is no failure-atomic
 * section and must never wait at the gate: the epoch that closed it may be
 * waiting for that very code (a fault handler the tracker's collection waits
 * out; the release thread an epoch's output waits for).  So every entry into
 * the runtime that can run while the gate is closed is a scope: the runtime's
 * threads from their first instruction (quiesce_create_internal_thread), its
 * signal handlers around all they do (runtime/startup.h), the exit path.
 * Inside a scope the thread's record is swapped for a private one whose depth
 * never comes near 0, as the epoch thread's always was: the lock wrappers'
 * fast path is unchanged and counts nothing the scan sees, and the gate is
 * never read.  The application's record and depth are kept in *s (on the
 * caller's stack, so a handler interrupting enter or leave half-way saves and
 * restores exactly what it found) and come back at quiesce_runtime_leave.
 * Async-signal-safe: thread-local stores only.  Scopes nest.
 */
struct quiesce_scope {
	struct quiesce_rec *rec;
	unsigned depth, runtime, app_depth;
};
void quiesce_runtime_enter(struct quiesce_scope *s);
void quiesce_runtime_leave(const struct quiesce_scope *s);
/* How many runtime scopes enclose the caller (0: application code).  In a
 * handler's scope, more than 1 means the handler interrupted the runtime's own
 * code (its writes are not the program's). */
unsigned quiesce_runtime_depth(void);
/* A thread of the runtime, or a signal handler on its behalf, in a scope that
 * must not end (quiesce_set_last_thread_fn's exit on the epoch thread): the
 * thread becomes an application thread from here on, holding nothing. */
void quiesce_runtime_become_app(void);

#ifndef __cplusplus
/*
 * The lock fast path, inlined into the preload wrappers: every lock/unlock
 * of the application pays for it, and a call into gate.c plus the
 * epoch-thread test cost as much as the lock itself.  What it needs of the
 * module's state is declared here; nothing outside quiesce/ may touch it.
 *
 * quiesce_self.rec is the calling thread's record (NULL until it
 * registers); quiesce_self.depth a private copy of the record's depth.  The
 * fast path decides on the copy and only stores to the record, so the real
 * lock's atomic instruction waits for one TLS load instead of the chain
 * TLS -> record -> depth.  Both are written only by their thread; depth ==
 * rec->depth whenever rec is not NULL, and 0 when it is.  The epoch thread
 * points rec at a private record whose depth never comes near 0, so the
 * fast path needs no separate "am I the epoch thread" test: its enters and
 * leaves only move that depth, as if it always held a lock, and the scan
 * never sees that record.
 */
#include <stdatomic.h>

enum quiesce_gate_state { GATE_OPEN = 0, GATE_CLOSING = 1, GATE_RUNNING = 2 };

/* One per thread, on its own cache line so that the owner's depth stores
 * never contend with another thread's.  depth is written only by the owner
 * (and by quiesce_atfork_child, when the owner no longer exists). */
struct quiesce_rec {
	atomic_uint depth;
	atomic_uint in_use;
	/* Where the outermost level was taken, stored by the owner at each
	 * 0 -> 1 (the stall report reads them, racily, on the epoch thread):
	 * lock, the lock's address (0: a level that is no lock, such as a heap
	 * operation); site, the return address of the acquire call.  Bit 0 of
	 * lock is the epoch thread's mark: "this FASE blocked an attempt"; the
	 * owner's next 0 -> 1 stores an unmarked value over it, so a record
	 * still marked with depth > 0 is still in the FASE that blocked. */
	_Atomic uintptr_t lock;
	_Atomic uintptr_t site;
	atomic_int tid;			/* the owner's, for /proc/self/task */
	char pad[64 - 2 * sizeof(atomic_uint) - 2 * sizeof(uintptr_t) - sizeof(atomic_int)];
} __attribute__((aligned(64)));

/* Locks held that the user said are no critical section (PMTHREADS_NOT_FASE),
 * per thread; more at once count as FASEs. */
#define QUIESCE_MAX_EXCLUDED 8

struct quiesce_thread {
	struct quiesce_rec *rec;
	unsigned depth;
	unsigned n_excluded;		/* entries of excluded in use */
	bool classifying;		/* inside the site classifier */
	bool on_epoch_thread;		/* set once, when the epoch thread starts */
	/* The runtime's own code runs on this thread (quiesce_runtime_enter):
	 * how many scopes deep, and the application's depth as it was at the
	 * outermost one (fase_depth reports it; the record is swapped, see
	 * quiesce_runtime_enter). */
	unsigned runtime;
	unsigned app_depth;
	const void *excluded[QUIESCE_MAX_EXCLUDED];
	/* The record in use inside a scope: never in a slab, so the epoch
	 * thread's scan never sees it. */
	struct quiesce_rec runtime_rec;
};
/* initial-exec: %fs-relative loads, no __tls_get_addr call.  The library is
 * preloaded or linked, so its TLS is in the static block. */
extern __thread struct quiesce_thread quiesce_self
	__attribute__((tls_model("initial-exec"), visibility("hidden")));
/* The gate (enum quiesce_gate_state); threads wait on it with a futex. */
extern atomic_uint quiesce_gate __attribute__((visibility("hidden")));
/* Nonzero while the epoch thread cannot use membarrier(2) (also before
 * quiesce_init or the first quiesce_start learnt that it can): then the
 * 0 -> 1 transition needs a full fence, which the slow path supplies. */
extern atomic_uint quiesce_need_fence __attribute__((visibility("hidden")));
/* Nonzero once a classifier of call sites is installed
 * (quiesce_set_site_classifier): every acquire then asks whether its site
 * takes a lock that is no critical section. */
extern atomic_uint quiesce_exclusions __attribute__((visibility("hidden")));

/* Inside a runtime scope (quiesce_runtime_enter): the malloc wrappers serve
 * such a thread from the allocator the program has without us, never from
 * the persistent heap, whose operations are FASEs of the program's state. */
static inline bool quiesce_in_runtime(void) { return quiesce_self.runtime != 0; }

/* Slow paths (gate.c, not_fase.c).  fase_enter_slow: r is the caller's
 * record with depth already set to 1 by the fast path, or NULL for an
 * unregistered thread (depth untouched).  fase_wake_epoch: the epoch thread
 * is to look again -- here, the last lock of a thread was released while the
 * gate is CLOSING (quiesce/'s files wake it the same way for their own
 * reasons: a sync request, stop, the last application thread gone). */
void fase_enter_slow(struct quiesce_rec *r, const void *lock, const void *site)
	__attribute__((visibility("hidden")));
void fase_wake_epoch(void) __attribute__((visibility("hidden")));
/* PMTHREADS_NOT_FASE: whether the acquire of lock at site is one the user
 * said is no critical section; if so it is remembered as held (no level).
 * fase_excluded_release: whether lock is such a held one, forgotten then. */
bool fase_excluded_acquire(const void *lock, const void *site) __attribute__((visibility("hidden")));
bool fase_excluded_release(const void *lock) __attribute__((visibility("hidden")));

/* The 0 -> 1 and deeper levels.  lock and site say where the outermost
 * level was taken (quiesce_rec); they cost two stores on the 0 -> 1 path
 * only, to a line the depth store writes anyway. */
static inline __attribute__((always_inline)) void fase_enter_site(const void *lock, const void *site)
{
	unsigned d = quiesce_self.depth;
	struct quiesce_rec *r = quiesce_self.rec;
	if (d != 0) {
		PMT_ASSERT(d + 1 != 0 && r != NULL);	/* depth never wraps; depth != 0 has a record */
		quiesce_self.depth = d + 1;
		atomic_store_explicit(&r->depth, d + 1, memory_order_relaxed);
		return;
	}
	if (__builtin_expect(r != NULL, 1)) {
		atomic_store_explicit(&r->lock, (uintptr_t)lock, memory_order_relaxed);
		atomic_store_explicit(&r->site, (uintptr_t)site, memory_order_relaxed);
		quiesce_self.depth = 1;
		atomic_store_explicit(&r->depth, 1, memory_order_relaxed);
		/* The depth store must be visible before the gate is read.  The
		 * epoch thread's membarrier(2) between closing the gate and
		 * scanning the depths orders it for us (a store-load pair that
		 * needs no fence here); only the compiler must keep the order. */
		atomic_signal_fence(memory_order_seq_cst);
		if (__builtin_expect((atomic_load_explicit(&quiesce_gate, memory_order_acquire) |
				      atomic_load_explicit(&quiesce_need_fence,
							   memory_order_relaxed)) == 0,
				     1))
			return;
	}
	fase_enter_slow(r, lock, site);
}

/* A level that is no lock of the program's (a heap operation, an OpenMP
 * construct): its site is the caller of the function this is inlined in. */
static inline __attribute__((always_inline)) void fase_enter_fast(void)
{
	fase_enter_site(NULL, __builtin_return_address(0));
}

/* The acquire of lock, called from site (the wrapper's return address).
 * Returns whether it took a level: false when the site takes a lock the user
 * said is no critical section (then the release must be fase_leave_lock's
 * and a failed acquire fase_acquire_failed's, which know it). */
static inline __attribute__((always_inline)) bool fase_enter_lock(const void *lock, const void *site)
{
	if (__builtin_expect(atomic_load_explicit(&quiesce_exclusions, memory_order_relaxed) != 0, 0) &&
	    fase_excluded_acquire(lock, site))
		return false;
	fase_enter_site(lock, site);
	return true;
}

static inline __attribute__((always_inline)) void fase_leave_fast(void)
{
	unsigned d = quiesce_self.depth;
	if (__builtin_expect(d == 0, 0))
		return;
	/* The record mirrors the private depth (see quiesce_self below). */
	PMT_ASSERT(quiesce_self.rec != NULL &&
		   atomic_load_explicit(&quiesce_self.rec->depth, memory_order_relaxed) == d);
	quiesce_self.depth = d - 1;
	/* Release: the epoch thread that reads 0 also sees the FASE's writes. */
	atomic_store_explicit(&quiesce_self.rec->depth, d - 1, memory_order_release);
	/* Possibly the last thread the epoch waits for: tell it now rather than
	 * leaving it to its polling back-off. */
	if (d == 1 && __builtin_expect(atomic_load_explicit(&quiesce_gate, memory_order_relaxed) ==
					       GATE_CLOSING,
				       0))
		fase_wake_epoch();
}

/* The release of lock: one level, or none for an excluded lock. */
static inline __attribute__((always_inline)) void fase_leave_lock(const void *lock)
{
	if (__builtin_expect(quiesce_self.n_excluded != 0, 0) && fase_excluded_release(lock))
		return;
	fase_leave_fast();
}

/* An acquire that fase_enter_lock began did not take the lock. */
static inline __attribute__((always_inline)) void fase_acquire_failed(bool counted, const void *lock)
{
	if (counted)
		fase_leave_fast();
	else
		(void)fase_excluded_release(lock);
}
#endif

/* The epoch procedure run at each quiescent point (runtime.c provides it):
 * collect dirty pages and stage them.  Optionally split in two: fn runs at
 * the quiescent point with the gate closed; after runs on the epoch thread
 * right after the gate reopened (application threads run again), and before
 * the next quiescent point and before quiesce_sync callers of this epoch
 * return -- the place for work that must finish but need not stall FASEs
 * (persisting the staged pages).  after says whether the image of that
 * quiescent point is durable (quiesce_outcome): when it was carried over,
 * sync callers keep waiting and the next epoch starts at once; when it
 * failed for good, they are released (the caller reports the error). */
typedef void (*quiesce_epoch_fn)(void *arg);
enum quiesce_outcome {
	QUIESCE_DURABLE,	/* the image of that quiescent point is durable */
	QUIESCE_CARRIED,	/* not yet: complete it with another at once */
	QUIESCE_FAILED,		/* never will be (a storage error): waiters are
				 * released to learn it, no retry, and no
				 * quiescent point is brought about again (until
				 * quiesce_start installs a procedure anew) */
};
typedef enum quiesce_outcome (*quiesce_after_fn)(void *arg);

/* Before the first lock is counted (the library's start-up), without
 * starting any thread: registers the process for membarrier(2), so that the
 * lock fast path needs no fence whether or not an epoch thread ever runs.
 * Without it that is learnt at the first quiesce_start, and until then every
 * 0 -> 1 pays a full fence. */
void quiesce_init(void);

/* Start the epoch thread.  interval_ms: the period (> 0), kept at a fixed
 * rate: an epoch is due one interval after the previous one started, and
 * when the after procedure overran that, the next epoch starts as soon as it
 * returns (counted as late: a backlog).  When the epoch thread already runs,
 * this replaces the epoch procedure and the interval instead.  Threads that
 * already hold locks when it starts are waited for like any others: their
 * depth is kept whether or not an epoch thread runs.  The runtime starts it
 * only when a pool is open (runtime_init): a process with nothing to persist
 * has no thread of the runtime.  Returns 0 or -1 with err_get() set. */
int quiesce_start(unsigned interval_ms, quiesce_epoch_fn fn, void *arg);
/* The same with a second procedure run after the gate reopened (see
 * quiesce_epoch_fn); both get arg.  quiesce_start is this with after NULL. */
int quiesce_start_split(unsigned interval_ms, quiesce_epoch_fn fn, quiesce_after_fn after,
			void *arg);

/* Stop the epoch thread, after one final epoch attempt when final is true
 * (bounded like any other: abandoned when some thread keeps holding a lock).
 * No-op when it is not running. */
void quiesce_stop(bool final);

/* True while the epoch procedures run for quiesce_stop(true)'s final
 * epoch (not for a regular epoch that ran as shutdown began). */
bool quiesce_in_final_epoch(void);

/* True while the epoch procedures run for an attempt someone waits for: a
 * pmthreads_sync or quiesce_request_epoch (output commit's held replies)
 * issued before it began and not yet served.  The pipeline then avoids
 * carrying the attempt over, which would make them wait a second epoch. */
bool quiesce_epoch_awaited(void);

/* Whether the epoch thread is running. */
bool quiesce_running(void);

/* Force an epoch and wait until one that started after the call has
 * completed durably (the epoch procedure ran and its after procedure
 * returned true).  Returns 0; -1 with errno
 * EDEADLK when the caller is inside a FASE, ESRCH when no epoch thread
 * runs, ETIMEDOUT when no quiescent point was reached for the sync timeout
 * while it waited (quiesce_set_sync_timeout; see Stalls below). */
int quiesce_sync(void);

/* Quiescent points are numbered from 1 in the order they are reached
 * (retries of a carried-over attempt get their own number).
 * quiesce_pauses: the number of the latest one reached (0: none yet); a
 * heap write made before the call is in the image of every quiescent point
 * numbered above it.  quiesce_durable_pause: the number of the latest one
 * whose after procedure returned true (its image is durable; a carried-over
 * attempt's number never is).  quiesce_current_pause: the number of the
 * epoch whose procedures are running (call it from them). */
uint64_t quiesce_pauses(void);
uint64_t quiesce_durable_pause(void);
uint64_t quiesce_current_pause(void);

/* Ask for an epoch as soon as the previous one allows, without waiting for
 * it (output commit's epochs on demand).  Any thread, inside a FASE too. */
void quiesce_request_epoch(void);

/* Thread lifecycle hooks (preload's pthread_create/exit wrappers).
 * quiesce_thread_start registers the calling thread now (fase_enter would do
 * it lazily); quiesce_thread_exit returns its record for reuse (a thread
 * exiting while holding locks is treated as holding none). */
void quiesce_thread_start(void);
void quiesce_thread_exit(void);

/* The end of the process when its last application thread ends.  A
 * process whose main thread called pthread_exit ends, natively, when its
 * last thread does (glibc calls exit(0) there); the runtime's own threads
 * must not keep it alive.  Application threads are counted -- the main
 * thread from the start, every thread the preload's pthread_create starts
 * from just before its creation (quiesce_app_thread_added; undone with
 * quiesce_app_thread_gone when creation fails) until it ends
 * (quiesce_app_thread_gone).  Once the count is 0 the epoch thread watches
 * /proc/self/task (threads started without the wrapper count there, so
 * nothing ends early) and, when only the runtime's own threads are left,
 * restores the signal mask of the thread that set fn (the main thread at
 * start-up: the mask the program started with) and calls fn on the epoch
 * thread: the preload's exit(0), whose handlers make the final epoch
 * (quiesce_stop works when called on the epoch thread itself).  Without fn
 * (the default) nothing is watched; without an epoch thread the C library
 * ends the process itself. */
typedef void (*quiesce_last_thread_fn)(void);
void quiesce_set_last_thread_fn(quiesce_last_thread_fn fn);
void quiesce_app_thread_added(void);
void quiesce_app_thread_gone(void);

/* The end of the process by a signal whose default action ends it
 * (runtime/startup.c's handler, pmthreads(7) "Ending"): fn -- the runtime's
 * part of an exit: the final epoch, the pool marked clean, the statistics --
 * runs on the epoch thread, never in the handler, and the caller waits for it
 * to return, at most bound_ns.  Returns true when it did; false at once when
 * no epoch thread runs (nothing to persist: the caller ends the process
 * straight away), or after the bound.  Async-signal-safe: atomics and futexes
 * only.  The first caller's fn runs; a later one (another thread's signal)
 * waits for it.  The epoch thread does not return to its loop afterwards: the
 * process is about to end. */
typedef void (*quiesce_end_fn)(void);
bool quiesce_end_on_epoch_thread(quiesce_end_fn fn, uint64_t bound_ns);

/* Create one of the runtime's own threads (the epoch thread, the lazy
 * restorer): with every signal blocked from its first instruction (the
 * creating thread blocks them around the creation, so a signal the program
 * blocked is never delivered to it), never registered, and not counted as
 * an application thread.  fn must call quiesce_internal_thread_done as its
 * last step.  Returns 0 or an error number. */
int quiesce_create_internal_thread(pthread_t *th, void *(*fn)(void *), void *arg);
void quiesce_internal_thread_done(void);
/* Join a thread quiesce_create_internal_thread made, and give back its
 * stack (the runtime's own memory, counted in its share of the memory
 * limits: runtime/memory_limits.h).  0 or an error number. */
int quiesce_join_internal_thread(pthread_t th, void **ret);

/* After fork() in the child: forget other threads, no epoch thread, gate
 * open.  The calling thread keeps its record and depth. */
void quiesce_atfork_child(void);

/* How the epoch thread is created and joined.  The preload layer interposes
 * pthread_create/pthread_join, and the epoch thread must be neither counted
 * nor registered, so it hands the real functions here before quiesce_start.
 * Default: pthread_create / pthread_join as linked. */
typedef int (*quiesce_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*quiesce_join_fn)(pthread_t, void **);
void quiesce_set_thread_functions(quiesce_create_fn create, quiesce_join_fn join);

/* Number of registered threads whose depth is > 0 right now (tests assert 0
 * inside the epoch procedure; a racy snapshot elsewhere). */
unsigned quiesce_busy_threads(void);

/* Number of thread records in use (registered, not exited). */
unsigned quiesce_registered_threads(void);

/* X(kind, field, report key): base/stats_fields.h. */
#define QUIESCE_STATS_FIELDS(X) \
	X(count, epochs, "epochs") /* quiescent points reached (procedure ran) */ \
	X(count, abandoned, "abandoned") /* attempts given up (lock held too long) */ \
	X(count, syncs, "syncs") /* quiesce_sync requests */ \
	/* CLOSING -> OPEN of completed epochs (the after procedure is not in \
	 * it); p50/p99 are upper bounds of histogram buckets 1/8 of a power of \
	 * two wide (<= 12.5 % high), max exact */ \
	X(value, pause_ns_p50, "pause_ns_p50") \
	X(value, pause_ns_p99, "pause_ns_p99") \
	X(value, pause_ns_max, "pause_ns_max") \
	X(count, pause_ns_total, "pause_ns_total") \
	X(count, abandoned_ns_total, "abandoned_ns_total") /* gate closed in abandoned attempts */ \
	/* joins, barrier and semaphore waits entered while holding a lock */ \
	X(count, blocking_in_fase, "blocking_in_fase") \
	X(flag, membarrier, "membarrier") /* membarrier(2) in use (else fences) */ \
	/* achieved period: from one epoch's start to the next one's (same \
	 * histogram as the pause) */ \
	X(value, period_ns_p50, "period_ns_p50") \
	X(value, period_ns_p99, "period_ns_p99") \
	X(value, period_ns_max, "period_ns_max") \
	X(value, period_ns_mean, "period_ns_mean") \
	/* backlog: periodic epochs that began after their due time because the \
	 * previous write-back was still running */ \
	X(count, late_epochs, "late_epochs") \
	X(count, late_ns_total, "late_ns_total") /* how late, in all */ \
	/* attempts that closed the gate (reached a quiescent point or were \
	 * abandoned) */ \
	X(count, gate_closings, "gate_closings") \
	/* attempts due but not made, one an interval, because the FASE that \
	 * blocked the last one had not ended (no gate closed against it) */ \
	X(count, attempts_deferred, "attempts_deferred") \
	/* stalls: durability stood still past QUIESCE_STALL_REPORT_NS and was \
	 * reported while it lasted */ \
	X(count, stalls, "stalls") \
	X(flag, stalled, "stalled") /* attempts are blocked now */ \
	X(value, stall_ns, "stall_ns") /* how long durability has stood still now */ \
	X(value, stall_ns_max, "stall_ns_max") /* the longest, the current one included */ \
	X(count, sync_timeouts, "sync_timeouts") /* pmthreads_sync gave ETIMEDOUT */ \
	/* call sites PMTHREADS_NOT_FASE names: their locks take no level */ \
	X(count, not_fase_sites, "not_fase_sites")

struct quiesce_stats {
	QUIESCE_STATS_FIELDS(STATS_DECLARE)
};
void quiesce_get_stats(struct quiesce_stats *st);

/*
 * Stalls.  A FASE that outlasts the attempt's bound blocks it; the attempt
 * is abandoned and its holders are marked (quiesce_rec).  While any of them
 * is still in that FASE no attempt closes the gate again: the epoch thread
 * polls the marks and tries once they are gone.  When durability has stood
 * still for QUIESCE_STALL_REPORT_NS (no quiescent point reached since the
 * last one, or since the start) the stall function is called with what
 * blocks it, then again at twice that time, four times..., and once with
 * cleared set when a quiescent point is reached again.  pmthreads_sync
 * fails with ETIMEDOUT when no quiescent point was reached for the sync
 * timeout while it waited (and calls the stall function if it has not been
 * called for this stall).
 */
#define QUIESCE_STALL_REPORT_NS 2000000000ULL
#define QUIESCE_STALL_HOLDERS 4
struct quiesce_stall_holder {
	int tid;
	uintptr_t lock;			/* 0: a level that is no lock */
	uintptr_t site;			/* return address of the acquire */
};
struct quiesce_stall {
	bool stalled;			/* attempts are abandoned or deferred */
	uint64_t stood_ns;		/* since the last quiescent point */
	uint64_t durable_pause;		/* quiesce_durable_pause() */
	uint64_t next_report_ns;	/* stood_ns of the next report */
	uint64_t sync_timeout_ns;	/* pmthreads_sync's bound */
	unsigned n_holders;		/* FASEs that blocked (may exceed holders[]) */
	struct quiesce_stall_holder holders[QUIESCE_STALL_HOLDERS];
};
/* The stall as of now; false (and *s zeroed) when there is none. */
bool quiesce_get_stall(struct quiesce_stall *s);
/* After quiesce_stop(true) made no final epoch: the threads in a FASE now,
 * which kept it from a quiescent point (the exiting thread's own lock
 * among them), as a stall; false when none is left. */
bool quiesce_stall_at_exit(struct quiesce_stall *s);
typedef void (*quiesce_stall_fn)(const struct quiesce_stall *s, bool cleared);
/* Called on the epoch thread (or on a pmthreads_sync that timed out);
 * NULL: nothing is reported. */
void quiesce_set_stall_fn(quiesce_stall_fn fn);
/* PMTHREADS_SYNC_TIMEOUT_MS, in ms (> 0; default 10000). */
void quiesce_set_sync_timeout(unsigned ms);

/* Something to do on the epoch thread at least every period_ns, whatever
 * the epochs do: stalled, deferred, failed for good or far apart (the
 * statistics file's period).  fn is called at every turn of the thread's
 * loop (it keeps its own schedule) and no wait of the loop outside an
 * attempt lasts longer than period_ns.  NULL: none. */
typedef void (*quiesce_tick_fn)(void);
void quiesce_set_tick(quiesce_tick_fn fn, uint64_t period_ns);
/* The tick from inside a long step of the epoch thread's turn -- a
 * write-back that runs for seconds calls it between its pages -- so that
 * its period holds there too.  The tick keeps its own schedule: a call
 * that is not due costs the tick's clock read.  A no-op on any other
 * thread (the tick is the epoch thread's). */
void quiesce_tick_now(void);

/* PMTHREADS_NOT_FASE: fn says whether the function containing a call site
 * (a return address) is one whose locks are no critical section.  Asked
 * once per site (cached by address; a full cache asks again); while it runs
 * the calling thread's own locks count as usual.  NULL: every lock counts. */
typedef bool (*quiesce_site_fn)(const void *site);
void quiesce_set_site_classifier(quiesce_site_fn fn);

/* The pause of the epoch whose after procedure is running (call it from
 * there: on the epoch thread, between one epoch and the next). */
uint64_t quiesce_last_pause_ns(void);
/* The achieved period that ended with that epoch: since the previous
 * epoch's start (0 for the first).  Same calling rule. */
uint64_t quiesce_last_period_ns(void);

/* The calling thread is about to block in call (pthread_join,
 * pthread_barrier_wait, sem_wait, ...) while it holds a lock: no epoch can
 * start until it returns, so attempts meanwhile are abandoned.  Counted for
 * the stats, and reported once per kind of call at PMTHREADS_VERBOSE=1 so
 * that a user seeing abandoned epochs learns why. */
void quiesce_note_blocking_in_fase(const char *call);

#endif
