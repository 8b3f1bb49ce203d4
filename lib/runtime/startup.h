/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * startup -- the library's start, the process's exit, fork: in that order.
 *
 * Owns: what happens when the library is loaded and in which order: the
 * configuration taken (a bad one reported, the program run on unpersisted),
 * the target decided (target.h; a wrapper or a child that is not the target
 * stays inert and never opens a pool), LD_PRELOAD fixed for children
 * (exec_env.h), the epoch thread given the real pthread_create/join and
 * started, and in malloc mode the runtime brought up at once; in nvmalloc
 * mode it starts at the first nvmalloc.  PMTHREADS_STRICT=1 policy at start:
 * a configuration error, a program that does not use the API in nvmalloc
 * mode (linkage.h), or lock calls that reach a runtime before this library
 * end the process with RUNTIME_STRICT_EXIT.  The exit handler (final epoch,
 * statistics, PMTHREADS_CHECK=fail's status) and the fork child's detach.
 * preload/process.c's constructor calls startup_run and nothing else.
 */
#ifndef PMT_STARTUP_H
#define PMT_STARTUP_H

#include "quiesce/quiesce.h"

/* What start-up needs from the interposition layer, which only it knows. */
struct startup_interposer {
	/* Resolve the next definitions of the interposed functions; called
	 * first. */
	void (*resolve_real)(void);
	/* Where resolve_real stored the real pthread_create and pthread_join:
	 * the epoch thread must not pass through the wrappers. */
	const quiesce_create_fn *real_create;
	const quiesce_join_fn *real_join;
	/* The constructor's thread, the main one, counts as an application
	 * thread. */
	void (*main_thread_counted)(void);
	/* PMTHREADS_HEAP=malloc: route malloc and friends to the persistent
	 * heap once it is ready (called before runtime_init). */
	void (*malloc_begin)(void);
};

/* Start the runtime for the process (the library constructor).  errno is
 * as it was before the call: the program reaches main with what the C
 * library left there, whatever the start-up's probes set. */
void startup_run(const struct startup_interposer *self);

#endif
