/* SPDX-License-Identifier: BSD-3-Clause */
/* runtime -- start-up, shutdown and fork.  See runtime.h. */
#include "runtime/runtime.h"

#include "diagnose/fase_checker.h"
#include "diagnose/stall.h"
#include "diagnose/symbolize.h"
#include "epoch/epoch.h"
#include "epoch/epoch_log.h"
#include "heap/heap.h"
#include "base/log.h"
#include "output/output.h"
#include "output/stdout.h"
#include "persist/nvm_log.h"
#include "persist/persist.h"
#include "persist/pool.h"
#include "prim/prim.h"
#include "quiesce/quiesce.h"
#include "recovery/restore.h"
#include "runtime/aio_pins.h"
#include "runtime/kernel_stacks.h"
#include "runtime/memory_limits.h"
#include "runtime/memory_lock.h"
#include "runtime/privilege.h"
#include "runtime/meta_sums.h"
#include "runtime/stats.h"
#include "runtime/target.h"
#include "track/fault_signal.h"
#include "track/tracker.h"

#include <errno.h>
#include <signal.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The runtime's state, one struct per concern; each field says what guards
 * it.  A fork child resets them in runtime_atfork_child. */

/* The runtime and the modules it brought up. */
static struct runtime {
	_Atomic int state;		/* enum runtime_state: changed under init_lock, read atomically */
	prim_lock_t init_lock;		/* start-up and shutdown */
	/* The start-up failure, kept so that every later caller gets the
	 * reason: under init_lock. */
	char init_error[512];
	int init_errno;			/* its cause, as an errno (runtime_init_errno) */
	/* Written by start() under init_lock, before state says RUNNING;
	 * read-only after: */
	struct config cfg;
	void *heap_base;
	size_t heap_len;
	bool previous_run_crashed;
	bool child_of_holder;		/* start-up failed: our parent holds the pool */
	bool not_target;		/* start-up refused: not PMTHREADS_PROGRAM */
	uint64_t startup_ns;		/* runtime_init's start(), whole */
	uint64_t pipeline_opened_ns;	/* the epoch log's time origin */
	uint64_t reset_heap_bytes;	/* malloc mode: unreachable heap emptied */
	/* Opened by start(), closed by shutdown or a fork child, under
	 * init_lock; the epoch thread uses them between (the tracker also
	 * under growth.lock: the heap's growth hook). */
	struct pool *pool;
	struct tracker *tracker;
	struct epoch_pipeline *pipeline;
	struct restore *restorer;	/* lazy restore in progress or serving */
	/* The pool's latched write-back error (nvm.h), kept past pool_close so
	 * that pmthreads_sync keeps failing after shutdown too; 0: none.
	 * Atomic; io_error_epoch, the last durable epoch when it struck, is
	 * written before it. */
	_Atomic int io_error;
	uint64_t io_error_epoch;
	/* VER_d when shutdown closed the pool: what pmthreads_durable_epoch
	 * says from then on (it no longer rises).  Written under init_lock
	 * before pool is cleared. */
	uint64_t closed_epoch;
	/* This process is a fork child of one that ran the runtime: its heap
	 * is a private copy, never persisted (pmthreads_sync fails with
	 * ENOTSUP, pmthreads_durable_epoch is 0).  Set by
	 * runtime_atfork_child, inherited by the child's own children. */
	bool fork_child;
} rt = {
	.state = RUNTIME_NONE,
	.init_lock = PRIM_LOCK_INIT,
};
/* Taken around fork: a start-up or shutdown under way on another thread
 * ends before the process is copied, so that a child never finds the pool,
 * the tracker or the pipeline half opened or half closed. */
PRIM_LOCK_NAMED(rt.init_lock, init, "runtime: start-up and shutdown", PRIM_FORK_RUNTIME);
/* Set on the thread running start(). */
static _Thread_local bool initialising_here;

/* The modules' counters as they stood when each was closed: the stats
 * report is written after shutdown. */
static struct closed_figures {
	/* The pipeline's and the pool's write-back counters: written when
	 * they close (under rt.init_lock, or by a fork child). */
	struct epoch_counters counters;
	struct nvm_stats nvm;
	const char *nvm_name;
	/* The trackers' counters, summed as each is closed, and the last
	 * one's backend name: under lock. */
	prim_lock_t lock;
	struct tracker_stats tracker;
	const char *tracker_name;
} closed = { .lock = PRIM_LOCK_INIT };
PRIM_LOCK_NAMED(closed.lock, closed_trackers, "runtime: the closed trackers' counters",
		PRIM_FORK_RESET);

/* The heap's growth hook: disk space for its new pages before it uses them
 * (a full file system is an allocation failure, not a SIGBUS), and exact
 * write tracking of them (the tracker was opened to be covered as the heap
 * grows: TRACKER_OPEN_COVER_LATER).  Shutdown and a fork child turn it off
 * under lock before the tracker and the pool go: the heap stays in use
 * after them, and may grow. */
static struct growth {
	prim_lock_t lock;
	bool off;			/* under lock */
	/* The tracker write-protects clean pages (mprotect): a kernel write
	 * there fails with EFAULT unless the page is pinned (prefault.h).
	 * Set under lock once the tracker is open, cleared with off; read
	 * without the lock (relaxed) on every system call into the heap. */
	atomic_bool protects;
	/* The heap's page size, set with the hook (heap_set_reserve) and
	 * read-only after: the hook outlives the pool in a fork child, which
	 * frees the pool while its heap may still grow. */
	size_t page_size;
} growth = { .lock = PRIM_LOCK_INIT };
PRIM_LOCK_NAMED(growth.lock, heap_growth, "runtime: the heap's growth hook", PRIM_FORK_RESET);

