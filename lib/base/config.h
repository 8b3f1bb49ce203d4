/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * config -- every environment option of the runtime, parsed in one place.
 *
 * Owns: the option table (name, `pmthreads run` flag, default, accepted
 * values, one line of help) and the one parse of the PMTHREADS_* variables
 * into one struct config per process (config_get).  The preload, the
 * runtime, the statistics and the `pmthreads` command all read that struct
 * or that table; `pmthreads --help` is printed from the table and a test
 * checks that pmthreads(7) names every entry.
 *
 * Rules: numbers are decimal with an optional size suffix (no octal, no
 * hex except for an address); a malformed value or a PMTHREADS_* variable
 * that is not in the table is an error naming the variable and the fix,
 * never a silent default; the environment is read with secure_getenv, so a
 * set-user-ID program ignores it.  Parsing never allocates (it may run
 * inside the malloc wrapper during bootstrap).
 */
#ifndef PMT_CONFIG_H
#define PMT_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum heap_mode { HEAP_NVMALLOC = 0, HEAP_MALLOC = 1 };
enum tracker_kind { TRACKER_AUTO = 0, TRACKER_UFFD = 1, TRACKER_MPROTECT = 2 };
enum nvm_kind { NVM_AUTO = 0, NVM_PMEM = 1, NVM_MSYNC = 2, NVM_LOG = 3, NVM_SIM = 4 };
/* Where an epoch's pages are read for the write-back (epoch.h). */
enum writeback_kind { WRITEBACK_LIVE = 0, WRITEBACK_PAUSED = 1 };
/* How a reopened pool's image reaches the heap (restore.h). */
enum restore_policy { RESTORE_AUTO = 0, RESTORE_EAGER = 1, RESTORE_LAZY = 2 };
/* PMTHREADS_OUTPUT: output to sockets and pipes released at once, or held
 * until durable (lib/output). */
enum output_mode { OUTPUT_OFF = 0, OUTPUT_COMMIT = 1 };
/* PMTHREADS_CHECK: off, report unlocked writes, report and exit non-zero. */
enum check_mode { CHECK_OFF = 0, CHECK_REPORT = 1, CHECK_FAIL = 2 };

#define CONFIG_MIN_POOL_SIZE (1ULL << 20)
#define CONFIG_MAX_POOL_SIZE (1ULL << 40)
/* The defaults that code outside the option table needs by name (the
 * others are written in the table only). */
#define CONFIG_DEFAULT_POOL_SIZE (8ULL << 30)	/* heap capacity, bytes: address space, the pool is sparse */
#define CONFIG_DEFAULT_SYNC_TIMEOUT_MS 10000	/* quiesce's, before the runtime sets it */
/* Check mode's epoch interval ceiling, ms: pages are re-protected at every
 * quiescent point, so a shorter interval lets more first writes fault. */
#define CONFIG_CHECK_INTERVAL_MS 10
/* A program in secure-execution mode (set-user-ID...) keeps its pool under
 * this directory, in a directory of its effective uid (runtime/privilege.h). */
#define CONFIG_SECURE_POOL_DIR "/var/lib/pmthreads"

struct config {
	char pool_path[PATH_MAX];	/* PMTHREADS_POOL, or the default path */
	bool pool_path_is_default;
	bool pool_dir_is_tmp;		/* the default is the /tmp fallback */
	bool pool_dir_is_secure;	/* the default of a privileged program */
	uint64_t pool_size;		/* PMTHREADS_POOL_SIZE: heap capacity */
	uint64_t log_size;		/* PMTHREADS_LOG_SIZE: a new pool's log ring, 0: by capacity */
	bool pool_size_given;		/* set explicitly (compared with a pool's) */
	bool verbose_given;		/* PMTHREADS_VERBOSE set: 0 then means quiet */
	unsigned interval_ms;		/* PMTHREADS_INTERVAL_MS (check mode: <= 10) */
	unsigned interval_ms_asked;	/* as given, before check mode */
	enum heap_mode heap;		/* PMTHREADS_HEAP=nvmalloc|malloc */
	enum tracker_kind tracker;	/* PMTHREADS_TRACKER (check mode: mprotect) */
	enum tracker_kind tracker_asked;	/* as given, before check mode */
	enum nvm_kind nvm;		/* PMTHREADS_NVM=auto|pmem|msync|log */
	enum writeback_kind writeback;	/* PMTHREADS_WRITEBACK=live|paused */
	enum restore_policy restore;	/* PMTHREADS_RESTORE=auto|eager|lazy */
	char stats_path[PATH_MAX];	/* PMTHREADS_STATS: "" off, "-" stderr */
	char epoch_log_path[PATH_MAX];	/* PMTHREADS_EPOCH_LOG: "" off */
	unsigned verbose;		/* PMTHREADS_VERBOSE=0|1|2 */
	enum check_mode check;		/* PMTHREADS_CHECK=0|1|fail */
	unsigned nvm_latency_ns;	/* PMTHREADS_NVM_LATENCY_NS, per line */
	uint64_t shadow_base;		/* PMTHREADS_SHADOW_BASE (new pools) */
	bool strict;			/* PMTHREADS_STRICT=1: errors exit */
	char program[PATH_MAX];		/* PMTHREADS_PROGRAM: the target, "" any */
	bool follow_children;		/* PMTHREADS_FOLLOW_CHILDREN=1 */
	enum output_mode output;	/* PMTHREADS_OUTPUT=off|commit */
	char not_fase[PATH_MAX];	/* PMTHREADS_NOT_FASE: function names,
					 * comma-separated; "" none */
	unsigned sync_timeout_ms;	/* PMTHREADS_SYNC_TIMEOUT_MS */
};

