/* stats -- the statistics report.  See stats.h. */
#include "stats.h"

#include "log.h"
#include "prim/prim.h"

#include <errno.h>
#include <fcntl.h>
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
	noted.batches_guarded += st->batches_guarded;
	noted.guard_faults += st->guard_faults;
	noted.guard_giveups += st->guard_giveups;
	prim_unlock(&noted_lock);
}

void stats_collect(struct stats_report *r, const struct config *cfg, uint64_t start_ns)
{
	memset(r, 0, sizeof(*r));
	r->heap_mode = config_heap_name(cfg->heap);
	r->interval_ms = cfg->interval_ms;
	r->wall_ns = prim_now_ns() - start_ns;
	quiesce_get_stats(&r->quiesce);
	runtime_get_counters(&r->runtime);
	enum runtime_state s = runtime_state();
	r->persistence = s == RUNTIME_RUNNING || (s == RUNTIME_DETACHED && runtime_heap_base());
	prim_lock(&noted_lock);
	r->tracker = noted_backend != NULL ? noted_backend : "none";
	r->tracker_stats = noted;
	prim_unlock(&noted_lock);
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
	put_u(&o, "pages_persisted", r->runtime.epoch.pages, false);
	put_u(&o, "lines_written", r->runtime.epoch.lines_written, false);
	put_u(&o, "bytes_written", r->runtime.epoch.bytes_written, false);
	put_u(&o, "bytes_compared", r->runtime.epoch.bytes_compared, false);
	put_u(&o, "fences", r->runtime.epoch.fences, false);
	put_u(&o, "persist_ns", r->runtime.epoch.persist_ns, false);
	put_u(&o, "stage_ns", r->runtime.epoch.stage_ns, false);
	put_u(&o, "pages_saved", r->runtime.epoch.pages_saved, false);
	put_u(&o, "unguarded_epochs", r->runtime.epoch.unguarded_epochs, false);
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
	put_u(&o, "tracker_faults", r->tracker_stats.faults, false);
	put_u(&o, "tracker_collections", r->tracker_stats.collections, false);
	put_u(&o, "tracker_pages", r->tracker_stats.pages_collected, false);
	put_u(&o, "tracker_overflows", r->tracker_stats.overflows, false);
	put_u(&o, "tracker_scan_errors", r->tracker_stats.scan_errors, false);
	put_u(&o, "tracker_batches_guarded", r->tracker_stats.batches_guarded, false);
	put_u(&o, "tracker_guard_faults", r->tracker_stats.guard_faults, false);
	put_u(&o, "tracker_guard_giveups", r->tracker_stats.guard_giveups, true);
	put(&o, "}\n");
	if (o.overflow) {
		err_set("stats: the report does not fit its buffer");
		return -1;
	}
	bool to_stderr = strcmp(path, "-") == 0;
	int fd = to_stderr ? STDERR_FILENO : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		err_set_errno(errno, "stats: cannot open %s", path);
		return -1;
	}
	if (prim_write_all(fd, o.buf, o.len) != 0) {
		err_set_errno(errno, "stats: cannot write %s", path);
		if (!to_stderr)
			close(fd);
		return -1;
	}
	if (!to_stderr)
		close(fd);
	return 0;
}
