/* SPDX-License-Identifier: BSD-3-Clause */
/* stats -- the statistics report.  See stats.h. */
#include "runtime/stats.h"

#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static prim_lock_t noted_lock = PRIM_LOCK_INIT;
static const char *noted_backend;
static struct tracker_stats noted;

void stats_note_tracker(const char *backend, const struct tracker_stats *st)
{
	prim_lock(&noted_lock);
	noted_backend = backend;
	noted.faults += st->faults;
	noted.collections += st->collections;
	noted.pages_collected += st->pages_collected;
	noted.overflows += st->overflows;
	noted.scan_errors += st->scan_errors;
	noted.rescans += st->rescans;
	noted.rescan_failures += st->rescan_failures;
	prim_unlock(&noted_lock);
}

void stats_collect(struct stats_report *r, const struct config *cfg, uint64_t start_ns)
{
	memset(r, 0, sizeof(*r));
	r->heap_mode = config_heap_name(cfg->heap);
	r->interval_ms = cfg->interval_ms;
	r->output_commit = cfg->output == OUTPUT_COMMIT;
	r->wall_ns = prim_now_ns() - start_ns;
	quiesce_get_stats(&r->quiesce);
	output_get_stats(&r->output);
	runtime_get_counters(&r->runtime);
	enum runtime_state s = runtime_state();
	r->persistence = s == RUNTIME_RUNNING || (s == RUNTIME_DETACHED && runtime_heap_base());
	prim_lock(&noted_lock);
	r->tracker = noted_backend != NULL ? noted_backend : "none";
	r->tracker_stats = noted;
	prim_unlock(&noted_lock);
}

/* PMTHREADS_STATS=-: the standard error the program started with, kept in a
 * descriptor of our own so that a program that closes (or redirects) fd 2
 * does not lose the report or receive it in one of its files.  A descriptor
 * is used only while it still refers to that same file. */
static int saved_stderr = -1;
static struct stat saved_stderr_st;

static void save_stderr(void)
{
	if (fstat(STDERR_FILENO, &saved_stderr_st) != 0)
		return;
	saved_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
}

static bool is_saved_file(int fd)
{
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == saved_stderr_st.st_dev &&
	       st.st_ino == saved_stderr_st.st_ino;
}

static int stderr_fd(void)
{
	if (is_saved_file(saved_stderr))
		return saved_stderr;
	if (saved_stderr < 0 || is_saved_file(STDERR_FILENO))
		return STDERR_FILENO;
	return -1;
}

/* Replace path with buf atomically: a reader (or a kill -9) sees the old
 * report or the new one, never half of one. */
