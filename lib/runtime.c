/* runtime -- start-up, shutdown and the epoch procedure.  See runtime.h. */
#include "runtime.h"

#include "checker.h"
#include "epoch_log.h"
#include "heap.h"
#include "log.h"
#include "persist.h"
#include "pool.h"
#include "prim/prim.h"
#include "quiesce.h"
#include "stats.h"
#include "tracker.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static _Atomic int state = RUNTIME_NONE;
static prim_lock_t init_lock = PRIM_LOCK_INIT;
static _Thread_local bool initialising_here;
/* The start-up failure, kept so that every later caller gets the reason. */
static char init_error[512];

static struct config cfg;
static struct pool *pool;
static struct tracker *tracker;
static void *heap_base;
static size_t heap_len;
static bool previous_run_crashed;
static bool child_of_holder;	/* start-up failed: our parent holds the pool */
static uint64_t *dirty_pages;	/* room for every page of the heap */
static size_t dirty_capacity;

/*
 * Staged persist.  At the quiescent point (gate closed) runtime_epoch only
 * collects the dirty pages and copies each into the staging area, at the
 * same offset as in the heap; the gate then reopens and runtime_epoch_after,
 * on the epoch thread, persists from the staging area, which nobody else
 * touches.  So the pause is collect + one DRAM copy, not the NVM writes.
 * The next quiescent point runs on the same thread only after the persist
 * returned, so staged pages are never overwritten while being persisted,
 * and dirty_pages / staged_* carry the epoch from one half to the other.
 * NULL staging (the reservation failed): persist inside the pause, as
 * before.
 */
static unsigned char *staging;
static size_t staged_n;		/* pages in dirty_pages waiting for the persist */
static bool staged_final;	/* the staged epoch is shutdown's final one */
static uint64_t staged_ns;	/* collect + copy time of the staged epoch */

static struct runtime_counters counters;
/* The epoch persist_staged accounted for, for the epoch log (epoch thread
 * only). */
static struct epoch_record last_epoch;
static uint64_t started_ns;	/* prim_now_ns() when start() began */
/* Set once shutdown's final epoch (quiesce_in_final_epoch) is durable: only
 * then may the pool be marked clean.  A regular epoch that ran while
 * shutdown began does not count: writes after it would be lost. */
static atomic_bool final_epoch_done;

enum runtime_state runtime_state(void) { return atomic_load(&state); }
bool runtime_in_init(void) { return initialising_here; }
const struct config *runtime_config(void) { return &cfg; }
void *runtime_heap_base(void) { return heap_base; }
size_t runtime_heap_len(void) { return heap_len; }
bool runtime_crashed(void) { return previous_run_crashed; }

ptrdiff_t runtime_heap_offset(void)
{
	if (pool == NULL || heap_base == NULL)
		return 0;
	return (ptrdiff_t)((uintptr_t)heap_base - (uintptr_t)pool->shadow_base);
}

uint64_t runtime_durable_epoch(void)
{
	return pool != NULL ? *pool->ver_d : 0;
}

void runtime_get_counters(struct runtime_counters *out)
{
	/* Read at a quiescent point or at exit; torn reads of a counter being
	 * updated by the epoch thread only make a statistic momentarily stale. */
	*out = counters;
}

/* The program's identity recorded in a new pool: the executable's file name,
 * so a pool is not silently adopted by a different program. */
static void program_identity(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(out, len, "%s", program_invocation_short_name);
		return;
	}
	exe[n] = '\0';
	const char *base = strrchr(exe, '/');
	base = base != NULL ? base + 1 : exe;
	size_t n_base = strlen(base);
	if (n_base >= len)
		n_base = len - 1;
	memcpy(out, base, n_base);
	out[n_base] = '\0';
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
		if (mkdir(dir, 0700) != 0 && errno != EEXIST)
			goto fail;
		*p = '/';
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		goto fail;
	return 0;
fail:
	err_set_errno(errno, "cannot create the directory %s for the default pool; set "
		      "PMTHREADS_POOL to a writable path", dir);
	return -1;
}

static void log_configuration(void)
{
	log_msg(LOG_INFO, "pool %s%s, capacity %llu MiB, heap at %p (%s), interval %u ms, "
		"tracker %s, nvm %s, heap mode %s%s",
		cfg.pool_path, cfg.pool_path_is_default ? " (default)" : "",
		(unsigned long long)(heap_len >> 20), heap_base,
		runtime_heap_offset() == 0 ? "as recorded" : "RELOCATED",
		cfg.interval_ms, tracker->ops->name, pool->nvm->ops->name,
		config_heap_name(cfg.heap),
		pool->created ? ", new pool" : (previous_run_crashed ? ", recovered after a crash"
									  : ", reopened after a clean exit"));
}

