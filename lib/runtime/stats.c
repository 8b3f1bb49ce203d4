/* SPDX-License-Identifier: BSD-3-Clause */
/* stats -- the statistics report.  See stats.h. */
#include "runtime/stats.h"

#include "base/log.h"
#include "base/own_fds.h"
#include "prim/prim.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void stats_collect(struct stats_report *r, const struct config *cfg, uint64_t start_ns,
		   const struct stats_runtime *rt)
{
	memset(r, 0, sizeof(*r));
	r->heap_mode = config_heap_name(cfg->heap);
	r->interval_ms = cfg->interval_ms;
	r->output_commit = cfg->output == OUTPUT_COMMIT;
	r->wall_ns = prim_now_ns() - start_ns;
	quiesce_get_stats(&r->quiesce);
	output_get_stats(&r->output);
	heap_get_stats(&r->heap);
	fase_checker_get_stats(&r->checker);
	(void)quiesce_get_stall(&r->stall);
	r->runtime = *rt;
}

/* PMTHREADS_STATS=-: the standard error the program started with, kept in a
 * descriptor of our own so that a program that closes (or redirects) fd 2
 * does not lose the report or receive it in one of its files.  A descriptor
 * is used only while it still refers to that same file. */
static int saved_stderr = -1;
static struct stat saved_stderr_st;

static void save_stderr(void)
{
	if (prim_fstat(STDERR_FILENO, &saved_stderr_st) != 0)
		return;
	saved_stderr = prim_dup_cloexec(STDERR_FILENO, 3);
	own_fd_keep(&saved_stderr, "standard error for the report");
}