enum runtime_state runtime_state(void) { return atomic_load(&rt.state); }
bool runtime_in_init(void) { return initialising_here; }
void *runtime_heap_base(void) { return rt.heap_base; }
bool runtime_crashed(void) { return rt.previous_run_crashed; }

ptrdiff_t runtime_heap_offset(void)
{
	if (rt.pool == NULL || rt.heap_base == NULL)
		return 0;
	return (ptrdiff_t)((uintptr_t)rt.heap_base - (uintptr_t)rt.pool->shadow_base);
}

uint64_t runtime_durable_epoch(void)
{
	if (rt.fork_child)
		return 0;	/* nothing this process writes is ever durable */
	if (rt.pool != NULL)
		return *rt.pool->ver_d;
	return atomic_load(&rt.io_error) != 0 ? rt.io_error_epoch : rt.closed_epoch;
}

bool runtime_fork_child(void) { return rt.fork_child; }

int runtime_io_error(void) { return atomic_load(&rt.io_error); }

int runtime_init_errno(void)
{
	switch (atomic_load(&rt.state)) {
	case RUNTIME_FAILED:
		return rt.init_errno;
	case RUNTIME_STARTING:
		return EAGAIN;	/* re-entered from the start-up itself */
	default:
		return ESHUTDOWN;
	}
}

void runtime_get_stats(struct stats_runtime *out)
{
	memset(out, 0, sizeof(*out));
	enum runtime_state st = atomic_load(&rt.state);
	out->persistence = st == RUNTIME_RUNNING || (st == RUNTIME_DETACHED && rt.heap_base != NULL);
	if (rt.pipeline != NULL)
		epoch_get_counters(rt.pipeline, &out->epoch);
	else
		out->epoch = closed.counters;
	restore_get_stats(rt.restorer, &out->restore);
	/* Read by the epoch thread, which is the one writing them, or after
	 * the pool is closed. */
	out->nvm = rt.pool != NULL ? rt.pool->nvm->stats : closed.nvm;
	out->nvm_name = rt.pool != NULL ? nvm_name(rt.pool->nvm) : closed.nvm_name;
	prim_lock(&closed.lock);
	out->tracker = closed.tracker_name;
	out->tracker_stats = closed.tracker;
	prim_unlock(&closed.lock);
	out->startup_ns = rt.startup_ns;
	out->heap_reset_bytes = rt.reset_heap_bytes;
	out->io_error = atomic_load(&rt.io_error);
}

int runtime_write_final_stats(void)
{
	static struct stats_runtime figures;	/* at exit: spare the stack */
	runtime_get_stats(&figures);
	return stats_write_final(&figures);
}

/* The pool's counters, for the report, before it is closed (a fork child's
 * copy abandoned: the parent writes the pool). */
static void close_pool(bool fork_child)
{
	closed.nvm = rt.pool->nvm->stats;
	closed.nvm_name = nvm_name(rt.pool->nvm);
	if (!fork_child)
		rt.closed_epoch = *rt.pool->ver_d;
	if (fork_child)
		pool_abandon(rt.pool);
	else
		pool_close(rt.pool);
	rt.pool = NULL;
}

static void close_pipeline(bool fork_child)
{
	if (rt.pipeline == NULL)
		return;
	epoch_get_counters(rt.pipeline, &closed.counters);
	if (fork_child)
		epoch_pipeline_abandon(rt.pipeline);
	else
		epoch_pipeline_close(rt.pipeline);
	rt.pipeline = NULL;
}

/* The program's identity recorded in a new pool: the executable's file name,
 * so a pool is not silently adopted by a different program. */
static void program_identity(char *out, size_t len)
{
	char exe[PATH_MAX];
	if (prim_readlink("/proc/self/exe", exe, sizeof(exe)) <= 0) {
		snprintf(out, len, "%s", program_invocation_short_name);
		return;
	}
	const char *base = strrchr(exe, '/');
	base = base != NULL ? base + 1 : exe;
	size_t n_base = strlen(base);
	if (n_base >= len)
		n_base = len - 1;
	memcpy(out, base, n_base);
	out[n_base] = '\0';
}

/* The /tmp fallback directory is shared ground: another user may have made
 * /tmp/pmthreads-<uid> first, to read or replace our pools.  Use it only when
 * it is a real directory of ours that nobody else can enter. */
static int check_private_dir(const char *dir)
{
	struct stat st;
	if (prim_lstat(dir, &st) != 0) {
		err_set_errno(errno, "cannot inspect the pool directory %s", dir);
		return -1;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != prim_getuid() || (st.st_mode & 07777) != 0700) {
		err_set("the default pool directory %s is not a directory of yours with mode "
			"0700 (owner uid %u, mode %04o): it is not safe to keep pools there; set "
			"PMTHREADS_POOL (or HOME) to a path of your own", dir, (unsigned)st.st_uid,
			(unsigned)(st.st_mode & 07777));
		err_set_cause(EACCES);
		return -1;
	}
	return 0;
}

/* Create the parent directories of the default pool path (mode 0700): the
 * default must work without any configuration. */
static int make_parent_dirs(const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (prim_mkdir(dir, 0700) != 0 && errno != EEXIST)
			goto fail;
		*p = '/';
	}
	if (prim_mkdir(dir, 0700) != 0 && errno != EEXIST)
		goto fail;
	if (rt.cfg.pool_dir_is_tmp)
		return check_private_dir(dir);
	return 0;
fail:
	err_set_errno(errno, "cannot create the directory %s for the default pool; set "
		      "PMTHREADS_POOL to a writable path", dir);
	return -1;
}

