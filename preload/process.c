/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * process -- the library constructor: hands lib/runtime/startup.h what only
 * the interposition layer knows (how to resolve the real functions, where
 * the real pthread_create/join are, how the main thread and malloc mode are
 * switched on) and starts the runtime; fork, forwarded.  Start-up order,
 * strict-mode policy, exit and fork are startup.c's.
 */
#include "base/export.h"
#include "preload.h"
#include "real.h"
#include "runtime/interpose.h"

/* Malloc mode: what must stay outside the heap found first (malloc.c). */
static void malloc_begin(void)
{
	preload_malloc_init();
	preload_malloc_mode = true;
}

__attribute__((constructor(101))) static void preload_start(void)
{
	static const struct startup_interposer self = {
		.resolve_real = real_resolve,
		.real_create = &real_fn.create,
		.real_join = &real_fn.join,
		.main_thread_counted = preload_main_thread_counted,
		.malloc_begin = malloc_begin,
	};
	startup_run(&self);
}

PMT_EXPORT pid_t fork(void)
{
	return startup_fork(REAL(fork), REAL(sigmask));
}
