/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * epoch_log -- the per-epoch trace (PMTHREADS_EPOCH_LOG).
 *
 * Owns: one CSV file with a line per quiescent point: when it happened, how
 * long the application was paused, how many pages were dirty and how many
 * bytes reached NVM.  The exit report (stats) has totals and percentiles;
 * this is the time series behind them -- bytes persisted per epoch over time,
 * the pause distribution -- for plots and for finding the one slow epoch.
 *
 * The file is opened at start-up (so a bad path fails then, not silently at
 * the first epoch) and written only by the epoch thread, with one write(2)
 * per line and no allocation.
 */
#ifndef PMT_EPOCH_LOG_H
#define PMT_EPOCH_LOG_H

#include <stdbool.h>
#include <stdint.h>

struct epoch_record {
	uint64_t t_ns;			/* since the runtime started */
	uint64_t epoch;			/* VER_d once this epoch is durable */
	uint64_t pause_ns;		/* gate closed -> reopened */
	uint64_t pages;			/* dirty pages persisted (0: empty epoch) */
	uint64_t bytes_dirty;		/* pages * page size */
	uint64_t bytes_written;		/* bytes that differed and were written */
	uint64_t stage_ns;		/* collect + copies, inside the pause */
	uint64_t persist_ns;		/* stage_ns + write-back: NVM writes and fences */
	uint64_t period_ns;		/* achieved: since the previous epoch began */
	uint64_t pages_saved;		/* copied inside the pause */
	uint64_t conflicts;		/* pages read live and written meanwhile */
	bool durable;			/* this quiescent point's image is durable
					 * (false: carried over to the next) */
	uint64_t device_flushes;	/* msync/fdatasync calls since the previous line */
	uint64_t device_bytes;		/* bytes the backend sent to storage since then */
};

/* The header line of the file: the names of the fields, in order.  New
 * columns go at the end (readers ask for the names they know). */
#define EPOCH_LOG_HEADER \
	"t_ms,epoch,pause_us,pages,bytes_dirty,bytes_written,stage_us,persist_us,period_us," \
	"pages_saved,conflicts,durable,output_demanded,output_released,device_flushes,device_bytes\n"

/* Create (or truncate) path, mode 0600, and write the header.  Returns 0, or
 * -1 with err_get() naming PMTHREADS_EPOCH_LOG, the path and the reason. */
int epoch_log_open(const char *path);

/* Append one line; a no-op when no log is open.  A failed write is reported
 * once and the log is closed: tracing never stops persistence. */
void epoch_log_record(const struct epoch_record *r);

void epoch_log_close(void);

/* A line that is no epoch's: "# " and text (a stall, and its end).  Readers
 * skip lines that are not all numbers. */
void epoch_log_note(const char *text);

/* Output commit's columns, asked for at each line: demanded, whether held
 * output asked for an epoch since the previous line; released, the bytes of
 * held output given to the kernel since then.  Set by the runtime when
 * output commit is on; without it both columns are 0. */
typedef void (*epoch_log_output_fn)(bool *demanded, uint64_t *released);
void epoch_log_set_output(epoch_log_output_fn fn);

#endif