static void log_configuration(void)
{
	log_msg(LOG_INFO, "pool %s%s, capacity %llu MiB, heap at %p (%s), interval %u ms, "
		"tracker %s, nvm %s, write-back %s, heap mode %s%s",
		rt.cfg.pool_path, rt.cfg.pool_path_is_default ? " (default)" : "",
		(unsigned long long)(rt.heap_len >> 20), rt.heap_base,
		runtime_heap_offset() == 0 ? "as recorded" : "RELOCATED",
		rt.cfg.interval_ms, tracker_name(rt.tracker), nvm_name(rt.pool->nvm),
		config_writeback_name(rt.cfg.writeback), config_heap_name(rt.cfg.heap),
		rt.pool->created ? ", new pool" : (rt.previous_run_crashed ? ", recovered after a crash"
									  : ", reopened after a clean exit"));
}

/* Whether pid is this process's parent, grandparent, ... (a shell started
 * by system() may fork the program that then finds the pool locked). */
static bool is_ancestor(pid_t pid)
{
	pid_t p = prim_getppid();
	for (int depth = 0; depth < 64 && p > 1; depth++) {
		if (p == pid)
			return true;
		char path[64], buf[512];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
		if (prim_read_file(path, buf, sizeof(buf)) <= 0)
			return false;
		/* "pid (comm) state ppid ...": comm may contain spaces and ')'. */
		char *close_paren = strrchr(buf, ')');
		int ppid;
		if (close_paren == NULL || sscanf(close_paren + 1, " %*c %d", &ppid) != 1)
			return false;
		p = (pid_t)ppid;
	}
	return false;
}

/* holder: where pool_open puts the pid holding the pool, when locked. */
static enum pool_error open_pool(pid_t *holder)
{
	if (privilege_secure()) {
		/* The caller may be less privileged: only a place nobody else
		 * controls (privilege.h), whatever path was chosen. */
		if (privilege_check_pool_path(rt.cfg.pool_path) != 0)
			return POOL_ERR_REFUSED;
	} else if (rt.cfg.pool_path_is_default && make_parent_dirs(rt.cfg.pool_path) != 0) {
		return POOL_ERR_REFUSED;
	}
	char creator[POOL_CREATOR_MAX];
	program_identity(creator, sizeof(creator));
	struct pool_open_options o = {
		.path = rt.cfg.pool_path,
		.capacity = rt.cfg.pool_size,
		.log_size = rt.cfg.log_size,
		.shadow_base = rt.cfg.shadow_base,
		.creator = creator,
		.create = true,
		.read_only = false,
		.nvm = rt.cfg.nvm,
		.latency_ns = rt.cfg.nvm_latency_ns,
		.sim = NULL,
		.lock_holder = holder,
		/* Written only once the heap passed its checks too (start). */
		.accept_later = true,
	};
	/* The log's replay takes a helper thread, one of the runtime's own. */
	nvm_log_set_helper(quiesce_create_internal_thread, quiesce_join_internal_thread,
			   quiesce_internal_thread_done, false);
	return pool_open(&rt.pool, &o);
}

static void growth_hook_off(void)
{
	prim_lock(&growth.lock);
	growth.off = true;
	atomic_store_explicit(&growth.protects, false, memory_order_relaxed);
	prim_unlock(&growth.lock);
}

/* The end of the heap pages reserved so far (bytes from heap_base): the
 * heap reserves ahead of its high-water mark, as glibc's malloc maps ahead
 * of what it hands out.  runtime_lock_ranges reads it. */
static _Atomic uint64_t heap_reserved_end;

static int reserve_heap_pages(void *ctx, uint64_t first, uint64_t end)
{
	static _Atomic bool told;
	struct pool *p = ctx;	/* only while !growth.off: a fork child frees it */
	const size_t ps = growth.page_size;
	/* malloc mode: the heap is the program's malloc, and grows only as far
	 * as RLIMIT_AS / RLIMIT_DATA would let glibc's; the refusal is an
	 * ordinary ENOMEM, said nowhere, as natively. */
	if (rt.cfg.heap == HEAP_MALLOC && !memory_limits_allow(end * ps))
		return -1;
	if (memory_lock_grown((char *)rt.heap_base + first * ps, (end - first) * ps) != 0)
		return -1;
	int rc = 0;
	prim_lock(&growth.lock);
	if (!growth.off) {
		if (tracker_cover(rt.tracker, end * ps) != 0)
			log_msg(LOG_DEBUG, "%s; those pages count as written once on first touch",
				err_get());
		rc = pool_reserve(p, first, end);
	}
	prim_unlock(&growth.lock);
	if (rc == 0) {
		uint64_t e = end * ps, seen = atomic_load(&heap_reserved_end);
		while (e > seen && !atomic_compare_exchange_weak(&heap_reserved_end, &seen, e))
			;
		return 0;
	}
	if (!atomic_exchange(&told, true))
		log_msg(LOG_ERR, "%s", err_get());
	return -1;
}

/* Under growth.lock, like the growth hook: shutdown and a fork child close
 * the tracker under it. */
bool runtime_kernel_writes_fault(void)
{
	return atomic_load_explicit(&growth.protects, memory_order_relaxed);
}

/* As runtime_pin_writable, but never waiting for the lock: the caller may be
 * a signal handler that interrupted its own thread inside it (or inside the
 * tracker's pin lock, taken under it). */
int runtime_try_pin_writable(void *addr, size_t len)
{
	if (!prim_trylock(&growth.lock))
		return 1;
	int rc = 0;
	if (!growth.off && rt.tracker != NULL)
		rc = tracker_pin_writable(rt.tracker, addr, len);
	prim_unlock(&growth.lock);
	return rc;
}

int runtime_pin_writable(void *addr, size_t len)
{
	int rc = 0;
	prim_lock(&growth.lock);
	if (!growth.off && rt.tracker != NULL)
		rc = tracker_pin_writable(rt.tracker, addr, len);
	prim_unlock(&growth.lock);
	return rc;
}