static bool is_saved_file(int fd)
{
	struct stat st;
	return fd >= 0 && prim_fstat(fd, &st) == 0 && st.st_dev == saved_stderr_st.st_dev &&
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

/* Replace path with buf atomically (prim_replace_file), saying what failed. */
static int replace_file(const char *path, const char *buf, size_t len)
{
	char tmp[PATH_MAX];
	enum prim_replace_step failed;
	if (prim_replace_file(path, buf, len, tmp, sizeof(tmp), &failed) == 0)
		return 0;
	switch (failed) {
	case PRIM_REPLACE_NAME:
		err_set("PMTHREADS_STATS=\"%s\": the path is too long", path);
		break;
	case PRIM_REPLACE_CREATE:
		err_set_errno(errno, "PMTHREADS_STATS: cannot create %s", tmp);
		break;
	case PRIM_REPLACE_WRITE:
		err_set_errno(errno, "PMTHREADS_STATS: cannot write %s", tmp);
		break;
	case PRIM_REPLACE_RENAME:
		err_set_errno(errno, "PMTHREADS_STATS: cannot rename %s to %s", tmp, path);
		break;
	}
	return -1;
}

/* Appending formatter over a fixed buffer: the report is written at exit,
 * possibly with the heap gone, so nothing here allocates.  Each field after
 * the first begins with the comma that ends the one before it. */
struct out {
	char buf[8192];
	size_t len;
	unsigned fields;
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

static void put_key(struct out *o, const char *key)
{
	put(o, "%s\n  \"%s\": ", o->fields++ == 0 ? "" : ",", key);
}

static void put_u(struct out *o, const char *key, uint64_t v)
{
	put_key(o, key);
	put(o, "%llu", (unsigned long long)v);
}

static void put_bool(struct out *o, const char *key, bool v)
{
	put_key(o, key);
	put(o, "%s", v ? "true" : "false");
}

static void put_str(struct out *o, const char *key, const char *v)
{
	put_key(o, key);
	put(o, "\"%s\"", v);
}

/* One field of a module's list (base/stats_fields.h); key NULL: not here. */
static void put_count(struct out *o, const char *key, uint64_t v)
{
	if (key != NULL)
		put_u(o, key, v);
}
static void put_value(struct out *o, const char *key, uint64_t v) { put_count(o, key, v); }
static void put_flag(struct out *o, const char *key, bool v)
{
	if (key != NULL)
		put_bool(o, key, v);
}
#define PUT_FIELD(kind, field, key) put_##kind(o, key, s->field);

/* Every field of every list, in the list's order. */
static void put_quiesce(struct out *o, const struct quiesce_stats *s) { QUIESCE_STATS_FIELDS(PUT_FIELD) }
static void put_output(struct out *o, const struct output_stats *s) { OUTPUT_STATS_FIELDS(PUT_FIELD) }
static void put_epoch(struct out *o, const struct epoch_counters *s) { EPOCH_COUNTERS_FIELDS(PUT_FIELD) }
static void put_persist(struct out *o, const struct persist_stats *s) { PERSIST_STATS_FIELDS(PUT_FIELD) }
static void put_restore(struct out *o, const struct restore_stats *s) { RESTORE_STATS_FIELDS(PUT_FIELD) }
static void put_tracker(struct out *o, const struct tracker_stats *s) { TRACKER_STATS_FIELDS(PUT_FIELD) }
static void put_heap(struct out *o, const struct heap_stats *s) { HEAP_STATS_FIELDS(PUT_FIELD) }
static void put_nvm(struct out *o, const struct nvm_stats *s) { NVM_STATS_FIELDS(PUT_FIELD) }
static void put_checker(struct out *o, const struct fase_checker_stats *s)
{
	FASE_CHECKER_STATS_FIELDS(PUT_FIELD)
}

int stats_write_json(const struct stats_report *r, const char *path)
{
	static struct out o;	/* one report per process; too big for some stacks */
	const struct stats_runtime *rt = &r->runtime;
	o.len = 0;
	o.fields = 0;
	o.overflow = false;
	/* The order of the keys is the order they were added in; tools read
	 * them by name.  New lists go at the end. */
	put(&o, "{");
	put_str(&o, "heap_mode", r->heap_mode);
	put_str(&o, "tracker", rt->tracker != NULL ? rt->tracker : "none");
	put_bool(&o, "persistence", rt->persistence);
	/* The failed write-back's errno (nvm.h), 0 when none: persistence
	 * stopped then. */
	put_u(&o, "io_error", (uint64_t)rt->io_error);
	put_u(&o, "interval_ms", r->interval_ms);
	put_key(&o, "wall_s");
	put(&o, "%.3f", (double)r->wall_ns / 1e9);
	put_quiesce(&o, &r->quiesce);
	put_bool(&o, "output_commit", r->output_commit);
	put_output(&o, &r->output);
	put_epoch(&o, &rt->epoch);
	put_persist(&o, &rt->epoch.persist);
	put_str(&o, "restore", rt->restore.lazy ? "lazy" : "eager");
	put_restore(&o, &rt->restore);
	put_u(&o, "startup_ns", rt->startup_ns);
	put_u(&o, "heap_reset_bytes", rt->heap_reset_bytes);
	put_tracker(&o, &rt->tracker_stats);
	put_heap(&o, &r->heap);
	put_nvm(&o, &rt->nvm);
	/* Which write-back ran: tests check that the medium they asked
	 * for (emulated pmem, a file on a disk) got the backend it should. */
	put_str(&o, "nvm", rt->nvm_name != NULL ? rt->nvm_name : "none");
	put_checker(&o, &r->checker);
	/* The first FASE that blocks epochs now (quiesce.h's Stalls): its
	 * thread, lock and call site; 0 and "" when none. */
	const struct quiesce_stall_holder *h = r->stall.n_holders > 0 ? &r->stall.holders[0] : NULL;
	char text[256] = "";
	put_u(&o, "stall_thread", h != NULL ? (uint64_t)h->tid : 0);
	if (h != NULL)
		snprintf(text, sizeof(text), "%#lx", (unsigned long)h->lock);
	put_str(&o, "stall_lock", text);
	text[0] = '\0';
	if (h != NULL)
		stall_site_name(h->site, text, sizeof(text));
	put_str(&o, "stall_site", text);
	put(&o, "\n}\n");
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
/* Reset in a fork child, which writes no report (issue 46: the epoch
 * thread held it while rewriting the file, and a child copied at that
 * moment waited for it at exit, in stats_write_final). */
PRIM_LOCK_NAMED(write_lock, report_writer, "runtime/stats: the statistics file's writer",
		PRIM_FORK_RESET);

void stats_start(uint64_t start_ns)
{
	if (strcmp(config_get()->stats_path, "-") == 0)
		save_stderr();
	atomic_store(&started_ns, start_ns);
}
void stats_atfork_child(void) { atomic_store(&started_ns, 0); }

static int write_now(const struct stats_runtime *rt)
{
	const struct config *cfg = config_get();
	uint64_t t0 = atomic_load(&started_ns);
	if (t0 == 0 || cfg->stats_path[0] == '\0')
		return 0;
	static struct stats_report r;	/* under write_lock */
	stats_collect(&r, cfg, t0, rt);
	return stats_write_json(&r, cfg->stats_path);
}

int stats_write_final(const struct stats_runtime *rt)
{
	prim_lock(&write_lock);
	int rc = write_now(rt);
	/* Nothing after the final report: a periodic write still pending on
	 * the epoch thread must not replace it with older figures. */
	atomic_store(&started_ns, 0);
	prim_unlock(&write_lock);
	return rc;
}

void stats_periodic(const struct stats_runtime *rt)
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
	if (write_now(rt) != 0)
		log_msg(LOG_WARN, "%s; the statistics file is not updated", err_get());
	prim_unlock(&write_lock);
}