/* Whether pid is this process's parent, grandparent, ... (a shell started
 * by system() may fork the program that then finds the pool locked). */
static bool is_ancestor(pid_t pid)
{
	pid_t p = getppid();
	for (int depth = 0; depth < 64 && p > 1; depth++) {
		if (p == pid)
			return true;
		char path[64], buf[512];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return false;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			return false;
		buf[n] = '\0';
		/* "pid (comm) state ppid ...": comm may contain spaces and ')'. */
		char *close_paren = strrchr(buf, ')');
		int ppid;
		if (close_paren == NULL || sscanf(close_paren + 1, " %*c %d", &ppid) != 1)
			return false;
		p = (pid_t)ppid;
	}
	return false;
}

static int open_pool(void)
{
	if (cfg.pool_path_is_default && make_parent_dirs(cfg.pool_path) != 0)
		return -1;
	char creator[POOL_CREATOR_MAX];
	program_identity(creator, sizeof(creator));
	struct pool_open_options o = {
		.path = cfg.pool_path,
		.capacity = cfg.pool_size,
		.shadow_base = cfg.shadow_base,
		.creator = creator,
		.create = true,
		.read_only = false,
		.nvm = cfg.nvm,
		.latency_ns = cfg.nvm_latency_ns,
		.sim = NULL,
	};
	return pool_open(&pool, &o);
}

/* PMTHREADS_CHECK=1 (checker.h): the checker sees writes only through the
 * mprotect tracker's fault path, and only first writes per epoch fault, so
 * check mode forces that tracker and a short interval. */
static int check_mode_setup(void)
{
	if (!cfg.check)
		return 0;
	if (cfg.tracker == TRACKER_UFFD)
		log_msg(LOG_WARN, "PMTHREADS_CHECK=1 needs the mprotect write tracker (with uffd "
			"the kernel resolves first writes without saying which thread made "
			"them); using mprotect instead of the requested uffd");
	cfg.tracker = TRACKER_MPROTECT;
	if (cfg.interval_ms > CHECKER_INTERVAL_MS) {
		log_msg(LOG_INFO, "PMTHREADS_CHECK=1: epoch interval %u ms instead of %u ms, so "
			"that pages are re-protected (and writes checked) more often",
			CHECKER_INTERVAL_MS, cfg.interval_ms);
		cfg.interval_ms = CHECKER_INTERVAL_MS;
	}
	return checker_init();
}

static void release_staging(void)
{
	if (staging != NULL)
		prim_unmap(staging, heap_len);
	staging = NULL;
	staged_n = 0;
}

/* Bring the modules up in dependency order.  Recovery writes the shadow
 * before the tracker is attached, so restored pages are not counted as
 * dirty (they are already in the pool). */
static int start(void)
{
	started_ns = prim_now_ns();
	if (config_from_env(&cfg) != 0)
		return -1;
	log_set_level(cfg.verbose >= 2 ? LOG_DEBUG : cfg.verbose == 1 ? LOG_INFO : LOG_WARN);

	if (check_mode_setup() != 0)
		return -1;
	if (open_pool() != 0) {
		/* A descendant exec'd by the program holding the pool (system(),
		 * popen(), a helper binary) inherits LD_PRELOAD and the
		 * environment: it runs without persistence, quietly. */
		pid_t holder = pool_last_lock_holder();
		if (holder != 0 && is_ancestor(holder)) {
			log_msg(LOG_INFO, "%s; this child of the holder runs without persistence",
				err_get());
			child_of_holder = true;
		}
		return -1;
	}

	/* Only once the pool is ours: a program the holder exec'd with the
	 * same environment must not truncate the holder's log. */
	if (cfg.epoch_log_path[0] != '\0' && epoch_log_open(cfg.epoch_log_path) != 0)
		goto fail_pool;

	heap_len = (size_t)(pool->npages * pool->page_size);
	heap_base = shadow_reserve(pool->shadow_base, heap_len);
	if (heap_base == NULL)
		goto fail_pool;
	if ((uintptr_t)heap_base != pool->shadow_base)
		log_msg(LOG_WARN, "the heap's address %#llx is taken in this process; it was "
			"restored at %p and pointers stored in it are off by "
			"pmthreads_heap_offset()", (unsigned long long)pool->shadow_base, heap_base);

	if (!pool->created) {
		uint64_t t0 = prim_now_ns();
		counters.recovered_pages = pool_recover(pool, heap_base);
		counters.recovery_ns = prim_now_ns() - t0;
		previous_run_crashed = !pool->was_clean;
	}
	pool_set_clean(pool, false);

	dirty_capacity = (size_t)pool->npages;
	dirty_pages = prim_map_any(dirty_capacity * sizeof(uint64_t));
	if (dirty_pages == NULL) {
		err_set("cannot allocate the dirty-page list for %zu pages", dirty_capacity);
		goto fail_shadow;
	}
	/* Address space only (MAP_NORESERVE): a page costs memory once some
	 * epoch stages it, and runtime_epoch_after hands it back lazily. */
	staging = prim_map_any(heap_len);
	if (staging != NULL)
		/* A huge page would make staging one written page cost 2 MiB of
		 * zeroing inside the pause. */
		(void)madvise(staging, heap_len, MADV_NOHUGEPAGE);
	else
		log_msg(LOG_WARN, "cannot reserve %zu bytes for the staging area; epochs persist "
			"with the application paused", heap_len);

	if (tracker_open(&tracker, cfg.tracker, heap_base, heap_len) != 0)
		goto fail_dirty;
	/* Before heap_init: its writes happen inside a FASE and must pass. */
	if (cfg.check)
		tracker_set_write_hook(checker_on_write);

	if (heap_init(heap_base, heap_len, pool->created) != 0)
		goto fail_tracker;

	log_configuration();
	if (quiesce_start_split(cfg.interval_ms, runtime_epoch, runtime_epoch_after, NULL) != 0)
		goto fail_tracker;
	return 0;

fail_tracker:
	tracker_close(tracker);
	tracker = NULL;
fail_dirty:
	release_staging();
	prim_unmap(dirty_pages, dirty_capacity * sizeof(uint64_t));
	dirty_pages = NULL;
fail_shadow:
	shadow_release(heap_base, heap_len);
	heap_base = NULL;
fail_pool:
	pool_close(pool);
	pool = NULL;
	epoch_log_close();
	return -1;
}

