/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * preload -- what the files of the interposition layer share.
 *
 * Owns: the process-wide facts the wrappers consult: whether malloc is
 * served from the persistent heap, and which threads the wrappers started.
 */
#ifndef PMT_PRELOAD_H
#define PMT_PRELOAD_H

#include <stdbool.h>

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
