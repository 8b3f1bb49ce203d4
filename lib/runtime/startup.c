/* SPDX-License-Identifier: BSD-3-Clause */
/* startup -- the library's start, the process's exit, fork.  See startup.h. */
#include "runtime/startup.h"

#include "base/config.h"
#include "base/log.h"
#include "diagnose/fase_checker.h"
#include "diagnose/stall.h"
#include "prim/prim.h"
#include "quiesce/quiesce.h"
#include "runtime/exec_env.h"
#include "runtime/linkage.h"
#include "runtime/runtime.h"
#include "runtime/stats.h"
#include "runtime/target.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern char *program_invocation_name;

/* What start-up recorded for later: the target's process ID (written
 * once, before any handler of ours is installed). */
static struct {
	pid_t pid;
} started;

/* A clean exit (return from main, exit(), the last thread's pthread_exit)
 * persists a final epoch and marks the pool clean, then writes the
 * statistics.  Registered from the constructor, so it runs after every
 * atexit handler and static destructor the program registered later, which
 * may still use the heap. */
/* The runtime's part of an exit: the final epoch and the pool marked clean,
 * the statistics, the FASE checker's summary.  On the exiting thread, or on
 * the epoch thread when a signal ends the process (end_by_signal). */
static void end_runtime(void)
{
	const struct config *cfg = config_get();
	/* The runtime's own code: the summary's libdw and the statistics'
	 * stdio take locks that are no FASE (quiesce.h). */
	struct quiesce_scope scope;
	quiesce_runtime_enter(&scope);
	/* Stops the epoch thread, which runs only while a pool is open. */
	runtime_shutdown();
	if (runtime_write_final_stats() != 0)
		log_msg(LOG_ERR, "%s", err_get());
	if (cfg->check != CHECK_OFF)
		fase_checker_print_summary();
	quiesce_runtime_leave(&scope);
}

static void at_exit(void)
{
	const struct config *cfg = config_get();
	end_runtime();
	if (cfg->check == CHECK_FAIL && fase_checker_violations() != 0) {
		/* The last handler to run (registered first); the C library
		 * flushes stdio only after it, so do that here. */
		fflush(NULL);
		prim_exit_now(1);
	}
}

/* In the handler of a signal whose default action ends the process, the
 * program's disposition being SIG_DFL (fault_signal.h, pmthreads(7)
 * "Ending"): the end as an exit's, but without the program's exit handlers,
 * which the signal would not have run either.  The work is the epoch
 * thread's, never the handler's (a handler may have interrupted anything:
 * malloc, stdio, a lock of the runtime's); this waits for it at most the
 * sync timeout, then fault_signal ends the process by the signal.  The
 * final epoch is a quiescent point like any other: a FASE the signal
 * interrupted is not in it (the thread cannot leave it), so it is abandoned
 * after its bound and the last durable epoch is what the next run gets, the
 * pool left marked as crashed -- as an exit inside a FASE. */
static void end_by_signal(int sig)
{
	(void)sig;
	/* A vfork child shares the memory, and so the epoch thread's state, of
	 * the process it came from: it must not end that one's runtime. */
	if (prim_getpid() != started.pid)
		return;
	struct quiesce_scope scope;
	quiesce_runtime_enter(&scope);
	uint64_t bound = (uint64_t)config_get()->sync_timeout_ms * 1000000ULL;
	(void)quiesce_end_on_epoch_thread(end_runtime, bound);
	quiesce_runtime_leave(&scope);
}

/* The program's last thread has ended while the runtime's threads live on
 * (its main thread called pthread_exit): end the process as glibc does on
 * the last thread's exit. */
static void last_thread_exited(void)
{
	exit(0);
}

/* fork(), in one order (docs/design.md, "What the runtime promises at the
 * edges", lists every lock and what the child gets of it).  Registered in
 * the constructor, before any handler of the program: glibc runs prepare
 * handlers last registered first, so ours runs after the program's (and
 * after lazy restore's, which completes the restore: restore.c), and the
 * child's first.
 *
 * prepare: every lock of a fork rank is taken in ascending rank (prim.h):
 * the runtime's start-up and shutdown, the heap's, the runtime's
 * descriptors, the signal dispositions, the recorded actions.  In a runtime
 * scope, from here to the end of the parent's or the child's handler: the
 * stores to the heap's locks are no write of the program's (the FASE
 * checker passes over them), and the forking thread never waits at the
 * gate for an epoch that may itself be waiting for something.
 * parent: released, the scope left.
 * child: every named lock reset (the ranked ones are this thread's), the
 * scope left, then the state the locks guard: the child is a private copy
 * that is never persisted, detached from the parent's pool, without an
 * epoch thread, and writes no statistics (its counters would overwrite the
 * parent's report). */
static __thread struct quiesce_scope fork_scope __attribute__((tls_model("initial-exec")));

static void fork_prepare(void)
{
	quiesce_runtime_enter(&fork_scope);
	prim_locks_fork_prepare();
}

static void fork_parent(void)
{
	prim_locks_fork_parent();
	quiesce_runtime_leave(&fork_scope);
}

static void fork_child(void)
{
	prim_locks_atfork_child();
	quiesce_runtime_leave(&fork_scope);
	stats_atfork_child();
	runtime_atfork_child();
	quiesce_atfork_child();
}

