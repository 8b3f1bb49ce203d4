/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * process -- the library's start, the process's exit, fork.
 *
 * Load: take the configuration (lib/base/config.c parses it once), decide whether
 * this process is the target (lib/runtime/target.h; a wrapper or a child that is
 * not stays inert and never opens a pool), hand quiesce the real
 * pthread_create/join (its epoch thread must not pass through our
 * wrappers), start the epoch thread, and in malloc mode bring the runtime up
 * at once.  In nvmalloc mode the runtime starts at the first nvmalloc; until
 * then epochs are plain quiescent points with nothing to persist, and a
 * program that does not use the API at all is told once that nothing of it
 * is persisted, and one whose lock calls reach a runtime before this
 * library (lock_reach.c) that those locks are not seen.
 * PMTHREADS_STRICT=1 turns a configuration error, either of those, and every
 * start-up failure (see runtime.h) into an exit.
 *
 * Exit: a clean exit (return from main, exit(), the last thread's
 * pthread_exit) persists a final epoch and marks the pool clean
 * (runtime_shutdown), then writes the statistics.  The handler is registered
 * from the constructor, so it runs after every atexit handler and static
 * destructor the program registered later, which may still use the heap.
 * With PMTHREADS_CHECK=fail and unlocked writes found, the exit status
 * becomes 1.
 *
 * Fork: the child is a private copy that is never persisted; it detaches
 * from the parent's pool and has no epoch thread.
 */
#include "diagnose/fase_checker.h"
#include "diagnose/stall.h"
#include "base/config.h"
#include "base/export.h"
#include "base/log.h"
#include "preload.h"
#include "prim/prim.h"
#include "quiesce/quiesce.h"
#include "real.h"
#include "runtime/runtime.h"
#include "runtime/stats.h"
#include "runtime/target.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char *program_invocation_name;

const struct config *preload_config(void)
{
	return config_get();
}

static void at_exit(void)
{
	const struct config *cfg = config_get();
	runtime_shutdown();
	/* Without a pool (nvmalloc mode, no nvmalloc call) the runtime did
	 * not own the epoch thread. */
	quiesce_stop(false);
	if (runtime_write_final_stats() != 0)
		log_msg(LOG_ERR, "%s", err_get());
	if (cfg->check != CHECK_OFF)
		fase_checker_print_summary();
	if (cfg->check == CHECK_FAIL && fase_checker_violations() != 0) {
		/* The last handler to run (registered first); the C library
		 * flushes stdio only after it, so do that here. */
		fflush(NULL);
		_exit(1);
	}
}

/* The program's last thread has ended while the runtime's threads live on
 * (its main thread called pthread_exit): end the process as glibc does on
 * the last thread's exit. */
static void last_thread_exited(void)
{
	exit(0);
}

static void atfork_child(void)
{
	/* The child's counters would overwrite the parent's report. */
	stats_disable();
	runtime_atfork_child();
	quiesce_atfork_child();
}

/* ---- does the program use the API? ---- */

static const char *const api_names[] = { "nvmalloc", "nvrecover", "nvfree", "pmthreads_sync",
					 "pmthreads_durable_epoch",
					 /* nvrecovery.h's names for NVthreads programs */
					 "pmthreads_nvthreads_malloc",
					 "pmthreads_nvthreads_recover" };

/* Whether the dynamic string table of one loaded object names a function
 * of pmthreads.h: a program that calls the API (linked, or through weak
 * references as examples/bank.c does) has the name there. */
static int names_api(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	const void *own_base = arg;
	if ((const void *)info->dlpi_addr == own_base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
			continue;
		const ElfW(Dyn) *d = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
		uintptr_t strtab = 0;
		size_t strsz = 0;
		for (; d->d_tag != DT_NULL; d++) {
			if (d->d_tag == DT_STRTAB)
				strtab = d->d_un.d_ptr;
			else if (d->d_tag == DT_STRSZ)
				strsz = d->d_un.d_val;
		}
		if (strtab == 0 || strsz == 0)
			return 0;
		/* The loader relocates d_ptr in most objects, not in all
		 * (the vDSO). */
		if (strtab < info->dlpi_addr)
			strtab += info->dlpi_addr;
		const char *s = (const char *)strtab;
		for (size_t k = 0; k < sizeof(api_names) / sizeof(api_names[0]); k++) {
			size_t n = strlen(api_names[k]);
			for (const char *p = s; p + n < s + strsz;) {
				const char *hit = memmem(p, (size_t)(s + strsz - p), api_names[k], n + 1);
				if (hit == NULL)
					break;
				if (hit == s || hit[-1] == '\0')
					return 1;
				p = hit + 1;
			}
		}
		return 0;
	}
	return 0;
}

static bool program_uses_api(void)
{
	Dl_info own;
	if (dladdr((void *)program_uses_api, &own) == 0)
		return true;	/* cannot tell: say nothing */
	return dl_iterate_phdr(names_api, own.dli_fbase) != 0;
}

static void strict_exit(void)
{
	log_msg(LOG_ERR, "PMTHREADS_STRICT=1: exiting (status %d) instead of running "
		"without persistence", RUNTIME_STRICT_EXIT);
	exit(RUNTIME_STRICT_EXIT);
}

static void start(uint64_t load_ns)
{
	real_resolve();
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
	preload_env_init(cfg, is_target);
	if (!is_target) {
		/* A wrapper on the way to the target, or a child of it: the
		 * wrappers forward, nothing is persisted, nothing is said. */
		log_msg(LOG_DEBUG, "%s is not %s (PMTHREADS_PROGRAM): not persisted",
			program_invocation_name, cfg->program);
		return;
	}
	if (!preload_locks_reach_us() && cfg->strict)
		strict_exit();
	stats_start(load_ns);
	quiesce_set_thread_functions(real_fn.create, real_fn.join);
	preload_main_thread_counted();
	quiesce_set_last_thread_fn(last_thread_exited);
	pthread_atfork(NULL, NULL, atfork_child);
	if (cfg->heap == HEAP_MALLOC) {
		preload_malloc_init();
		preload_malloc_mode = true;
		/* On failure runtime_init has said why (with PMTHREADS_STRICT=1
		 * it exits); malloc stays glibc's. */
		(void)runtime_init();
	} else if (!program_uses_api()) {
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
	if (!quiesce_running() && quiesce_start(cfg->interval_ms, NULL, NULL) != 0)
		log_msg(LOG_ERR, "%s", err_get());
	atexit(at_exit);
}

__attribute__((constructor(101))) static void preload_start(void)
{
	uint64_t load_ns = prim_now_ns();
	/* The program starts as it would without us: with errno 0 at main,
	 * whatever the start-up's system calls left there (probes that are
	 * expected to fail, such as madvise or userfaultfd features). */
	int saved_errno = errno;
	start(load_ns);
	errno = saved_errno;
}
