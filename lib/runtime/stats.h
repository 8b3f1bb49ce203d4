/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats -- the statistics report written at exit (PMTHREADS_STATS).
 *
 * Owns: gathering the counters of quiesce, the runtime and the tracker into
 * one report, and writing it as one JSON object -- at exit, and every
 * second from the epoch thread, so that the last figures survive a kill -9.
 * A file is replaced atomically (written beside it, then renamed over it;
 * created 0600 with O_NOFOLLOW|O_EXCL, so a symlink planted at either name
 * is never followed).  The tracker is closed
 * before the report is written (at shutdown, or in a fork child), so the
 * runtime hands its counters over with stats_note_tracker when it closes it.
 */
#ifndef PMT_STATS_H
#define PMT_STATS_H

#include "base/config.h"
#include "output/output.h"
#include "quiesce/quiesce.h"
#include "runtime/runtime.h"
#include "track/tracker.h"

#include <stdbool.h>
#include <stdint.h>

struct stats_report {
	const char *heap_mode;		/* "nvmalloc" | "malloc" */
	const char *tracker;		/* backend name, "none" without a pool */
	unsigned interval_ms;
	bool output_commit;		/* PMTHREADS_OUTPUT=commit */
	bool persistence;		/* a pool was opened in this process */
	uint64_t wall_ns;		/* since the library was loaded */
	struct quiesce_stats quiesce;
	struct output_stats output;	/* output commit (lib/output) */
	struct runtime_counters runtime;
	struct tracker_stats tracker_stats;
};

/* The runtime closes its tracker: keep its backend name (a static string)
 * and counters for the report.  Counts add up over several trackers. */
void stats_note_tracker(const char *backend, const struct tracker_stats *st);

/* Fill r from quiesce, the runtime and the noted tracker counters.
 * start_ns: prim_now_ns() when the library was loaded; cfg: its
 * configuration. */
void stats_collect(struct stats_report *r, const struct config *cfg, uint64_t start_ns);

/* The process that will write the report (the target) records when the
 * library was loaded; without this call nothing is written. */
void stats_start(uint64_t start_ns);
/* A fork child: its counters would overwrite the parent's report. */
void stats_disable(void);
/* Collect and write the report to PMTHREADS_STATS now (at exit).  Returns 0
 * (also when there is nothing to write) or -1 with err_get() set. */
int stats_write_final(void);
/* From the epoch thread after each epoch: rewrite the file when a second has
 * passed since the last write (not for "-": stderr gets the report once). */
void stats_periodic(void);
#define STATS_PERIOD_NS 1000000000ULL

/* Write r as one JSON object to path ("-": standard error), replacing the
 * file atomically.  Returns 0 or -1 with err_get() set.  Does not allocate. */
int stats_write_json(const struct stats_report *r, const char *path);

#endif