pid_t startup_fork(startup_fork_fn real_fork, startup_sigmask_fn real_sigmask)
{
	/* A handler that runs in the child before the C library's fork has
	 * finished there (a SCHED_FIFO parent that signals a child pinned to
	 * its CPU before it ever ran) waits for ever on the malloc and stdio
	 * locks fork holds when the process has other threads; without the
	 * runtime's it would have none.  Blocked, the signal waits for fork to
	 * return.  The signals a fault raises stay deliverable: blocked, they
	 * would end the process. */
	sigset_t async, old;
	sigfillset(&async);
	static const int synchronous[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS };
	for (size_t i = 0; i < sizeof(synchronous) / sizeof(synchronous[0]); i++)
		sigdelset(&async, synchronous[i]);
	bool blocked = real_sigmask(SIG_BLOCK, &async, &old) == 0;
	pid_t pid = real_fork();
	int saved_errno = errno;
	if (blocked)
		real_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved_errno;
	return pid;
}

static void strict_exit(void)
{
	log_msg(LOG_ERR, "PMTHREADS_STRICT=1: exiting (status %d) instead of running "
		"without persistence", RUNTIME_STRICT_EXIT);
	exit(RUNTIME_STRICT_EXIT);
}

/* The target's start: quiesce first (the main thread counted), then in
 * malloc mode the heap, whose pool brings the epoch thread.  No thread is
 * started otherwise: in nvmalloc mode the first nvmalloc (or other call that
 * opens the pool) starts it, and until then the program runs with exactly
 * its own threads (a multi-threaded process's fork and signal handlers
 * behave differently: pmthreads(7)). */
static void start_target(const struct startup_interposer *self, const struct config *cfg,
			 uint64_t load_ns)
{
	if (!linkage_locks_reach_us() && cfg->strict)
		strict_exit();
	stats_start(load_ns);
	quiesce_init();
	quiesce_set_thread_functions(*self->real_create, *self->real_join);
	self->main_thread_counted();
	quiesce_set_last_thread_fn(last_thread_exited);
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	if (cfg->heap == HEAP_MALLOC) {
		self->malloc_begin();
		/* On failure runtime_init has said why (with PMTHREADS_STRICT=1
		 * it exits); malloc stays glibc's. */
		(void)runtime_init();
	} else if (!linkage_program_uses_api()) {
		log_msg(LOG_WARN, "%s does not call the pmthreads API (nvmalloc, nvrecover), so "
			"with PMTHREADS_HEAP=nvmalloc nothing of it is persisted; run it with "
			"`pmthreads run --heap malloc` to keep its whole heap in a pool (see "
			"pmthreads(7) for what a restart gets back)", program_invocation_name);
		if (cfg->strict)
			strict_exit();
	}
	/* Before main takes its first lock: a lock the user says is no
	 * critical section must never have counted. */
	if (cfg->not_fase[0] != '\0')
		quiesce_set_site_classifier(stall_not_fase_site);
	quiesce_set_sync_timeout(cfg->sync_timeout_ms);
	atexit(at_exit);
	/* Last: the program's ending signals reach the final epoch only once
	 * everything it needs is in place. */
	started.pid = prim_getpid();
	fault_signal_set_ending(end_by_signal);
}

static void start(const struct startup_interposer *self, uint64_t load_ns)
{
	self->resolve_real();
	const struct config *cfg = config_get();
	if (config_error() != NULL) {
		log_msg(LOG_ERR, "%s", config_error());
		if (cfg->strict)
			strict_exit();
		/* The program runs on, unpersisted and unchanged. */
		log_msg(LOG_ERR, "running without persistence (PMTHREADS_STRICT=1 makes this "
			"an exit)");
		return;
	}
	log_set_level((enum log_level)config_log_level(cfg));
	bool is_target = target_is_self();
	exec_env_init(cfg, is_target);
	if (!is_target) {
		/* A wrapper on the way to the target, or a child of it: the
		 * wrappers forward, nothing is persisted, nothing is said. */
		if (target_is_wrapper())
			log_msg(LOG_DEBUG, "%s is a wrapper (time, timeout, env, nice...): not "
				"persisted, the program it runs is", program_invocation_name);
		else
			log_msg(LOG_DEBUG, "%s is not %s (PMTHREADS_PROGRAM): not persisted",
				program_invocation_name, cfg->program);
		return;
	}
	start_target(self, cfg, load_ns);
}

bool startup_claim_inside(fault_signal_claim_fn claim, const siginfo_t *si, void *ucontext)
{
	struct quiesce_scope s;
	quiesce_runtime_enter(&s);
	bool taken = claim(si, ucontext);
	quiesce_runtime_leave(&s);
	return taken;
}

void startup_run(const struct startup_interposer *self)
{
	uint64_t load_ns = prim_now_ns();
	/* Before any handler of the runtime can run. */
	fault_signal_set_inside(startup_claim_inside);
	/* The program starts as it would without us: with errno 0 at main,
	 * whatever the start-up's system calls left there (probes that are
	 * expected to fail, such as madvise or userfaultfd features). */
	int saved_errno = errno;
	start(self, load_ns);
	errno = saved_errno;
}
