/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lock_reach -- does the program's locking reach our wrappers?
 *
 * The wrappers win only when this library comes before the runtime that
 * defines the lock functions in the global lookup order: under LD_PRELOAD
 * it always does; a program linked with -lpmthreads after -lgomp (or with
 * another library preloaded before us) calls libgomp's GOMP_critical_start
 * directly, and its critical sections are not FASEs.  At start the first
 * definition of one entry point per lock family is looked up; when it is
 * in the C library or an OpenMP runtime rather than here, that family's
 * locks are not seen: said once, with the fix.  A definition in any other
 * object (the program's own function of that name, a sanitizer's
 * interceptor that forwards to the next definition) is left alone: it may
 * well reach us.
 */
#include "base/log.h"
#include "preload.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>

/* One entry point per family, and what it stands for. */
static const struct {
	const char *name, *what;
} entries[] = {
	{ "pthread_mutex_lock", "pthread locks" },
	{ "mtx_lock", "C11 <threads.h> locks" },
	{ "GOMP_critical_start", "OpenMP critical sections" },
	{ "omp_set_lock", "OpenMP locks" },
	{ "__kmpc_critical", "OpenMP critical sections" },
};

/* The objects whose definitions are the real lock code. */
static const char *const runtimes[] = { "libc.so", "libpthread.so", "libgomp.so", "libomp.so",
					"libiomp5.so" };

static bool is_runtime(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base != NULL ? base + 1 : path;
	for (size_t i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]); i++)
		if (strncmp(base, runtimes[i], strlen(runtimes[i])) == 0)
			return true;
	return false;
}

bool preload_locks_reach_us(void)
{
	Dl_info own;
	if (dladdr((void *)preload_locks_reach_us, &own) == 0)
		return true;	/* cannot tell: say nothing */
	bool all = true;
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
		void *p = dlsym(RTLD_DEFAULT, entries[i].name);
		Dl_info where;
		if (p == NULL || dladdr(p, &where) == 0 || where.dli_fbase == own.dli_fbase ||
		    where.dli_fname == NULL || !is_runtime(where.dli_fname))
			continue;
		log_msg(LOG_WARN, "%s resolves to %s before %s, so the program's %s are not seen "
			"and are not failure-atomic; link with -lpmthreads before that library, "
			"or start the program with `pmthreads run` (LD_PRELOAD puts this library "
			"first)",
			entries[i].name, where.dli_fname, own.dli_fname, entries[i].what);
		all = false;
	}
	return all;
}