int runtime_init(void)
{
	int s = atomic_load_explicit(&state, memory_order_acquire);
	if (s == RUNTIME_RUNNING || (s == RUNTIME_DETACHED && heap_base != NULL))
		return 0;
	if (initialising_here) {
		/* Re-entered from something start() called (e.g. libpmem's
		 * allocations in malloc mode): the heap is not there yet. */
		err_set("the pmthreads runtime is still starting");
		return -1;
	}
	prim_lock(&init_lock);
	s = atomic_load(&state);
	if (s == RUNTIME_NONE) {
		atomic_store(&state, RUNTIME_STARTING);
		initialising_here = true;
		int r = start();
		initialising_here = false;
		if (r == 0) {
			atomic_store_explicit(&state, RUNTIME_RUNNING, memory_order_release);
			atexit(runtime_shutdown);
		} else {
			snprintf(init_error, sizeof(init_error), "%s", err_get());
			if (!child_of_holder)
				log_msg(LOG_ERR, "%s", init_error);
			atomic_store_explicit(&state, RUNTIME_FAILED, memory_order_release);
		}
		s = atomic_load(&state);
	}
	prim_unlock(&init_lock);
	if (s == RUNTIME_RUNNING || (s == RUNTIME_DETACHED && heap_base != NULL))
		return 0;
	err_set("%s", s == RUNTIME_FAILED ? init_error : "the pmthreads runtime has shut down");
	return -1;
}

/* Persist the epoch in dirty_pages[0..staged_n) from src (the staging area
 * or, without one, the heap itself) and account for it. */
static void persist_staged(const void *src)
{
	size_t n = staged_n;
	staged_n = 0;
	last_epoch = (struct epoch_record){ .epoch = *pool->ver_d, .stage_ns = staged_ns,
					    .persist_ns = staged_ns };
	if (n == 0) {
		counters.empty_epochs++;
	} else {
		uint64_t t0 = prim_now_ns();
		struct persist_stats st = { 0 };
		epoch_persist(pool, src, dirty_pages, n, &st);
		uint64_t ns = staged_ns + (prim_now_ns() - t0);
		counters.epochs++;
		counters.pages += st.pages;
		counters.lines_written += st.lines_written;
		counters.bytes_written += st.bytes_written;
		counters.bytes_compared += st.bytes_compared;
		counters.fences += st.fences;
		counters.persist_ns += ns;
		counters.stage_ns += staged_ns;
		last_epoch.epoch = *pool->ver_d;
		last_epoch.pages = st.pages;
		last_epoch.bytes_dirty = st.pages * pool->page_size;
		last_epoch.bytes_written = st.bytes_written;
		last_epoch.persist_ns = ns;
	}
	/* Only now, durable, may shutdown mark the pool clean. */
	if (staged_final)
		atomic_store(&final_epoch_done, true);
}

