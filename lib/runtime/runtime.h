/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * runtime -- start-up, shutdown and fork.
 *
 * Owns: the order in which the modules are brought up (config, pool, shadow,
 * restore + tracker (restore.h), heap, epoch pipeline, epoch thread) and down (final
 * epoch, clean flag), and detaching a fork child.  The epoch itself is
 * epoch.c's; the functions of pmthreads.h are in api.c.
 */
#ifndef PMT_RUNTIME_H
#define PMT_RUNTIME_H

#include "base/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum runtime_state {
	RUNTIME_NONE = 0,	/* not started */
	RUNTIME_STARTING = 1,	/* runtime_init in progress */
	RUNTIME_RUNNING = 2,	/* persistent heap live, epochs running */
	RUNTIME_FAILED = 3,	/* start-up failed; see runtime_init's error */
	RUNTIME_DETACHED = 4,	/* heap usable but no longer persisted: after
				 * shutdown, in a fork child, or a child of
				 * the process that holds the pool */
};

/* The exit status of a process that PMTHREADS_STRICT=1 stops because it
 * cannot run persistently (a configuration or pool error). */
#define RUNTIME_STRICT_EXIT 1

/* Initialise once (idempotent, thread-safe).  Returns 0 when the persistent
 * heap is usable (RUNNING, or DETACHED with a heap), -1 otherwise with
 * err_get() set; the reason was also printed once. */
int runtime_init(void);
/* After runtime_init failed: the errno naming why (pmthreads.h(3)): EINVAL
 * a malformed PMTHREADS_* variable, EPERM not PMTHREADS_PROGRAM, EBUSY the
 * pool in use, EBADMSG a file that is no usable pool, EACCES no safe place
 * for a privileged program's pool, else the failing system call's (ENOENT,
 * EACCES, EROFS, ENOSPC, ENOMEM...); EAGAIN while the runtime is starting,
 * ESHUTDOWN after it has shut down. */
int runtime_init_errno(void);
/* With PMTHREADS_STRICT=1 runtime_init does not return on failure: it
 * prints the reason and exits with RUNTIME_STRICT_EXIT. */
enum runtime_state runtime_state(void);
/* True on the thread currently running runtime_init (the malloc wrappers
 * serve this thread from a bootstrap arena then). */
bool runtime_in_init(void);

/* Clean shutdown: final epoch, clean flag, pool closed; the heap stays
 * mapped and usable (other threads and later destructors may still use it)
 * but is no longer persisted.  Idempotent. */
void runtime_shutdown(void);

/* In the child after fork(): detach from the parent's pool (the child's heap
 * is a private copy and is never persisted). */
void runtime_atfork_child(void);

/* tracker_pin_writable / tracker_unpin on the heap's tracker, while there
 * is one (kernel_stacks.c is the caller).  Without a tracker: 0, nothing. */
int runtime_pin_writable(void *addr, size_t len);
void runtime_unpin(void *addr, size_t len);
/* The same without waiting: 1 when the lock is taken (nothing pinned; a
 * signal handler may have interrupted its holder), else as above. */
int runtime_try_pin_writable(void *addr, size_t len);
/* Whether the tracker write-protects clean heap pages, so that a kernel
 * write there fails with EFAULT unless pinned (the mprotect tracker); false
 * under uffd and without a tracker.  One relaxed load. */
bool runtime_kernel_writes_fault(void);

/* The pool's mapping, [*pool_lo, *pool_hi), and the part of the heap's
 * range the heap has used or reserved so far, [*heap_lo, *heap_hi)
 * (page-aligned);
 * either is empty (lo == hi == 0) when there is none.  For memory_lock.c,
 * which leaves the runtime's mappings out of mlockall but for that part. */
void runtime_lock_ranges(uintptr_t *pool_lo, uintptr_t *pool_hi, uintptr_t *heap_lo,
			 uintptr_t *heap_hi);

/* Where the heap is mapped in this process, and (mapped - recorded). */
void *runtime_heap_base(void);
ptrdiff_t runtime_heap_offset(void);
/* The previous run ended without a clean shutdown. */
bool runtime_crashed(void);
/* VER_d of the pool; after shutdown the last one, frozen (or the one at a
 * failed write-back); 0 when there was none, and in a fork child. */
uint64_t runtime_durable_epoch(void);
/* This process is a fork child of a process that ran the runtime (or a
 * child of such a child): its heap is a private copy, never persisted. */
bool runtime_fork_child(void);

/* The runtime's figures for the statistics report (stats.h): the epoch
 * pipeline's, the restore's, the pool's write-back's and the trackers'
 * counters, as they stand or as they stood when each was closed. */
struct stats_runtime;	/* stats.h */
void runtime_get_stats(struct stats_runtime *out);
/* Write the final statistics report (stats_write_final with the figures
 * above).  Returns 0 or -1 with err_get() set. */
int runtime_write_final_stats(void);

/* 0, or the errno of the write-back that failed (nvm.h): from then on no
 * epoch is published and pmthreads_sync fails with it.  Sticky, also after
 * shutdown. */
int runtime_io_error(void);

#endif