void runtime_unpin(void *addr, size_t len)
{
	prim_lock(&growth.lock);
	if (!growth.off && rt.tracker != NULL)
		tracker_unpin(rt.tracker, addr, len);
	prim_unlock(&growth.lock);
}

void runtime_lock_ranges(uintptr_t *pool_lo, uintptr_t *pool_hi, uintptr_t *heap_lo,
			 uintptr_t *heap_hi)
{
	*pool_lo = *pool_hi = *heap_lo = *heap_hi = 0;
	if (rt.heap_base != NULL && rt.heap_len > 0) {
		size_t ps = prim_page_size();
		size_t used = heap_high_water();
		used = used == SIZE_MAX ? 0 : used;
		if (atomic_load(&heap_reserved_end) > used)
			used = (size_t)atomic_load(&heap_reserved_end);
		used = used > rt.heap_len ? rt.heap_len : (used + ps - 1) / ps * ps;
		if (used > 0) {
			*heap_lo = (uintptr_t)rt.heap_base;
			*heap_hi = (uintptr_t)rt.heap_base + used;
		}
	}
	struct pool *p = rt.pool;
	if (p != NULL && p->nvm != NULL && p->nvm->base != NULL) {
		*pool_lo = (uintptr_t)p->nvm->base;
		*pool_hi = (uintptr_t)p->nvm->base + p->nvm->len;
	}
}

/* PMTHREADS_CHECK (fase_checker.h): config.c has already switched to the mprotect
 * tracker and the short interval; say so when that overrides a request. */
static int check_mode_setup(void)
{
	if (rt.cfg.check == CHECK_OFF)
		return 0;
	if (rt.cfg.tracker_asked == TRACKER_UFFD)
		log_msg(LOG_WARN, "PMTHREADS_CHECK=1 needs the mprotect write tracker (with uffd "
			"the kernel resolves first writes without saying which thread made "
			"them); using mprotect instead of the requested uffd");
	if (rt.cfg.interval_ms != rt.cfg.interval_ms_asked)
		log_msg(LOG_INFO, "PMTHREADS_CHECK: epoch interval %u ms instead of %u ms, so "
			"that pages are re-protected (and writes checked) more often",
			rt.cfg.interval_ms, rt.cfg.interval_ms_asked);
	return fase_checker_init();
}

/* PMTHREADS_POOL_SIZE sizes a new pool only: an existing pool keeps its
 * capacity, and a size given explicitly that differs is worth a word. */
static void check_pool_size(void)
{
	uint64_t capacity = rt.pool->npages * rt.pool->page_size;
	if (rt.pool->created || !rt.cfg.pool_size_given || capacity == rt.cfg.pool_size)
		return;
	log_msg(LOG_WARN, "PMTHREADS_POOL_SIZE=%llu MiB is ignored: the existing pool %s holds "
		"%llu MiB (the size applies to a new pool; remove the pool with "
		"pmthreads-recover rm to start over with the new size)",
		(unsigned long long)(rt.cfg.pool_size >> 20), rt.cfg.pool_path,
		(unsigned long long)(capacity >> 20));
}

static void count_name(const char *name, void *p, size_t size, void *arg)
{
	(void)name, (void)p, (void)size;
	(*(size_t *)arg)++;
}

/* PMTHREADS_HEAP=malloc: a heap in which the previous run named no object
 * (nvmalloc(size, name)) holds nothing a restarted program can find -- an
 * unmodified program keeps its roots in globals and on stacks, which are not
 * persisted.  Keeping it would only grow the pool with every run and every
 * exec.  It is emptied instead, and after a crash the program is told that
 * its state cannot come back.  The old pages are zeroed through the tracker
 * (the allocator relies on never-used pages being zero, and the zeroes must
 * reach the pool). */
static int reset_unreachable_heap(void)
{
	if (rt.cfg.heap != HEAP_MALLOC)
		return 0;
	size_t names = 0;
	heap_name_foreach(count_name, &names);
	if (names != 0)
		return 0;
	struct heap_stats hs;
	heap_get_stats(&hs);
	if (hs.bytes_in_use == 0)
		return 0;
	size_t used = heap_high_water();
	if (used > rt.heap_len)
		used = rt.heap_len;
	if (rt.previous_run_crashed)
		log_msg(LOG_WARN, "the previous run of this program crashed, but its heap (%llu "
			"KiB in use) names no object, so a restarted program cannot find any of "
			"it: starting with an empty heap.  To get state back after a crash, "
			"allocate its root with nvmalloc(size, \"name\") and find it with "
			"nvrecover (see pmthreads(7))", (unsigned long long)(hs.bytes_in_use >> 10));
	else
		log_msg(LOG_INFO, "the previous run's heap (%llu KiB in use) names no object: "
			"starting with an empty heap", (unsigned long long)(hs.bytes_in_use >> 10));
	rt.reset_heap_bytes = hs.bytes_in_use;
	fase_enter();	/* one failure-atomic step, and no checker report */
	memset(rt.heap_base, 0, used);
	fase_leave();
	return heap_init(rt.heap_base, rt.heap_len, true);
}

/* A write-back failed (nvm.h: latched, the epoch was not published): say so
 * once, loudly; from now on pmthreads_sync fails with the errno and the
 * durable epoch stays where it is.  The program keeps running without
 * persistence -- its memory is intact, only the pool is not -- unless
 * PMTHREADS_STRICT=1, which exits at once (the pool stays marked as crashed,
 * so the next run recovers the last durable epoch).  With output commit on
 * it exits too: what it holds waits for an epoch that will never be durable,
 * so its clients would wait for ever and its writers block once the queues
 * fill; ending it drops that output, as a crash would, and lets whatever
 * supervises it restart it from the last durable epoch. */