void runtime_epoch(void *arg)
{
	(void)arg;
	if (tracker == NULL || pool == NULL)
		return;
	staged_final = quiesce_in_final_epoch();
	uint64_t t0 = prim_now_ns();
	/* Nothing above the heap's high-water mark is ever written, and
	 * scanning a mostly unused pool costs ~1 ms per GiB with uffd. */
	tracker_set_extent(tracker, heap_high_water());
	size_t n = tracker_collect_dirty(tracker, dirty_pages, dirty_capacity);
	if (staging != NULL) {
		/* The pages come back ascending: copy runs of adjacent pages
		 * with one memcpy each. */
		const size_t ps = (size_t)pool->page_size;
		const unsigned char *heap = heap_base;
		for (size_t k = 0; k < n;) {
			size_t j = k + 1;
			while (j < n && dirty_pages[j] == dirty_pages[j - 1] + 1)
				j++;
			size_t off = (size_t)dirty_pages[k] * ps;
			memcpy(staging + off, heap + off, (j - k) * ps);
			k = j;
		}
	}
	staged_n = n;
	staged_ns = prim_now_ns() - t0;
	if (staging == NULL)
		persist_staged(heap_base);
}

static void log_epoch(void)
{
	last_epoch.t_ns = prim_now_ns() - started_ns;
	last_epoch.pause_ns = quiesce_last_pause_ns();
	epoch_log_record(&last_epoch);
}

void runtime_epoch_after(void *arg)
{
	(void)arg;
	if (pool == NULL)
		return;
	if (staging == NULL) {
		/* runtime_epoch persisted inside the pause. */
		log_epoch();
		return;
	}
	size_t n = staged_n;
	persist_staged(staging);
	log_epoch();
	/* Give the staged pages back lazily: MADV_FREE costs no fault when the
	 * next epoch stages the same page again before the kernel reclaimed
	 * it (the common case: hot pages are dirty every epoch), yet the memory
	 * is reclaimable under pressure.  Kernels without it (< 4.5) keep the
	 * pages; an epoch never stages more than the heap's written pages. */
	const size_t ps = (size_t)pool->page_size;
	for (size_t k = 0; k < n;) {
		size_t j = k + 1;
		while (j < n && dirty_pages[j] == dirty_pages[j - 1] + 1)
			j++;
		(void)madvise(staging + (size_t)dirty_pages[k] * ps, (j - k) * ps, MADV_FREE);
		k = j;
	}
}

void runtime_shutdown(void)
{
	prim_lock(&init_lock);
	if (atomic_load(&state) != RUNTIME_RUNNING) {
		prim_unlock(&init_lock);
		return;
	}
	/* The final epoch is itself a quiescent point: if some thread keeps
	 * holding a lock past the bound it is abandoned, and the pool stays
	 * marked as crashed so the next run recovers the last durable epoch. */
	quiesce_stop(true);
	if (atomic_load(&final_epoch_done))
		pool_set_clean(pool, true);
	else
		log_msg(LOG_WARN, "no quiescent point could be reached at exit (a thread held a "
			"lock); the next run recovers epoch %llu",
			(unsigned long long)*pool->ver_d);
	stats_note_tracker(tracker->ops->name, &tracker->stats);
	tracker_close(tracker);
	tracker = NULL;
	/* The epoch thread is joined: nothing reads the staging area now, and
	 * nothing writes the epoch log. */
	release_staging();
	epoch_log_close();
	if (cfg.check) {
		struct checker_stats cs;
		checker_get_stats(&cs);
		log_msg(LOG_INFO, "FASE checker: %llu first writes checked, %llu outside any "
			"lock, %llu call sites reported", (unsigned long long)cs.writes_checked,
			(unsigned long long)cs.unlocked_writes,
			(unsigned long long)cs.sites_reported);
	}
	/* The heap stays mapped: other threads and later destructors may still
	 * use memory from it; it is simply no longer persisted. */
	atomic_store(&state, RUNTIME_DETACHED);
	pool_close(pool);
	pool = NULL;
	prim_unlock(&init_lock);
}

void runtime_atfork_child(void)
{
	/* Only this thread exists in the child; the locks the parent's other
	 * threads held are meaningless here. */
	init_lock = (prim_lock_t)PRIM_LOCK_INIT;
	if (atomic_load(&state) != RUNTIME_RUNNING)
		return;
	quiesce_atfork_child();
	epoch_log_close();
	/* The child never persists; its copy of the staging area (possibly
	 * half-persisted by the parent's epoch thread) is only memory. */
	release_staging();
	if (tracker != NULL) {
		stats_note_tracker(tracker->ops->name, &tracker->stats);
		tracker_close(tracker);
		tracker = NULL;
	}
	if (pool != NULL) {
		/* Closing the child's descriptor does not release the parent's
		 * lock: the lock belongs to the open file description the
		 * parent still holds.  Unmapping drops the child's view. */
		pool_close(pool);
		pool = NULL;
	}
	atomic_store(&state, RUNTIME_DETACHED);
}