/* One option.  kind says how `value` text becomes the field at `offset`. */
enum config_kind {
	CONFIG_PATH,	/* char[PATH_MAX]; "" = unset (where allowed) */
	CONFIG_SIZE,	/* uint64_t; decimal with K/M/G/T suffix */
	CONFIG_UINT,	/* unsigned; decimal, min..max */
	CONFIG_ADDR,	/* uint64_t; decimal or 0x hex, 2 MiB aligned */
	CONFIG_CHOICE,	/* an enum: the index of the value in choices */
	CONFIG_BOOL,	/* bool; 0 or 1 */
	CONFIG_TOOL,	/* read by the pmthreads command only */
	CONFIG_NAMES,	/* char[PATH_MAX]; symbol names separated by commas */
};

struct config_option {
	const char *env;		/* PMTHREADS_... */
	const char *flag;		/* `pmthreads run` long option, or NULL */
	const char *metavar;		/* its argument ("MS"), NULL: a switch */
	bool optional_arg;		/* --flag alone, or --flag=VALUE */
	const char *flag_value;		/* what a switch (or --flag alone) sets */
	const char *help;		/* one line */
	enum config_kind kind;
	const char *const *choices;	/* CONFIG_CHOICE: accepted values */
	unsigned n_choices;
	unsigned long long min, max;	/* CONFIG_UINT / CONFIG_SIZE / CONFIG_ADDR */
	/* The default: a value of the kind (CONFIG_SIZE, _UINT, _ADDR, _BOOL;
	 * the index of a choice), which config_defaults stores and
	 * config_default_text writes; or, where the default is no such value
	 * (a path made at run time, "off", "auto"), its description. */
	unsigned long long def;
	const char *def_text;
	size_t offset;			/* in struct config; (size_t)-1 none */
};

/* The table, in the order --help lists it. */
const struct config_option *config_options(size_t *count);
/* o's default as --help shows it (in buf, or o->def_text). */
const char *config_default_text(const struct config_option *o, char *buf, size_t len);
/* The entry for a variable name, or NULL. */
const struct config_option *config_option_by_env(const char *env);

/* The process's configuration, parsed from the environment on the first
 * call (thread-safe) and never again.  When the environment is malformed:
 * the defaults, and config_error() returns the message (else NULL). */
const struct config *config_get(void);
/* The log level (base/log.h's enum log_level) c->verbose asks for: unset,
 * warnings and errors; PMTHREADS_VERBOSE=0 given explicitly, errors only
 * (a test suite or a script silences what is not an error); 1 info; 2
 * debug. */
int config_log_level(const struct config *c);
const char *config_error(void);

/* The program's own choice of pool (pmthreads_set_pool): path (NULL: keep)
 * and the capacity of a new pool (0: keep), validated as the variables are.
 * Only meaningful before the runtime starts; the caller checks that.
 * Returns 0 or -1 with err_get() set, changing nothing. */
int config_set_pool(const char *path, uint64_t size);

/* Fill *c from the environment (every PMTHREADS_* variable must be in the
 * table).  Returns 0, or -1 with err_get() naming the variable, its value
 * and what is accepted.  Check mode's adjustments are applied. */
int config_from_env(struct config *c);

/* Set one option from its text value into *c (the `pmthreads` command
 * validates its flags with this).  Returns 0 or -1 with err_get() set. */
int config_set(struct config *c, const struct config_option *o, const char *value);

/* The defaults (the table's), with the default pool path for this program. */
void config_defaults(struct config *c);

/* Parse a decimal size with an optional K/M/G/T suffix (powers of 1024,
 * "KiB"/"KB" accepted).  Returns 0 or -1 when s is not such a number or
 * overflows. */
int config_parse_size(const char *s, uint64_t *out);

const char *config_heap_name(enum heap_mode m);
const char *config_tracker_name(enum tracker_kind t);
const char *config_nvm_name(enum nvm_kind n);
const char *config_writeback_name(enum writeback_kind w);

#endif
