/* SPDX-License-Identifier: BSD-3-Clause */
/* nvm -- common dispatch, latency emulation and backend choice.  See nvm.h. */
#include "persist/nvm.h"

#include "base/assert.h"
#include "base/log.h"
#include "base/own_fds.h"
#include "persist/nvm_backend.h"
#include "persist/nvm_log.h"
#include "persist/nvm_sim.h"
#include "prim/prim.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif

/* struct nvm and its copy of the simulator's options come from the
 * runtime's own memory (prim_map_any: zeroed), never from malloc: inside
 * the library malloc is our wrapper, and in malloc mode the persistent
 * heap's.  A page each, a few per open pool. */
static void free_nvm(struct nvm *n) { prim_unmap(n, sizeof(*n)); }

/* Busy-wait rather than sleep: the emulated latency is per cache line
 * (hundreds of nanoseconds), far below any sleep's resolution. */
static void emulate_latency(const struct nvm *n, size_t lines)
{
	if (n->latency_ns == 0 || lines == 0)
		return;
	uint64_t end = prim_now_ns() + (uint64_t)n->latency_ns * lines;
	while (prim_now_ns() < end)
		prim_cpu_relax();
}

static void check_writable(const struct nvm *n, const char *what)
{
	if (n->read_only)
		log_fatal("nvm: %s on a read-only mapping (a pool opened read-only is never written)",
			  what);
}

/* For PMT_ASSERT: [addr, addr+len) lies in the pool's mapping. */
static inline bool nvm_in_mapping(const struct nvm *n, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, b = (uintptr_t)n->base;
	return a >= b && a - b <= n->len && len <= n->len - (a - b);
}

void nvm_flush(struct nvm *n, const void *addr, size_t len)
{
	check_writable(n, "flush");
	if (!n->accepted)
		(void)nvm_accept(n);
	PMT_ASSERT(nvm_in_mapping(n, addr, len));
	size_t lines = nvm_lines(addr, len);
	n->stats.flushes++;
	n->stats.lines_flushed += lines;
	n->ops->flush(n, addr, len);
	emulate_latency(n, lines);
}

void nvm_copy_flush(struct nvm *n, void *dst, const void *src, size_t len)
{
	check_writable(n, "copy_flush");
	PMT_ASSERT(nvm_in_mapping(n, dst, len));
	if (!n->accepted)
		(void)nvm_accept(n);
	if (n->error != 0)
		return;	/* the pool is no longer written (nvm.h) */
	size_t lines = nvm_lines(dst, len);
	n->stats.flushes++;
	n->stats.lines_flushed += lines;
	if (n->ops->copy_flush != NULL) {
		n->ops->copy_flush(n, dst, src, len);
	} else {
		memcpy(dst, src, len);
		n->ops->flush(n, dst, len);
	}
	emulate_latency(n, lines);
}

void nvm_write_direct(struct nvm *n, void *dst, const void *src, size_t len)
{
	if (n->ops->write_direct == NULL) {
		nvm_copy_flush(n, dst, src, len);
		return;
	}
	check_writable(n, "write_direct");
	PMT_ASSERT(nvm_in_mapping(n, dst, len));
	if (!n->accepted)
		(void)nvm_accept(n);
	if (n->error != 0)
		return;	/* the pool is no longer written (nvm.h) */
	size_t lines = nvm_lines(dst, len);
	n->stats.flushes++;
	n->stats.lines_flushed += lines;
	n->ops->write_direct(n, dst, src, len);
	emulate_latency(n, lines);
}

bool nvm_has_direct(const struct nvm *n) { return n->ops->write_direct != NULL; }

void nvm_direct_reserve(struct nvm *n)
{
	if (n->ops->direct_reserve != NULL && !n->read_only)
		n->ops->direct_reserve(n);
}

void *nvm_direct_stage(struct nvm *n, size_t len)
{
	if (n->ops->direct_stage == NULL || n->error != 0 || len > NVM_DIRECT_STAGE_MAX)
		return NULL;
	return n->ops->direct_stage(n, len);
}

