/* SPDX-License-Identifier: BSD-3-Clause */
/* ending -- the end of the process, run on the epoch thread: when the last
 * application thread has ended (glibc's exit(0) after main's pthread_exit,
 * which the runtime's own threads must not hold off), or when a signal whose
 * default action ends the process asks for the runtime's part of an exit
 * (quiesce_end_on_epoch_thread). */
#include "quiesce/quiesce_internal.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

enum { END_NONE, END_RUNNING, END_DONE };

static struct ending {
	/* Application threads alive (main counts from the start; atomic), the
	 * function that ends the process when none is (atomic), and the signal
	 * mask of the thread that installed it, for the exit on the epoch
	 * thread (written before fn is published, read after). */
	atomic_int app;
	_Atomic(quiesce_last_thread_fn) last_thread_fn;
	sigset_t start_mask;
	/* The end by a signal: the function the first caller asked for, and
	 * how far the epoch thread has got with it (END_*; futex).  Atomics. */
	_Atomic(quiesce_end_fn) end_fn;
	atomic_uint end_state;
} ending = { .app = 1 };

/* ---- the last application thread ---- */

void quiesce_set_last_thread_fn(quiesce_last_thread_fn fn)
{
	pthread_sigmask(SIG_BLOCK, NULL, &ending.start_mask);
	atomic_store(&ending.last_thread_fn, fn);
}

void quiesce_app_thread_added(void)
{
	atomic_fetch_add(&ending.app, 1);
}

void quiesce_app_thread_gone(void)
{
	if (atomic_fetch_sub(&ending.app, 1) == 1)
		fase_wake_epoch();
}

/* While no application thread is counted: whether only the runtime's threads
 * are left, and if so the end of the process (never returns then).  A thread
 * counted as the runtime's that is still finishing, or one the wrapper never
 * saw, only delays it. */
static void check_last_thread(void)
{
	quiesce_last_thread_fn fn = atomic_load(&ending.last_thread_fn);
	if (fn == NULL)
		return;
	int live = prim_live_threads();
	if (live < 0 || live > quiesce_internal_threads_alive())
		return;
	/* The exit handlers (the program's too) run here: with the mask the
	 * program started with, as on its own last thread. */
	pthread_sigmask(SIG_SETMASK, &ending.start_mask, NULL);
	/* The program's exit handlers run here as on its own last thread:
	 * their locks are FASEs, their allocations the program's. */
	quiesce_runtime_become_app();
	fn();
}

bool quiesce_no_app_thread(void)
{
	if (atomic_load(&ending.app) > 0)
		return false;
	check_last_thread();
	return true;
}

/* ---- an ending signal ---- */

void quiesce_end_if_asked(void)
{
	quiesce_end_fn fn = atomic_load(&ending.end_fn);
	if (fn == NULL)
		return;
	atomic_store(&ending.end_state, END_RUNNING);
	fn();
	atomic_store(&ending.end_state, END_DONE);
	prim_futex_wake(&ending.end_state, INT_MAX);
	/* The handler ends the process now; this thread has nothing left to
	 * do, and must not start another epoch on a closed pool. */
	for (;;)
		prim_futex_wait(&ending.end_state, END_DONE, 0);
}

bool quiesce_end_on_epoch_thread(quiesce_end_fn fn, uint64_t bound_ns)
{
	if (!atomic_load(&quiesce_epoch.running) || atomic_load(&quiesce_epoch.stopping) ||
	    quiesce_self.on_epoch_thread)
		return false;
	quiesce_end_fn none = NULL;
	(void)atomic_compare_exchange_strong(&ending.end_fn, &none, fn);
	fase_wake_epoch();
	uint64_t until = prim_now_ns() + bound_ns;
	for (;;) {
		unsigned st = atomic_load(&ending.end_state);
		if (st == END_DONE)
			return true;
		/* Stopped by an exit before it began ours: that exit ends the
		 * process its own way. */
		if (st == END_NONE && !atomic_load(&quiesce_epoch.running))
			return false;
		uint64_t now = prim_now_ns();
		if (now >= until)
			return false;
		uint64_t left = until - now;
		prim_futex_wait(&ending.end_state, st, left < 10000000ULL ? left : 10000000ULL);
	}
}

void quiesce_ending_atfork_child(void)
{
	/* The forking thread is the child's only one; the function that ends
	 * the process and its mask stay. */
	atomic_store(&ending.app, 1);
	atomic_store(&ending.end_fn, NULL);
	atomic_store(&ending.end_state, END_NONE);
}