static void note_io_error(void)
{
	int e = nvm_error(rt.pool->nvm);
	if (e == 0 || atomic_load(&rt.io_error) != 0)
		return;
	rt.io_error_epoch = *rt.pool->ver_d;
	atomic_store(&rt.io_error, e);
	if (e == ESTALE) {
		/* Once per process (io_error is set above): the two paths fit. */
		static char back[2 * PATH_MAX + 256];
		if (rt.pool->dir_moved)
			/* The file itself is intact where its directory went, and
			 * outlives this process: moving the directory back is all. */
			snprintf(back, sizeof(back), "stays in the moved directory (/proc/%d/fd/%d "
				 "shows where): move it back with `%s`, and the next run at that path "
				 "recovers it", (int)prim_getpid(), rt.pool->dir_fd, rt.pool->put_back);
		else
			snprintf(back, sizeof(back), "is still open here: before this process ends, "
				 "copy it back with `cp /proc/%d/fd/%d %s`, and the next run recovers "
				 "it; no other process can open a pool at that path while this one runs",
				 (int)prim_getpid(), rt.pool->fd, rt.pool->path);
		log_msg(LOG_ERR, "the pool file %s %s%s while this program ran: its path no longer "
			"leads to the file this process holds, so nobody would find what is "
			"written there.  No epoch after %llu is acknowledged; the program %s "
			"WITHOUT persistence (pmthreads_sync() fails with ESTALE).  The file as "
			"of epoch %llu %s",
			rt.pool->path, rt.pool->lost, rt.pool->dir_moved ? "," : "",
			(unsigned long long)rt.io_error_epoch,
			rt.cfg.strict ? "exits (PMTHREADS_STRICT=1)"
			: rt.cfg.output == OUTPUT_COMMIT ? "exits (output commit: what it holds "
							"could never be released)"
			: "keeps running", (unsigned long long)rt.io_error_epoch, back);
	}
	else
		log_msg(LOG_ERR, "a write-back to the pool %s failed: %s.  Nothing after epoch %llu "
		"is durable, and nothing will be: the program %s WITHOUT persistence "
		"(pmthreads_sync() fails with this error; the stats report's \"io_error\" is "
		"set).  Fix the storage under the pool; the next run recovers epoch %llu",
		rt.pool->path, strerror(e), (unsigned long long)rt.io_error_epoch,
		rt.cfg.strict ? "exits (PMTHREADS_STRICT=1)"
		: rt.cfg.output == OUTPUT_COMMIT ? "exits (output commit: what it holds could never be "
						"released, and it is dropped, as at a crash)"
		: "keeps running",
		(unsigned long long)rt.io_error_epoch);
	if (rt.cfg.strict || rt.cfg.output == OUTPUT_COMMIT) {
		/* From the epoch thread: exit() would run runtime_shutdown,
		 * which joins this very thread.  So no atexit handler runs
		 * and stdio buffers are not flushed. */
		runtime_write_final_stats();
		prim_exit_now(RUNTIME_STRICT_EXIT);
	}
}

/* A store of the write-back that the file system refuses (full, say, where
 * the pool's space could not be reserved) is a latched error like a failed
 * msync, never a SIGBUS that ends the program (nvm.h); a read of the pool
 * the restore needs and its storage cannot serve is said as such
 * (restore.c). */
static void watch_pool_faults(void)
{
	nvm_watch_faults(rt.pool->nvm);
	if (fault_signal_install_for(SIGBUS, nvm_claim_fault) != 0)
		log_msg(LOG_WARN, "cannot install the SIGBUS handler (%s): a write-back to a "
			"full file system would end the program", strerror(errno));
}

/* Before the pool is unmapped. */
static void unwatch_pool_faults(void)
{
	fault_signal_uninstall_for(SIGBUS);
	nvm_watch_faults(NULL);
}

/* The epoch thread, at every turn of its loop (quiesce_set_tick): the
 * statistics file, every STATS_PERIOD_NS whatever the epochs do -- while
 * they stall too, so that a stall can be watched (figures that survive a
 * kill -9 as well). */
/* When the last periodic report was written: set to the start when the
 * tick is installed, so that the first report comes one period later --
 * one written at the epoch thread's first turn showed a runtime still
 * starting ("persistence": false) and was all that a program ending
 * with _exit(2) within a second left.  Epoch thread only after that. */
static uint64_t stats_tick_last_ns;

static void stats_tick(void)
{
	static struct stats_runtime figures;	/* epoch thread only */
	uint64_t now = prim_now_ns();
	if (now - stats_tick_last_ns < STATS_PERIOD_NS)
		return;	/* the loop turns far more often: collect only when due */
	stats_tick_last_ns = now;
	runtime_get_stats(&figures);
	/* The open tracker's figures too (the closed ones are all that
	 * runtime_get_stats has): its counters are written by this thread,
	 * its fault count atomically. */
	if (rt.tracker != NULL) {
		struct tracker_stats live;
		tracker_get_stats(rt.tracker, &live);
		figures.tracker = tracker_name(rt.tracker);
		tracker_stats_add(&figures.tracker_stats, &live);
	}
	stats_periodic(&figures);
}

/* The epoch thread, after each epoch's write-back. */
static enum quiesce_outcome after_epoch(void *arg)
{
	bool durable = epoch_on_reopened(arg);
	/* Also after an epoch that published nothing (no page written; a
	 * publication asked already): a pmthreads_sync waiting for it must
	 * learn that the pool is gone.  One fstatat, 1-3 us, outside the
	 * pause. */
	(void)pool_identity_holds(rt.pool);
	note_io_error();
	if (durable)
		output_on_durable(quiesce_current_pause());
	if (durable)
		return QUIESCE_DURABLE;
	/* After a storage error nothing becomes durable again: retrying at
	 * once would only spin (pmthreads_sync reports the error itself). */
	return atomic_load(&rt.io_error) != 0 ? QUIESCE_FAILED : QUIESCE_CARRIED;
}

