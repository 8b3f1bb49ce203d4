/*
 * process -- the library's start, the process's exit, fork.
 *
 * Load: read the configuration, hand quiesce the real pthread_create/join
 * (its epoch thread must not pass through our wrappers), open the gate's
 * epoch thread, and in malloc mode bring the runtime up at once.  In
 * nvmalloc mode the runtime starts at the first nvmalloc; until then epochs
 * are plain quiescent points with nothing to persist (no pool is opened by a
 * program that never calls nvmalloc).
 *
 * Exit: a clean exit (return from main, exit(), the last thread's
 * pthread_exit) persists a final epoch and marks the pool clean
 * (runtime_shutdown), then writes the statistics.  The handler is registered
 * from the constructor, so it runs after every atexit handler and static
 * destructor the program registered later, which may still use the heap.
 *
 * Fork: the child is a private copy that is never persisted; it detaches
 * from the parent's pool and has no epoch thread.
 */
#include "config.h"
#include "export.h"
#include "log.h"
#include "preload.h"
#include "prim/prim.h"
#include "quiesce.h"
#include "real.h"
#include "runtime.h"
#include "stats.h"

#include <pthread.h>
#include <stdlib.h>

static struct config cfg;
static bool cfg_read;
static uint64_t load_ns;

const struct config *preload_config(void)
{
	if (!cfg_read)
		config_defaults(&cfg);
	return &cfg;
}

static void write_stats(void)
{
	if (cfg.stats_path[0] == '\0')
		return;
	struct stats_report r;
	stats_collect(&r, &cfg, load_ns);
	if (stats_write_json(&r, cfg.stats_path) != 0)
		log_msg(LOG_ERR, "%s", err_get());
}

static void at_exit(void)
{
	runtime_shutdown();
	/* Without a pool (nvmalloc mode, no nvmalloc call) the runtime did
	 * not own the epoch thread. */
	quiesce_stop(false);
	write_stats();
}

static void atfork_child(void)
{
	/* The child's counters would overwrite the parent's report. */
	cfg.stats_path[0] = '\0';
	runtime_atfork_child();
	quiesce_atfork_child();
}

__attribute__((constructor(101))) static void preload_start(void)
{
	load_ns = prim_now_ns();
	real_resolve();
	if (config_from_env(&cfg) != 0) {
		/* A malformed variable is reported and the program runs on,
		 * unpersisted and unchanged. */
		log_msg(LOG_ERR, "%s; running without persistence", err_get());
		config_defaults(&cfg);
		cfg_read = true;
		return;
	}
	cfg_read = true;
	log_set_level(cfg.verbose >= 2 ? LOG_DEBUG : cfg.verbose == 1 ? LOG_INFO : LOG_WARN);
	quiesce_set_thread_functions(real_fn.create, real_fn.join);
	pthread_atfork(NULL, NULL, atfork_child);
	if (cfg.heap == HEAP_MALLOC) {
		preload_malloc_init();
		preload_malloc_mode = true;
		/* On failure runtime_init has said why; malloc stays glibc's. */
		(void)runtime_init();
	}
	if (!quiesce_running() && quiesce_start(cfg.interval_ms, NULL, NULL) != 0)
		log_msg(LOG_ERR, "%s", err_get());
	atexit(at_exit);
}