bool nvm_direct_allowed(const struct nvm *n, const void *addr, size_t len)
{
	return n->ops->direct_allowed != NULL && n->error == 0 &&
	       n->ops->direct_allowed(n, addr, len);
}

/* Whether a fence or order is issued: never after a write-back error.  No
 * blind retry: what the failed fence covered may be gone from the page cache,
 * so a success now would be a lie. */
static bool may_fence(struct nvm *n, const char *what)
{
	check_writable(n, what);
	if (!n->accepted)
		(void)nvm_accept(n);
	if (n->error == 0)
		return true;
	n->stats.fences_skipped++;
	return false;
}

void nvm_fence(struct nvm *n)
{
	if (!may_fence(n, "fence"))
		return;
	n->stats.fences++;
	n->ops->fence(n);
}

void nvm_order(struct nvm *n)
{
	if (n->ops->order == NULL) {
		nvm_fence(n);
		return;
	}
	if (!may_fence(n, "order"))
		return;
	n->stats.orders++;
	n->ops->order(n);
}

int nvm_error(const struct nvm *n) { return n->error; }

const char *nvm_name(const struct nvm *n) { return n->ops->name; }

bool nvm_is_memory_like(const struct nvm *n) { return n->ops->memory_like && !n->read_only; }

uint64_t nvm_private_bytes(const struct nvm *n) { return n->private_map ? n->len : 0; }

static int switch_in_place(struct nvm *n);
static const struct nvm_ops switch_failed_ops;

int nvm_accept(struct nvm *n)
{
	if (n->accepted || n->read_only)
		return n->error;
	n->accepted = true;
	int e = n->ops->accept != NULL ? n->ops->accept(n) : 0;
	if (e == 0 && n->switch_pending)
		e = switch_in_place(n);
	if (e != 0)
		nvm_latch_error(n, e);
	return n->error;
}

size_t nvm_group_room(const struct nvm *n)
{
	return nvm_has_groups(n) ? n->ops->group_room(n) : 0;
}

bool nvm_has_groups(const struct nvm *n)
{
	return n->ops->group_room != NULL && !n->read_only;
}

size_t nvm_group_room_max(const struct nvm *n)
{
	return nvm_has_groups(n) ? n->ops->group_room_max(n) : 0;
}

void nvm_discard_flushed(struct nvm *n)
{
	if (n->ops->discard_flushed == NULL)
		log_fatal("nvm_discard_flushed on a %s mapping, which has no groups", n->ops->name);
	n->ops->discard_flushed(n);
}

/* ---- a store the file system cannot take (nvm.h) ---- */

static _Atomic(struct nvm *) watched;
static uintptr_t watched_page_mask;
/* This thread's innermost read guard (nvm_read_guard_push); NULL: none. */
static __thread struct nvm_read_guard *read_guard __attribute__((tls_model("initial-exec")));

void nvm_read_guard_push(struct nvm_read_guard *g)
{
	g->outer = read_guard;
	atomic_signal_fence(memory_order_seq_cst);
	read_guard = g;
	atomic_signal_fence(memory_order_seq_cst);
}

void nvm_read_guard_pop(struct nvm_read_guard *g)
{
	atomic_signal_fence(memory_order_seq_cst);
	read_guard = g->outer;
	atomic_signal_fence(memory_order_seq_cst);
}

void nvm_watch_faults(struct nvm *n)
{
	if (n != NULL)
		watched_page_mask = (uintptr_t)prim_page_size() - 1;
	atomic_store_explicit(&watched, n, memory_order_release);
}

/* Whether the file holds no data at off: a hole, or past its end (then the
 * page reads as zeros, or not at all, and zeros are all it ever held for
 * us).  A file system without SEEK_DATA says data everywhere. */
static bool file_has_no_data_at(int fd, off_t off)
{
	off_t start, stop;
	return prim_next_data(fd, off, off + 1, &start, &stop) == 0;
}