/* A report of diagnose/stall.c's, a warning a line. */
static void warn_lines(char *text)
{
	for (char *line = text, *end; *line != '\0'; line = end + 1) {
		end = strchr(line, '\n');
		if (end == NULL)
			break;
		*end = '\0';
		log_msg(LOG_WARN, "%s", line);
	}
}

/* The epoch thread: durability stands still (or resumes); quiesce.h's
 * Stalls.  Said at the default verbosity, in the epoch log too. */
static void report_stall(const struct quiesce_stall *s, bool cleared)
{
	static char text[4096];	/* epoch thread only */
	stall_format(s, cleared, text, sizeof(text));
	warn_lines(text);
	char note[480];
	stall_summary(s, cleared, note, sizeof(note));
	char line[512];
	snprintf(line, sizeof(line), "t_ms=%llu %s",
		 (unsigned long long)((prim_now_ns() - rt.pipeline_opened_ns) / 1000000), note);
	epoch_log_note(line);
}

/* Bring the modules up in dependency order.  Recovery writes the shadow
 * before the tracker is attached, so restored pages are not counted as
 * dirty (they are already in the pool). */
static int start(void)
{
	rt.cfg = *config_get();
	if (config_error() != NULL) {
		err_set("%s", config_error());
		err_set_cause(EINVAL);
		return -1;
	}
	if (!target_is_self()) {
		/* A wrapper or child that is not the program pmthreads run was
		 * asked to run: it never touches a pool. */
		err_set("this process is not %s (PMTHREADS_PROGRAM), which owns the pool; it "
			"runs without persistence", rt.cfg.program);
		err_set_cause(EPERM);
		rt.not_target = true;
		return -1;
	}
	log_set_level((enum log_level)config_log_level(&rt.cfg));

	if (check_mode_setup() != 0)
		return -1;
	pid_t holder = 0;
	enum pool_error perr = open_pool(&holder);
	if (perr != POOL_OK) {
		/* In use: EBUSY; a file that is no pool of ours (not a pool,
		 * damaged, another program's or format version): EBADMSG, as a
		 * file system says of a block failing its checksum; else the
		 * system call's own errno (ENOENT, EACCES, EROFS, ENOSPC...). */
		if (perr == POOL_ERR_LOCKED)
			err_set_cause(EBUSY);
		else if (err_cause() == 0)
			err_set_cause(EBADMSG);
		/* A descendant exec'd by the program holding the pool (system(),
		 * popen(), a helper binary) inherits LD_PRELOAD and the
		 * environment: it runs without persistence, quietly. */
		if (holder != 0 && is_ancestor(holder)) {
			/* With PMTHREADS_FOLLOW_CHILDREN=1 that is the rule
			 * (pmthreads(7)); otherwise a launcher that is no known
			 * wrapper took the pool this program would persist to,
			 * and the user must hear of it. */
			log_msg(rt.cfg.follow_children ? LOG_INFO : LOG_WARN,
				"%s; this process, started by it, runs WITHOUT persistence.  To "
				"persist this program rather than the one that started it, run "
				"it under `pmthreads run`, which finds the program past the "
				"launcher, or set PMTHREADS_PROGRAM to its path", err_get());
			rt.child_of_holder = true;
		}
		return -1;
	}

	/* Only once the pool is ours: a program the holder exec'd with the
	 * same environment must not truncate the holder's log. */
	if (rt.cfg.epoch_log_path[0] != '\0' && epoch_log_open(rt.cfg.epoch_log_path) != 0)
		goto fail_pool;

	check_pool_size();
	rt.heap_len = (size_t)(rt.pool->npages * rt.pool->page_size);
	rt.heap_base = shadow_reserve(rt.pool->shadow_base, rt.heap_len);
	if (rt.heap_base == NULL) {
		if (err_cause() == 0)
			err_set_cause(ENOMEM);
		goto fail_pool;
	}
	if ((uintptr_t)rt.heap_base != rt.pool->shadow_base)
		log_msg(LOG_WARN, "the heap's address %#llx is taken in this process; it was "
			"restored at %p and pointers stored in it are off by "
			"pmthreads_heap_offset()", (unsigned long long)rt.pool->shadow_base, rt.heap_base);

	/* Torn copies are invalidated first and durably, then the heap is
	 * served from the pool: lazily on first touch through the tracker's
	 * userfaultfd (restored pages count as clean, later writes as
	 * written), or copied before the tracker attaches. */
	struct restore_options ro = { .policy = rt.cfg.restore };
	/* Before the restore reads the pool: a read its storage cannot serve
	 * is said as such (restore.c), never as a stray SIGBUS. */
	watch_pool_faults();
	if (restore_open(&rt.restorer, &rt.tracker, rt.pool, rt.heap_base, rt.heap_len, rt.cfg.tracker, &ro) != 0)
		goto fail_shadow;
	rt.previous_run_crashed = !rt.pool->created && !rt.pool->was_clean;
	/* Before heap_init: its writes happen inside a FASE and must pass. */
	if (rt.cfg.check)
		tracker_set_write_hook(fase_checker_on_write);

	/* Only a pool that never made an epoch durable holds no heap yet; any
	 * other is adopted or refused, never formatted again. */
	prim_lock(&growth.lock);
	growth.off = false;
	atomic_store_explicit(&growth.protects, strcmp(tracker_name(rt.tracker), "mprotect") == 0,
			      memory_order_relaxed);
	prim_unlock(&growth.lock);
	growth.page_size = rt.pool->page_size;
	heap_set_reserve(reserve_heap_pages, rt.pool);
	if (persist_reserve_memory(rt.pool) != 0)
		log_msg(LOG_WARN, "%s: every epoch is written line by line into working copies",
			err_get());
	/* From here the program's memory limits leave out the heap's range
	 * and the pool's mapping (memory_limits.h); the kernel's still count
	 * them, raised by as much when the program sets one. */
	memory_limits_set_ours(true, rt.pool->nvm->len, nvm_private_bytes(rt.pool->nvm));
	/* Adoption verifies the metadata pages (as restored) against the
	 * pool's checksums; each epoch records new ones. */
	meta_sums_bind(rt.pool);
	if (heap_init(rt.heap_base, rt.heap_len, rt.pool->created || *rt.pool->ver_d == 0) != 0) {
		if (err_cause() == 0)
			err_set_cause(EBADMSG);	/* the heap failed validation */
		goto fail_tracker;
	}
	heap_name_after_crash(rt.previous_run_crashed);
	/* The first writes to the pool: it passed every check (its own, the
	 * restored pages' checksums on the eager path, the heap's).  Torn
	 * copies go first and durably, before any epoch can reuse VER_d + 1
	 * (what the log backend deferred at the open goes before them). */
	int werr = pool_accept(rt.pool);
	/* The log's private mapping may have become another backend's shared
	 * one (PMTHREADS_NVM=msync or pmem on a pool whose log held epochs). */
	memory_limits_set_ours(true, rt.pool->nvm->len, nvm_private_bytes(rt.pool->nvm));
	if (werr == 0)
		persist_invalidate_torn(rt.pool);
	if (werr == 0)
		werr = pool_set_clean(rt.pool, false);
	if (werr != 0) {
		err_set_errno(werr, "cannot write to the pool %s (its file system failed); fix the "
			      "storage under it and start again -- nothing in the pool changed",
			      rt.pool->path);
		goto fail_tracker;
	}
	if (!rt.pool->created && reset_unreachable_heap() != 0)
		goto fail_tracker;

	struct epoch_options eo = { .copy_in_pause = rt.cfg.writeback == WRITEBACK_PAUSED };
	if (epoch_pipeline_open(&rt.pipeline, rt.pool, rt.tracker, rt.heap_base, heap_high_water, &eo) != 0)
		goto fail_tracker;
	rt.pipeline_opened_ns = prim_now_ns();
	log_configuration();
	quiesce_set_sync_timeout(rt.cfg.sync_timeout_ms);
	quiesce_set_stall_fn(report_stall);
	if (rt.cfg.stats_path[0] != '\0' && strcmp(rt.cfg.stats_path, "-") != 0) {
		stats_tick_last_ns = prim_now_ns();
		quiesce_set_tick(stats_tick, STATS_PERIOD_NS);
	}
	if (quiesce_start_split(rt.cfg.interval_ms, epoch_on_quiescent, after_epoch, rt.pipeline) != 0)
		goto fail_pipeline;
	if (rt.cfg.output == OUTPUT_COMMIT) {
		epoch_log_set_output(output_epoch_columns);
		output_enable();
		output_stdout_hold();
	}
	return 0;

fail_pipeline:
	close_pipeline(false);
fail_tracker:
	/* The heap may be initialised already (a failed first write to the
	 * pool, the pipeline): its range is released below. */
	heap_detach();
	growth_hook_off();
	restore_close(rt.restorer);
	rt.restorer = NULL;
	tracker_close(rt.tracker);
	rt.tracker = NULL;
fail_shadow:
	memory_limits_set_ours(false, 0, 0);
	shadow_release(rt.heap_base, rt.heap_len);
	rt.heap_base = NULL;
	atomic_store(&heap_reserved_end, 0);
fail_pool:
	meta_sums_bind(NULL);
	unwatch_pool_faults();
	pool_close(rt.pool);
	rt.pool = NULL;
	epoch_log_close();
	return -1;
}