static int replace_file(const char *path, const char *buf, size_t len)
{
	char tmp[PATH_MAX];
	int n = snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		err_set("PMTHREADS_STATS=\"%s\": the path is too long", path);
		return -1;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		/* Left by an earlier process with our pid that was killed
		 * mid-write; only a regular file of ours is removed. */
		struct stat st;
		if (lstat(tmp, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid())
			unlink(tmp);
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		err_set_errno(errno, "PMTHREADS_STATS: cannot create %s", tmp);
		return -1;
	}
	if (prim_write_all(fd, buf, len) != 0) {
		err_set_errno(errno, "PMTHREADS_STATS: cannot write %s", tmp);
		close(fd);
		unlink(tmp);
		return -1;
	}
	close(fd);
	if (rename(tmp, path) != 0) {
		err_set_errno(errno, "PMTHREADS_STATS: cannot rename %s to %s", tmp, path);
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Appending formatter over a fixed buffer: the report is written at exit,
 * possibly with the heap gone, so nothing here allocates. */
struct out {
	char buf[4096];
	size_t len;
	bool overflow;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->buf + o->len, sizeof(o->buf) - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(o->buf) - o->len)
		o->overflow = true;
	else
		o->len += (size_t)n;
}

static void put_u(struct out *o, const char *key, uint64_t v, bool last)
{
	put(o, "  \"%s\": %llu%s\n", key, (unsigned long long)v, last ? "" : ",");
}

int stats_write_json(const struct stats_report *r, const char *path)
{
	static struct out o;	/* one report per process; too big for some stacks */
	o.len = 0;
	o.overflow = false;
	put(&o, "{\n");
	put(&o, "  \"heap_mode\": \"%s\",\n", r->heap_mode);
	put(&o, "  \"tracker\": \"%s\",\n", r->tracker);
	put(&o, "  \"persistence\": %s,\n", r->persistence ? "true" : "false");
	/* The failed write-back's errno (nvm.h), 0 when none: persistence
	 * stopped then. */
	put_u(&o, "io_error", (uint64_t)r->runtime.io_error, false);
	put_u(&o, "interval_ms", r->interval_ms, false);
	put(&o, "  \"wall_s\": %.3f,\n", (double)r->wall_ns / 1e9);
	put_u(&o, "epochs", r->quiesce.epochs, false);
	put_u(&o, "epochs_persisted", r->runtime.epoch.epochs, false);
	put_u(&o, "epochs_empty", r->runtime.epoch.empty_epochs, false);
	put_u(&o, "abandoned", r->quiesce.abandoned, false);
	put_u(&o, "syncs", r->quiesce.syncs, false);
	put_u(&o, "pause_ns_p50", r->quiesce.pause_ns_p50, false);
	put_u(&o, "pause_ns_p99", r->quiesce.pause_ns_p99, false);
	put_u(&o, "pause_ns_max", r->quiesce.pause_ns_max, false);
	put_u(&o, "pause_ns_total", r->quiesce.pause_ns_total, false);
	put_u(&o, "abandoned_ns_total", r->quiesce.abandoned_ns_total, false);
	put_u(&o, "blocking_in_fase", r->quiesce.blocking_in_fase, false);
	put(&o, "  \"membarrier\": %s,\n", r->quiesce.membarrier ? "true" : "false");
	put_u(&o, "period_ns_p50", r->quiesce.period_ns_p50, false);
	put_u(&o, "period_ns_p99", r->quiesce.period_ns_p99, false);
	put_u(&o, "period_ns_max", r->quiesce.period_ns_max, false);
	put_u(&o, "period_ns_mean", r->quiesce.period_ns_mean, false);
	put_u(&o, "late_epochs", r->quiesce.late_epochs, false);
	put_u(&o, "late_ns_total", r->quiesce.late_ns_total, false);
	put(&o, "  \"output_commit\": %s,\n", r->output_commit ? "true" : "false");
	put_u(&o, "output_writes_held", r->output.writes_held, false);
	put_u(&o, "output_bytes_held", r->output.bytes_held, false);
	put_u(&o, "output_bytes_released", r->output.bytes_released, false);
	put_u(&o, "output_bytes_dropped", r->output.bytes_dropped, false);
	put_u(&o, "output_epochs_demanded", r->output.epochs_demanded, false);
	put_u(&o, "output_waits_full", r->output.waits_full, false);
	put_u(&o, "output_over_bound_in_fase", r->output.over_bound_in_fase, false);
	put_u(&o, "output_release_errors", r->output.release_errors, false);
	put_u(&o, "output_hold_ns_p50", r->output.hold_ns_p50, false);
	put_u(&o, "output_hold_ns_p99", r->output.hold_ns_p99, false);
	put_u(&o, "output_hold_ns_max", r->output.hold_ns_max, false);
	put_u(&o, "pages_persisted", r->runtime.epoch.pages, false);
	put_u(&o, "lines_written", r->runtime.epoch.lines_written, false);
	put_u(&o, "bytes_written", r->runtime.epoch.bytes_written, false);
	put_u(&o, "bytes_compared", r->runtime.epoch.bytes_compared, false);
	put_u(&o, "fences", r->runtime.epoch.fences, false);
	put_u(&o, "persist_ns", r->runtime.epoch.persist_ns, false);
	put_u(&o, "stage_ns", r->runtime.epoch.stage_ns, false);
	put_u(&o, "pages_saved", r->runtime.epoch.pages_saved, false);
	put_u(&o, "paused_epochs", r->runtime.epoch.paused_epochs, false);
	put_u(&o, "carried_epochs", r->runtime.epoch.carried_epochs, false);
	put_u(&o, "conflict_pages", r->runtime.epoch.conflict_pages, false);
	put_u(&o, "pool_bytes_populated", r->runtime.epoch.pool_bytes_populated, false);
	put_u(&o, "slot_bytes_resident", r->runtime.epoch.slot_bytes_resident, false);
	put_u(&o, "slot_shrinks", r->runtime.epoch.slot_shrinks, false);
	const struct restore_stats *rs = &r->runtime.restore;
	put(&o, "  \"restore\": \"%s\",\n", rs->lazy ? "lazy" : "eager");
	put_u(&o, "recovered_pages", rs->pages, false);
	put_u(&o, "recovery_ns", rs->usable_ns, false);
	put_u(&o, "startup_ns", r->runtime.startup_ns, false);
	put_u(&o, "restore_complete_ns", rs->complete_ns, false);
	put_u(&o, "restored_eager", rs->eager_pages, false);
	put_u(&o, "restored_on_fault", rs->fault_pages, false);
	put_u(&o, "restored_background", rs->background_pages, false);
	put_u(&o, "restored_finish", rs->finish_pages, false);
	put_u(&o, "restore_zero_fills", rs->zero_pages, false);
	put_u(&o, "heap_reset_bytes", r->runtime.heap_reset_bytes, false);
	put_u(&o, "tracker_faults", r->tracker_stats.faults, false);
	put_u(&o, "tracker_collections", r->tracker_stats.collections, false);
	put_u(&o, "tracker_pages", r->tracker_stats.pages_collected, false);
	put_u(&o, "tracker_overflows", r->tracker_stats.overflows, false);
	put_u(&o, "tracker_scan_errors", r->tracker_stats.scan_errors, false);
	put_u(&o, "tracker_rescans", r->tracker_stats.rescans, false);
	put_u(&o, "tracker_rescan_failures", r->tracker_stats.rescan_failures, true);
	put(&o, "}\n");
	if (o.overflow) {
		err_set("stats: the report does not fit its buffer");
		return -1;
	}
	if (strcmp(path, "-") == 0) {
		int fd = stderr_fd();
		if (fd < 0) {
			err_set("stats: standard error is closed or replaced; the report is lost "
				"(set PMTHREADS_STATS to a file)");
			return -1;
		}
		if (prim_write_all(fd, o.buf, o.len) != 0) {
			err_set_errno(errno, "stats: cannot write the report to standard error");
			return -1;
		}
		return 0;
	}
	return replace_file(path, o.buf, o.len);
}

/* ---- the report's life in a process ---- */

static _Atomic uint64_t started_ns;	/* 0: this process writes no report */
static uint64_t last_periodic_ns;	/* epoch thread only */
static prim_lock_t write_lock = PRIM_LOCK_INIT;	/* one writer of the file at a time */

void stats_start(uint64_t start_ns)
{
	if (strcmp(config_get()->stats_path, "-") == 0)
		save_stderr();
	atomic_store(&started_ns, start_ns);
}
void stats_disable(void) { atomic_store(&started_ns, 0); }

static int write_now(void)
{
	const struct config *cfg = config_get();
	uint64_t t0 = atomic_load(&started_ns);
	if (t0 == 0 || cfg->stats_path[0] == '\0')
		return 0;
	static struct stats_report r;	/* under write_lock */
	stats_collect(&r, cfg, t0);
	return stats_write_json(&r, cfg->stats_path);
}

int stats_write_final(void)
{
	prim_lock(&write_lock);
	int rc = write_now();
	/* Nothing after the final report: a periodic write still pending on
	 * the epoch thread must not replace it with older figures. */
	atomic_store(&started_ns, 0);
	prim_unlock(&write_lock);
	return rc;
}

void stats_periodic(void)
{
	const struct config *cfg = config_get();
	if (cfg->stats_path[0] == '\0' || strcmp(cfg->stats_path, "-") == 0)
		return;
	uint64_t now = prim_now_ns();
	if (now - last_periodic_ns < STATS_PERIOD_NS)
		return;
	last_periodic_ns = now;
	if (!prim_trylock(&write_lock))
		return;	/* the final report is being written */
	if (write_now() != 0)
		log_msg(LOG_WARN, "%s; the statistics file is not updated", err_get());
	prim_unlock(&write_lock);
}