bool nvm_claim_fault(const siginfo_t *si, void *ucontext)
{
	struct nvm *n = atomic_load_explicit(&watched, memory_order_acquire);
	if (n == NULL)
		return false;
	uintptr_t a = (uintptr_t)si->si_addr, b = (uintptr_t)n->base;
	if (a < b || a - b >= n->len)
		return false;
	uintptr_t page = a & ~watched_page_mask;
	/* A guarded reader's load: the storage failed under the restore. */
	struct nvm_read_guard *g = read_guard;
	if (g != NULL && prim_fault_access(si, ucontext) != PRIM_FAULT_WRITE)
		g->failed(g->ctx, (uint64_t)(page - b));
	if (n->read_only)
		return false;
	size_t ps = watched_page_mask + 1;
	int saved_errno = errno;
	/* A page with no data in the file holds zeros for us, whatever the
	 * access (the write-back reads a copy before it stores into it, and
	 * tmpfs cannot even give a full file system's hole to a load).  A page
	 * with data is read back into the copy -- but a load that fails there
	 * is a page we cannot read: nothing to save it with.  Not ours. */
	bool zeros = file_has_no_data_at(n->fd, (off_t)(page - b));
	enum prim_fault_access acc = prim_fault_access(si, ucontext);
	if (!zeros && (acc == PRIM_FAULT_READ || acc == PRIM_FAULT_EXEC)) {
		errno = saved_errno;
		return false;
	}
	int err = prim_fs_full(n->fd) ? ENOSPC : EIO;
	/* The page becomes private memory, holding what it holds so that the
	 * runtime reads the same from it (lazy restore reads copies); the
	 * store is retried there.  The file never sees it, nor anything after
	 * it: the error is latched, so nothing is published or fenced again. */
	int made = prim_make_private((void *)page, ps, !zeros);
	errno = saved_errno;
	if (made != 0)
		return false;
	n->stats.bus_faults++;
	nvm_latch_error(n, err);
	return true;
}

/* What every mapping of the pool file records of it: the descriptor (the
 * pool's, registered: own_fds may move it), the length, the latency. */
static void set_mapped(struct nvm *n, int fd, size_t len, unsigned latency_ns)
{
	n->len = len;
	n->fd = fd;
	own_fd_keep(&n->fd, "pool file");
	n->latency_ns = latency_ns;
}

static int map_shared(int fd, const char *path, size_t len, bool writable, bool try_sync,
		      void **out, bool *synced)
{
	*synced = false;
	if (try_sync) {
		/* MAP_SYNC succeeds only on a DAX file system (prim_map_file). */
		void *a = prim_map_file(fd, len, writable, PRIM_MAP_SYNC);
		if (a != NULL) {
			*synced = true;
			*out = a;
			return 0;
		}
	}
	void *a = prim_map_file(fd, len, writable, PRIM_MAP_SHARED);
	if (a == NULL) {
		err_set_errno(errno, "cannot map the pool %s (%zu bytes)", path, len);
		return -1;
	}
	*out = a;
	return 0;
}

/* The backend of kind on n, mapped shared (synced: with MAP_SYNC).  0, or
 * -1 with err_get() set. */
static int init_backend(struct nvm *n, const char *path, enum nvm_kind kind, bool synced,
			const struct nvm_sim_options *sim)
{
	int rc;
	switch (kind) {
	case NVM_SIM:
		rc = nvm_sim_init(n, sim);
		break;
	case NVM_MSYNC:
		rc = nvm_msync_init(n);
		break;
	case NVM_LOG:
		err_set("PMTHREADS_NVM=log needs a pool with a log region (format version 6); "
			"%s has none", path);
		rc = -1;
		break;
	case NVM_PMEM: {
		bool pmem = synced;
		rc = nvm_pmem_init(n);
		if (rc == 0 && !pmem)
			rc = nvm_pmem_detect(n->base, n->len, &pmem);
		if (rc == 0 && !pmem)
			log_msg(LOG_WARN,
				"PMTHREADS_NVM=pmem but %s is not on persistent memory: cache "
				"flushes will not make it durable (use auto or msync for real "
				"durability)", path);
		break;
	}
	case NVM_AUTO:
	default: {
		bool pmem = synced;
		rc = pmem ? 0 : nvm_pmem_detect(n->base, n->len, &pmem);
		if (rc == 0)
			rc = pmem ? nvm_pmem_init(n) : nvm_msync_init(n);
		break;
	}
	}
	return rc;
}