int runtime_init(void)
{
	int s = atomic_load_explicit(&rt.state, memory_order_acquire);
	if (s == RUNTIME_RUNNING || (s == RUNTIME_DETACHED && rt.heap_base != NULL))
		return 0;
	if (initialising_here) {
		/* Re-entered from something start() called (e.g. libpmem's
		 * allocations in malloc mode): the heap is not there yet. */
		err_set("the pmthreads runtime is still starting");
		return -1;
	}
	prim_lock(&rt.init_lock);
	s = atomic_load(&rt.state);
	if (s == RUNTIME_NONE) {
		atomic_store(&rt.state, RUNTIME_STARTING);
		initialising_here = true;
		uint64_t t0 = prim_now_ns();
		int r = start();
		rt.startup_ns = prim_now_ns() - t0;
		initialising_here = false;
		if (r == 0) {
			atomic_store_explicit(&rt.state, RUNTIME_RUNNING, memory_order_release);
			atexit(runtime_shutdown);
		} else {
			snprintf(rt.init_error, sizeof(rt.init_error), "%s", err_get());
			rt.init_errno = err_cause() != 0 ? err_cause() : EIO;
			if (!rt.child_of_holder && !rt.not_target)
				log_msg(LOG_ERR, "%s", rt.init_error);
			else if (rt.not_target)
				/* Only the API reaches here in a process that is
				 * not the target: a program that asked to persist
				 * and cannot must hear of it. */
				log_msg(LOG_WARN, "%s, although it calls the pmthreads API; to "
					"persist it, run it on its own rather than under that "
					"`pmthreads run`, or with --follow-children", rt.init_error);
			atomic_store_explicit(&rt.state, RUNTIME_FAILED, memory_order_release);
		}
		s = atomic_load(&rt.state);
	}
	prim_unlock(&rt.init_lock);
	if (s == RUNTIME_RUNNING || (s == RUNTIME_DETACHED && rt.heap_base != NULL))
		return 0;
	if (s == RUNTIME_FAILED && rt.cfg.strict && !rt.child_of_holder && !rt.not_target) {
		/* PMTHREADS_STRICT=1: fail closed rather than run unpersisted.
		 * After the lock is released: exit runs runtime_shutdown. */
		log_msg(LOG_ERR, "PMTHREADS_STRICT=1: exiting (status %d) instead of running "
			"without persistence", RUNTIME_STRICT_EXIT);
		exit(RUNTIME_STRICT_EXIT);
	}
	err_set("%s", s == RUNTIME_FAILED ? rt.init_error : "the pmthreads runtime has shut down");
	return -1;
}

