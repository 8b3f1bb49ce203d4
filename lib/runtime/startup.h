/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * startup -- the library's start, the process's exit, fork: in that order.
 *
 * Owns: what happens when the library is loaded and in which order: the
 * configuration taken (a bad one reported, the program run on unpersisted),
 * the target decided (target.h; a wrapper or a child that is not the target
 * stays inert and never opens a pool), LD_PRELOAD fixed for children
 * (exec_env.h), the epoch thread given the real pthread_create/join, and
 * in malloc mode the runtime brought up at once (its pool starts the epoch
 * thread); in nvmalloc mode it starts at the first nvmalloc, and until then
 * the runtime has no thread.  PMTHREADS_STRICT=1 policy at start:
 * a configuration error, a program that does not use the API in nvmalloc
 * mode (linkage.h), or lock calls that reach a runtime before this library
 * end the process with RUNTIME_STRICT_EXIT.  The exit handler (final epoch,
 * statistics, PMTHREADS_CHECK=fail's status) and the fork child's detach.
 * preload/process.c's constructor calls startup_run and nothing else.
 */
#ifndef PMT_STARTUP_H
#define PMT_STARTUP_H

#include "quiesce/quiesce.h"
#include "track/fault_signal.h"

#include <signal.h>
#include <sys/types.h>

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

/* The runtime's fault handler's work, as a scope of the runtime's own code
 * (quiesce_runtime_enter): claim(si, ucontext) and its result.  startup_run
 * gives it to fault_signal_set_inside before anything else. */
bool startup_claim_inside(fault_signal_claim_fn claim, const siginfo_t *si, void *ucontext);

/* The program's fork(2), through real_fork (the C library's), with every
 * signal but those a fault raises blocked across it (the kernel's masks set
 * with real_sigmask, the C library's): a signal sent to the child before it
 * first runs is delivered once the child's fork has returned -- after the C
 * library released the locks it holds across fork in a multi-threaded
 * process, which the runtime's own threads make this one -- and the
 * parent's, once its fork has.  Each gets back the mask it had; fork's
 * result and errno are the real one's. */
typedef pid_t (*startup_fork_fn)(void);
typedef int (*startup_sigmask_fn)(int, const sigset_t *, sigset_t *);
pid_t startup_fork(startup_fork_fn real_fork, startup_sigmask_fn real_sigmask);

#endif