/* The log's mapping n of a pool for which another backend was asked
 * (nvm_map_pool), now accepted: the log is written into the file, then the
 * file is mapped shared with that backend over the same addresses (pointers
 * into the pool stay valid; a concurrent reader -- lazy restore -- sees the
 * same bytes before and after).  0 or an errno; on an error the mapping
 * stays the log's, private, and is written no more. */
static int switch_in_place(struct nvm *n)
{
	int e = nvm_log_checkpoint(n);
	if (e != 0)
		return e;
	void *a;
	bool synced;
	bool try_sync = n->switch_kind == NVM_AUTO || n->switch_kind == NVM_PMEM;
	if (map_shared(n->fd, "(the pool)", n->len, true, try_sync, &a, &synced) != 0)
		return errno != 0 ? errno : ENOMEM;
	/* The log's state goes first: it holds nothing more to write (just
	 * checkpointed), and its unmap must not see the shared mapping. */
	n->ops->unmap(n);
	n->impl = NULL;
	n->ops = &switch_failed_ops;
	if (prim_move_mapping(a, n->len, n->base) != 0) {
		e = errno;
		prim_unmap_file(a, n->len);
		return e;
	}
	n->private_map = false;
	n->switch_pending = false;
	struct nvm_sim_options *sim = n->switch_sim;
	n->switch_sim = NULL;
	int rc = init_backend(n, "the pool", n->switch_kind, synced, sim);
	if (sim != NULL)
		prim_unmap(sim, sizeof(*sim));
	if (rc != 0) {
		n->ops = &switch_failed_ops;
		log_msg(LOG_WARN, "%s", err_get());
		return EIO;
	}
	return 0;
}

int nvm_map(struct nvm **out, int fd, const char *path, size_t len, enum nvm_kind kind,
	    unsigned latency_ns, const struct nvm_sim_options *sim)
{
	struct nvm *n = prim_map_any(sizeof(*n));
	if (n == NULL) {
		err_set_errno(ENOMEM, "cannot map the pool %s", path);
		return -1;
	}
	bool synced;
	bool try_sync = kind == NVM_AUTO || kind == NVM_PMEM;
	if (map_shared(fd, path, len, true, try_sync, &n->base, &synced) != 0) {
		free_nvm(n);
		return -1;
	}
	set_mapped(n, fd, len, latency_ns);
	n->accepted = true;	/* nothing deferred: no replay */
	if (init_backend(n, path, kind, synced, sim) != 0) {
		own_fd_forget(&n->fd);
		prim_unmap_file(n->base, len);
		free_nvm(n);
		return -1;
	}
	*out = n;
	return 0;
}

/* What a mapping whose switch failed does: nothing (the error is latched,
 * so nvm_flush and nvm_fence reach it only to find it). */
static void switch_failed_unmap(struct nvm *n) { (void)n; }
static const struct nvm_ops switch_failed_ops = {
	.name = "none (switching backends failed)",
	.flush = nvm_readonly_flush,
	.fence = nvm_readonly_fence,
	.unmap = switch_failed_unmap,
};

/* The pool file mapped private and its log replayed into the mapping. */
static int map_log(struct nvm **out, int fd, const char *path, size_t len, unsigned latency_ns,
		   const struct nvm_sim_options *sim, const struct nvm_log_region *log,
		   bool read_only)
{
	struct nvm *n = prim_map_any(sizeof(*n));
	if (n == NULL) {
		err_set_errno(ENOMEM, "cannot map the pool %s", path);
		return -1;
	}
	/* Private: stores stay in memory until a fence writes them to the
	 * log (MAP_NORESERVE: copies of pages count as they are made). */
	n->base = prim_map_file(fd, len, true, PRIM_MAP_PRIVATE);
	if (n->base == NULL) {
		err_set_errno(errno, "cannot map the pool %s (%zu bytes)", path, len);
		free_nvm(n);
		return -1;
	}
	set_mapped(n, fd, len, latency_ns);
	n->read_only = read_only;
	n->private_map = true;
	n->accepted = false;	/* nvm_accept: after the caller's checks */
	if (nvm_log_init(n, log, sim, read_only) != 0) {
		char why[600];
		snprintf(why, sizeof(why), "%s", err_get());
		err_set("pool %s: %s; it was left untouched", path, why);
		own_fd_forget(&n->fd);
		prim_unmap_file(n->base, len);
		free_nvm(n);
		return -1;
	}
	*out = n;
	return 0;
}