/* The tracker's counters, for the report, before it is closed. */
static void note_tracker_stats(void)
{
	struct tracker_stats st;
	tracker_get_stats(rt.tracker, &st);
	prim_lock(&closed.lock);
	closed.tracker_name = tracker_name(rt.tracker);
	tracker_stats_add(&closed.tracker, &st);
	prim_unlock(&closed.lock);
}

void runtime_shutdown(void)
{
	prim_lock(&rt.init_lock);
	if (atomic_load(&rt.state) != RUNTIME_RUNNING) {
		prim_unlock(&rt.init_lock);
		return;
	}
	/* A clean exit leaves nothing to recover: objects the heap held for
	 * nvrecover go with the final epoch. */
	heap_name_release_held();
	/* The final epoch is itself a quiescent point: if some thread keeps
	 * holding a lock past the bound it is abandoned, and the pool stays
	 * marked as crashed so the next run recovers the last durable epoch. */
	quiesce_stop(true);
	note_io_error();
	/* What the final epoch made durable goes out; what it did not
	 * cover never does. */
	output_drain_all();
	output_disable();
	if (atomic_load(&rt.io_error) == 0 && epoch_final_done(rt.pipeline)) {
		if (pool_set_clean(rt.pool, true) != 0)
			note_io_error();
	} else if (atomic_load(&rt.io_error) == 0) {
		/* Who held what, and the fix, as the live stall report says it
		 * (issue 46: redis's io-thread mutexes went unnamed here). */
		static char text[4096];	/* under init_lock */
		struct quiesce_stall st;
		(void)quiesce_stall_at_exit(&st);
		stall_format_exit(&st, (unsigned long long)*rt.pool->ver_d, text, sizeof(text));
		warn_lines(text);
	}
	if (atomic_load(&rt.io_error) == ESTALE && rt.pool->dir_moved)
		log_msg(LOG_WARN, "the pool file this process held (%s, which %s) is left as of "
			"epoch %llu, marked as crashed, in the moved directory; the next run at "
			"that path recovers it once the directory is back (`%s`)", rt.pool->path,
			rt.pool->lost, (unsigned long long)*rt.pool->ver_d, rt.pool->put_back);
	else if (atomic_load(&rt.io_error) == ESTALE)
		log_msg(LOG_WARN, "the pool file this process held (%s, which %s) is left as of "
			"epoch %llu, marked as crashed; it is lost once this process ends unless "
			"it was copied back", rt.pool->path, rt.pool->lost,
			(unsigned long long)*rt.pool->ver_d);
	else if (atomic_load(&rt.io_error) != 0)
		log_msg(LOG_WARN, "the pool %s is left marked as crashed (a write-back failed); the "
			"next run recovers epoch %llu", rt.pool->path,
			(unsigned long long)*rt.pool->ver_d);
	/* The epoch thread is joined: no batch is in flight, and nothing
	 * writes the epoch log. */
	close_pipeline(false);
	/* The heap stays usable after shutdown: every page must be there
	 * before the tracker's userfaultfd goes. */
	restore_close(rt.restorer);
	rt.restorer = NULL;
	growth_hook_off();
	note_tracker_stats();
	tracker_close(rt.tracker);
	rt.tracker = NULL;
	epoch_log_close();
	/* The heap stays mapped: other threads and later destructors may still
	 * use memory from it; it is simply no longer persisted. */
	atomic_store(&rt.state, RUNTIME_DETACHED);
	meta_sums_bind(NULL);
	unwatch_pool_faults();
	close_pool(false);
	prim_unlock(&rt.init_lock);
}

void runtime_atfork_child(void)
{
	/* Only this thread exists in the child; the locks were reset or
	 * released (prim_locks_atfork_child), the state they guard is dealt
	 * with here. */
	tracker_atfork_child();
	symbolize_atfork_child();
	kernel_stacks_atfork_child();
	aio_pins_atfork_child();
	if (atomic_load(&rt.state) != RUNTIME_RUNNING)
		return;
	rt.fork_child = true;
	growth_hook_off();
	quiesce_atfork_child();
	output_atfork_child();
	epoch_log_close();
	/* The child never persists; the batch the parent's epoch thread may be
	 * writing back is the parent's. */
	close_pipeline(true);
	/* Completed in the parent before fork (restore.c's atfork handler);
	 * the restorer thread is the parent's. */
	restore_abandon(rt.restorer);
	rt.restorer = NULL;
	if (rt.tracker != NULL) {
		note_tracker_stats();
		tracker_close(rt.tracker);
		rt.tracker = NULL;
	}
	if (rt.pool != NULL) {
		/* Closing the child's descriptor does not release the parent's
		 * lock: the lock belongs to the open file description the
		 * parent still holds.  Unmapping drops the child's view. */
		meta_sums_bind(NULL);
		unwatch_pool_faults();
		close_pool(true);
		memory_limits_set_ours(true, 0, 0);	/* the heap stays mapped */
	}
	atomic_store(&rt.state, RUNTIME_DETACHED);
}
