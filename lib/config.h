/*
 * config -- every environment option of the runtime, parsed in one place.
 *
 * Owns: the names, defaults, ranges and parsing of PMTHREADS_* variables.
 * Parsing never allocates (it may run inside the malloc wrapper during
 * bootstrap) and a malformed value is an error naming the variable, the value
 * and what is accepted -- never a silent default, never a crash.
 */
#ifndef PMT_CONFIG_H
#define PMT_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

enum heap_mode { HEAP_NVMALLOC = 0, HEAP_MALLOC = 1 };
enum tracker_kind { TRACKER_AUTO = 0, TRACKER_UFFD = 1, TRACKER_MPROTECT = 2 };
enum nvm_kind { NVM_AUTO = 0, NVM_PMEM = 1, NVM_MSYNC = 2, NVM_SIM = 3 };
/* Where an epoch's pages are read for the write-back (epoch.h). */
enum writeback_kind { WRITEBACK_GUARDED = 0, WRITEBACK_PAUSED = 1 };
/* How a reopened pool's image reaches the heap (restore.h). */
enum restore_policy { RESTORE_AUTO = 0, RESTORE_EAGER = 1, RESTORE_LAZY = 2 };

#define CONFIG_DEFAULT_POOL_SIZE (8ULL << 30)	/* heap capacity, bytes: address space, the pool is sparse */
#define CONFIG_MIN_POOL_SIZE (1ULL << 20)
#define CONFIG_MAX_POOL_SIZE (1ULL << 40)
#define CONFIG_DEFAULT_INTERVAL_MS 100
#define CONFIG_DEFAULT_SHADOW_BASE 0x600000000000ULL

struct config {
	char pool_path[PATH_MAX];	/* PMTHREADS_POOL, or the default path */
	bool pool_path_is_default;
	uint64_t pool_size;		/* PMTHREADS_POOL_SIZE: heap capacity */
	unsigned interval_ms;		/* PMTHREADS_INTERVAL_MS */
	enum heap_mode heap;		/* PMTHREADS_HEAP=nvmalloc|malloc */
	enum tracker_kind tracker;	/* PMTHREADS_TRACKER=auto|uffd|mprotect */
	enum nvm_kind nvm;		/* PMTHREADS_NVM=auto|pmem|msync */
	enum writeback_kind writeback;	/* PMTHREADS_WRITEBACK=guarded|paused */
	enum restore_policy restore;	/* PMTHREADS_RESTORE=auto|eager|lazy */
	char stats_path[PATH_MAX];	/* PMTHREADS_STATS: "" off, "-" stderr */
	char epoch_log_path[PATH_MAX];	/* PMTHREADS_EPOCH_LOG: "" off */
	int verbose;			/* PMTHREADS_VERBOSE=0|1|2 */
	bool check;			/* PMTHREADS_CHECK=0|1: FASE checker */
	unsigned nvm_latency_ns;	/* PMTHREADS_NVM_LATENCY_NS, per line */
	uint64_t shadow_base;		/* PMTHREADS_SHADOW_BASE (new pools) */
};

/* Fill *c from the environment.  Returns 0, or -1 with err_get() naming the
 * variable, its value and the accepted values. */
int config_from_env(struct config *c);

/* The defaults, with the default pool path for this program. */
void config_defaults(struct config *c);

/* Parse a size with an optional K/M/G/T suffix (powers of 1024).  Returns 0
 * or -1 when s is not such a number or overflows. */
int config_parse_size(const char *s, uint64_t *out);

const char *config_heap_name(enum heap_mode m);
const char *config_tracker_name(enum tracker_kind t);
const char *config_nvm_name(enum nvm_kind n);
const char *config_writeback_name(enum writeback_kind w);
const char *config_restore_name(enum restore_policy r);

#endif