int nvm_map_pool(struct nvm **out, int fd, const char *path, size_t len, enum nvm_kind kind,
		 unsigned latency_ns, const struct nvm_sim_options *sim,
		 const struct nvm_log_region *log, bool read_only)
{
	if (log == NULL)
		return read_only ? nvm_map_readonly(out, fd, path, len)
				 : nvm_map(out, fd, path, len, kind, latency_ns, sim);
	if (read_only || kind == NVM_LOG)
		return map_log(out, fd, path, len, latency_ns, kind == NVM_LOG ? sim : NULL, log,
			       read_only);
	if (kind == NVM_AUTO) {
		/* nvm_map's choice: persistent memory, or else an ordinary
		 * file, where the log is the right backend. */
		if (nvm_map(out, fd, path, len, NVM_AUTO, latency_ns, sim) != 0)
			return -1;
		bool file = strcmp((*out)->ops->name, "msync") == 0;
		nvm_unmap(*out);
		if (file)
			return map_log(out, fd, path, len, latency_ns, NULL, log, false);
		kind = NVM_PMEM;
	}
	/* Another backend: the log is emptied into the file first, so that
	 * it finds the pool the log made durable and leaves an empty log
	 * behind (its fences never append) -- once the caller has checked the
	 * pool the replay made (nvm_accept_pool), never before. */
	struct nvm_sim_options *copy = NULL;
	if (sim != NULL) {
		copy = prim_map_any(sizeof(*copy));
		if (copy == NULL) {
			err_set_errno(ENOMEM, "cannot map the pool %s", path);
			return -1;
		}
		*copy = *sim;
	}
	if (map_log(out, fd, path, len, latency_ns, NULL, log, false) != 0) {
		if (copy != NULL)
			prim_unmap(copy, sizeof(*copy));
		return -1;
	}
	(*out)->switch_pending = true;
	(*out)->switch_kind = kind;
	(*out)->switch_sim = copy;
	return 0;
}

void nvm_readonly_flush(struct nvm *n, const void *addr, size_t len)
{
	(void)n, (void)addr, (void)len;
}
void nvm_readonly_fence(struct nvm *n) { (void)n; }
static void readonly_unmap(struct nvm *n) { (void)n; }

static const struct nvm_ops readonly_ops = {
	.name = "read-only",
	.flush = nvm_readonly_flush,
	.fence = nvm_readonly_fence,
	.unmap = readonly_unmap,
};

int nvm_map_readonly(struct nvm **out, int fd, const char *path, size_t len)
{
	struct nvm *n = prim_map_any(sizeof(*n));
	if (n == NULL) {
		err_set_errno(ENOMEM, "cannot map the pool %s", path);
		return -1;
	}
	bool synced;
	if (map_shared(fd, path, len, false, false, &n->base, &synced) != 0) {
		free_nvm(n);
		return -1;
	}
	n->ops = &readonly_ops;
	set_mapped(n, fd, len, 0);
	n->read_only = true;
	*out = n;
	return 0;
}

void nvm_abandon(struct nvm *n)
{
	if (n == NULL)
		return;
	n->read_only = true;	/* nothing is written from here on */
	nvm_unmap(n);
}

void nvm_unmap(struct nvm *n)
{
	if (n == NULL)
		return;
	if (n->switch_sim != NULL)
		prim_unmap(n->switch_sim, sizeof(*n->switch_sim));
	n->ops->unmap(n);
	prim_unmap_file(n->base, n->len);
	own_fd_forget(&n->fd);
	free_nvm(n);
}
