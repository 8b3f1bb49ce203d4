/*
 * quiesce -- failure-atomic sections, the gate and the epoch thread.
 *
 * Owns: each thread's lock depth, the global quiescent point, the epoch
 * trigger (every interval, or on demand), durability waits.
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

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A lock was (about to be) acquired / released by the calling thread.  The
 * preload wrappers call these around the real pthread functions; the heap
 * calls them around each allocator operation.  fase_enter may block at the
 * gate when depth is 0.  A thread's first call registers it (records come
 * from the runtime's own memory, never from malloc).  Both are no-ops on the
 * epoch thread.  fase_leave at depth 0 does nothing (a lock taken before the
 * interposition was in place). */
void fase_enter(void);
void fase_leave(void);

/* The calling thread has just acquired a lock it could not give up instead
 * of waiting at the gate: the mutex that glibc re-acquires on return from
 * pthread_cond_wait.  Never waits at the gate for an epoch that has not yet
 * started (a thread the epoch waits for may be blocked on that mutex); waits
 * only while an epoch procedure is running, which needs no application lock.
 * Counts as one level of depth, like fase_enter. */
void fase_reenter(void);

/* The calling thread's current depth (0: outside any FASE). */
unsigned fase_depth(void);

/* The epoch procedure run at each quiescent point (runtime.c provides it):
 * collect dirty pages, persist them. */
typedef void (*quiesce_epoch_fn)(void *arg);

/* Start the epoch thread.  interval_ms: the period (> 0).  When the epoch
 * thread already runs, this replaces the epoch procedure and the interval
 * instead (the preload layer starts the gate before any pool is opened;
 * runtime_init later installs the persisting procedure).  Returns 0 or -1
 * with err_get() set. */
int quiesce_start(unsigned interval_ms, quiesce_epoch_fn fn, void *arg);

/* Stop the epoch thread, after one final epoch attempt when final is true
 * (bounded like any other: abandoned when some thread keeps holding a lock).
 * No-op when it is not running. */
void quiesce_stop(bool final);

/* Whether the epoch thread is running. */
bool quiesce_running(void);

/* Force an epoch and wait until one that started after the call has
 * completed (the epoch procedure returned).  Returns 0; -1 with errno
 * EDEADLK when the caller is inside a FASE, ESRCH when no epoch thread
 * runs. */
int quiesce_sync(void);

/* Thread lifecycle hooks (preload's pthread_create/exit wrappers).
 * quiesce_thread_start registers the calling thread now (fase_enter would do
 * it lazily); quiesce_thread_exit returns its record for reuse (a thread
 * exiting while holding locks is treated as holding none). */
void quiesce_thread_start(void);
void quiesce_thread_exit(void);

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

struct quiesce_stats {
	uint64_t epochs;		/* quiescent points reached (procedure ran) */
	uint64_t abandoned;		/* attempts given up (lock held too long) */
	uint64_t syncs;			/* quiesce_sync requests */
	uint64_t pause_ns_p50, pause_ns_p99, pause_ns_max;
					/* CLOSING -> OPEN of completed epochs;
					 * p50/p99 are log2-bucket upper bounds,
					 * max exact */
	uint64_t pause_ns_total;
	uint64_t abandoned_ns_total;	/* gate closed in abandoned attempts */
	bool membarrier;		/* membarrier(2) in use (else fences) */
};
void quiesce_get_stats(struct quiesce_stats *st);

#endif
