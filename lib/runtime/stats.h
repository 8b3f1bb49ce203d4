/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats -- the statistics report written at exit (PMTHREADS_STATS).
 *
 * Owns: gathering the counters of quiesce, output, the heap and the FASE
 * checker, with the figures the runtime hands over (struct stats_runtime),
 * into one report, and writing it as one JSON object -- at exit, and every
 * second from the epoch thread, so that the last figures survive a kill -9.
 * Each module's counters are one X-macro list in its header
 * (base/stats_fields.h); the report writes every field of every list that
 * has a key, so a counter added to a list is reported without a line here.
 * A file is replaced atomically (written beside it, then renamed over it;
 * created 0600 with O_NOFOLLOW|O_EXCL, so a symlink planted at either name
 * is never followed).  The runtime calls this module, never the reverse
 * (tests/test_layers.py): what only the runtime knows comes in as a
 * struct stats_runtime.
 */
#ifndef PMT_STATS_H
#define PMT_STATS_H

#include "base/config.h"
#include "diagnose/fase_checker.h"
#include "diagnose/stall.h"
#include "epoch/epoch.h"
#include "heap/heap.h"
#include "output/output.h"
#include "persist/nvm.h"
#include "quiesce/quiesce.h"
#include "recovery/restore.h"
#include "track/tracker.h"

#include <stdbool.h>
#include <stdint.h>

/* What the runtime knows (runtime_get_stats fills it). */
struct stats_runtime {
	bool persistence;		/* a pool was opened in this process */
	const char *tracker;		/* backend name (a static string), NULL:
					 * no tracker was closed yet */
	struct tracker_stats tracker_stats; /* of the trackers closed so far
					 * (the tracker is closed before the
					 * final report) */
	struct epoch_counters epoch;	/* the epoch pipeline's (epoch.h) */
	struct restore_stats restore;	/* how the heap was restored (restore.h) */
	struct nvm_stats nvm;		/* the pool's write-back (nvm.h) */
	const char *nvm_name;		/* its backend (a static string), NULL:
					 * no pool was opened */
	uint64_t startup_ns;		/* runtime start-up, pool open to epoch
					 * thread, recovery included */
	uint64_t heap_reset_bytes;	/* malloc mode: an unreachable heap emptied */
	int io_error;			/* the pool's latched write-back errno; 0: none */
};

struct stats_report {
	const char *heap_mode;		/* "nvmalloc" | "malloc" */
	unsigned interval_ms;
	bool output_commit;		/* PMTHREADS_OUTPUT=commit */
	uint64_t wall_ns;		/* since the library was loaded */
	struct quiesce_stats quiesce;
	struct output_stats output;	/* output commit (lib/output) */
	struct heap_stats heap;
	struct fase_checker_stats checker;
	struct stats_runtime runtime;
	struct quiesce_stall stall;	/* stalled: what blocks epochs now */
};

/* Fill r from quiesce, output, the heap and the checker, and rt.
 * start_ns: prim_now_ns() when the library was loaded; cfg: its
 * configuration. */
void stats_collect(struct stats_report *r, const struct config *cfg, uint64_t start_ns,
		   const struct stats_runtime *rt);

/* The process that will write the report (the target) records when the
 * library was loaded; without this call nothing is written. */
void stats_start(uint64_t start_ns);
/* A fork child writes no report: its counters would overwrite the parent's
 * (pmthreads(7), STATISTICS). */
void stats_atfork_child(void);
/* Collect and write the report to PMTHREADS_STATS now (at exit).  Returns 0
 * (also when there is nothing to write) or -1 with err_get() set. */
int stats_write_final(const struct stats_runtime *rt);
/* From the epoch thread after each epoch: rewrite the file when a second has
 * passed since the last write (not for "-": stderr gets the report once). */
void stats_periodic(const struct stats_runtime *rt);
#define STATS_PERIOD_NS 1000000000ULL

/* Write r as one JSON object to path ("-": standard error), replacing the
 * file atomically.  Returns 0 or -1 with err_get() set.  Does not allocate. */
int stats_write_json(const struct stats_report *r, const char *path);

#endif
