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
 */
#ifndef PMT_QUIESCE_H
#define PMT_QUIESCE_H

#include <stdbool.h>
#include <stdint.h>

/* A lock was (about to be) acquired / released by the calling thread.  The
 * preload wrappers call these around the real pthread functions; the heap
 * calls them around each allocator operation.  fase_enter may block at the
 * gate when depth is 0. */
void fase_enter(void);
void fase_leave(void);
/* The calling thread's current depth (0: outside any FASE). */
unsigned fase_depth(void);

/* The epoch procedure run at each quiescent point (runtime.c provides it):
 * collect dirty pages, persist them. */
typedef void (*quiesce_epoch_fn)(void *arg);

/* Start the epoch thread.  interval_ms: the period.  Returns 0 or -1. */
int quiesce_start(unsigned interval_ms, quiesce_epoch_fn fn, void *arg);
/* Stop it (after a final epoch when final is true). */
void quiesce_stop(bool final);

/* Force an epoch and wait until it is durable.  -1/EDEADLK when the caller
 * is inside a FASE. */
int quiesce_sync(void);

/* Thread lifecycle hooks (preload's pthread_create/exit wrappers). */
void quiesce_thread_start(void);
void quiesce_thread_exit(void);

/* After fork() in the child: forget other threads, no epoch thread. */
void quiesce_atfork_child(void);

struct quiesce_stats {
	uint64_t epochs;
	uint64_t abandoned;		/* attempts given up (lock held too long) */
	uint64_t pause_ns_p50, pause_ns_p99, pause_ns_max;
};
void quiesce_get_stats(struct quiesce_stats *st);

#endif
