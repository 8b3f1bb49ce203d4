/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * preload -- what the files of the interposition layer share.
 *
 * Owns: the process-wide facts the wrappers consult: whether malloc is
 * served from the persistent heap, and the configuration read at load time
 * (lib/base/config.c's one struct).
 */
#ifndef PMT_PRELOAD_H
#define PMT_PRELOAD_H

#include "base/config.h"

#include <stdbool.h>

/* The configuration the library was loaded with (defaults until the
 * constructor has run). */
const struct config *preload_config(void);

/* Find the LD_PRELOAD entry that loaded the library; in the target, take
 * it out of LD_PRELOAD so that children do not inherit it (unless
 * PMTHREADS_FOLLOW_CHILDREN=1).  See exec.c.  Called by the constructor. */
void preload_env_init(const struct config *c, bool is_target);

/* PMTHREADS_HEAP=malloc and the constructor has asked for the heap: malloc
 * and friends go to the persistent heap once it is ready. */
extern bool preload_malloc_mode;

/* Malloc mode: find what must stay outside the heap (stdio buffers, see
 * malloc.c).  Called by the constructor before the heap is ready. */
void preload_malloc_init(void);

/* Between these two calls, this thread's allocations come from the next
 * allocator (malloc_next.h) even in malloc mode: for libc functions that
 * allocate a buffer and fill it with a system call of their own, which no
 * wrapper sees (opendir, getcwd(NULL)).
 * Nests; async-signal-safe. */
void preload_libc_alloc_begin(void);
void preload_libc_alloc_end(void);

/* Whether every lock family's entry points (pthread, C11, OpenMP) reach
 * this library's wrappers rather than a runtime found before it; says which
 * do not, once, with the fix.  See lock_reach.c.  Called by the
 * constructor. */
bool preload_locks_reach_us(void);

/* The calling thread was just started through a wrapper (pthread_create,
 * thrd_create) that runs preload_thread_exit in a cleanup handler pushed
 * before the application's: registers it with quiesce, and tells
 * pthread_exit that the handler will do the exit work.  blocks_segv: the
 * creator's view of SIGSEGV in its mask (fault_signal_app_blocked), which
 * the new thread inherits. */
void preload_thread_started(bool blocks_segv);

/* The calling thread is ending (pthread_exit or return from its start
 * routine): return its heap cache and its quiescence record.  Idempotent. */
void preload_thread_exit(void);
/* The constructor's thread, the main one, counts as an application thread
 * (see quiesce_set_last_thread_fn). */
void preload_main_thread_counted(void);
/* The calling thread is the main thread or one the wrapper started; false
 * in threads glibc starts itself (the SIGEV_THREAD timer helper and the
 * threads it starts), which malloc.c treats with care. */
extern __thread bool preload_known_thread
	__attribute__((tls_model("initial-exec"), visibility("hidden")));

#endif
