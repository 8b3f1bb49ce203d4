/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm -- persistence primitives: the only code that flushes or fences.
 *
 * Owns: mapping a pool file and making ranges of it durable.  Backends are
 * sibling files behind struct nvm_ops:
 *   nvm_pmem.c   libpmem cache-line flush + drain (real pmem, or
 *                PMEM_IS_PMEM_FORCE=1 on /dev/shm)
 *   nvm_msync.c  an ordinary file: flush records the range, fence msyncs it
 *                (real durability on SSDs and disks)
 *   nvm_log.c    block storage: the pool mapped private, a redo log of what
 *                each fence covers in a ring inside the pool file, one
 *                fdatasync per fence, checkpoints in place (nvm_log.h)
 *   nvm_sim.c    the strict persistence simulator for crash tests (nvm_sim.h): a
 *                separate "media" image that only fenced flushes reach;
 *                crash injection after the k-th primitive
 * An optional emulated write latency (PMTHREADS_NVM_LATENCY_NS per flushed
 * line) applies to every backend.
 *
 * Contract for users (persist.c, pool.c): a store to the mapping is durable
 * only after nvm_flush() covering it and a later nvm_fence() -- and only
 * while nvm_error() is 0.  8-byte aligned stores are atomic with respect to
 * crashes; nothing larger is.  nvm_order() is a fence that need not wait:
 * every line flushed before it becomes durable no later than any line
 * flushed after it, but perhaps only at the next nvm_fence().  Where the
 * backend cannot tell the two apart (pmem, msync, the simulator) it is a
 * fence.
 *
 * Write-back errors are sticky.  The first error a fence meets (msync's EIO,
 * ENOSPC, EDQUOT...) is latched and every later fence is skipped: after a
 * failed msync the kernel may already have dropped the dirty pages, so a
 * later msync that succeeds proves nothing about them (the fsync-failure
 * class of bug).  Users check nvm_error() before they make anything depend
 * on a fence (persist.c before it publishes an epoch).  An error after the
 * fence's lines were durable (the log backend's checkpoint that follows a
 * fence) does not fail that fence: it is latched at the next fence or order,
 * before that one writes anything.  The pmem backend has
 * no failing primitive (a media error on pmem arrives as SIGBUS at the load
 * that touches it); the simulator latches what its tests inject.
 *
 * A store the file system cannot take is an error too, not the end of the
 * program.  A store into a page whose blocks the file system cannot provide
 * (full, over quota, the file truncated under us; no fallocate reservation
 * on it, or a copy-on-write file system that needs new blocks for every
 * rewrite) raises SIGBUS instead of failing a later msync.  With
 * nvm_watch_faults and nvm_claim_fault as the SIGBUS claim function
 * (fault_signal.h, installed by the runtime), such a page is replaced by a
 * private copy of what it held, the store completes there, and the error is
 * latched as ENOSPC (no free blocks left) or EIO: the same path as a failed
 * msync.  From then on nvm_copy_flush stores nothing.  A page the file
 * holds no data for (a hole, or past its end) reads as zeros there, for a
 * load as well; a failing load of a page with data is not claimed (there is
 * nothing to save it with) -- unless the thread reads the pool under a read
 * guard (nvm_read_guard_push): then the load is the storage failing under
 * whoever needs that page (the restore), and the guard's function ends the
 * process saying so.
 *
 * Threading.  A mapping has one writer at a time, and its caller serialises
 * them: nvm_accept, nvm_flush, nvm_copy_flush, nvm_fence, nvm_order and the
 * group calls (nvm_group_room, nvm_discard_flushed) never run at once on
 * one mapping.  In the runtime the writer is the thread that opened the
 * pool until the epoch thread starts, then the epoch thread (the
 * write-back, each publication), then whichever thread ends the runtime
 * once the epoch thread has stopped or on it (quiesce_end_on_epoch_thread).
 * Beside the writer, any thread may read the mapping's bytes (lazy restore
 * reads the copies of pages not yet restored, which no epoch writes:
 * restore.h) and call nvm_error, nvm_name, nvm_is_memory_like,
 * nvm_private_bytes and read stats.  nvm_claim_fault runs in a SIGBUS
 * handler on whichever thread faulted and is async-signal-safe;
 * nvm_watch_faults is called by the runtime at start-up and before the
 * mapping goes.  nvm_map*, nvm_unmap and nvm_abandon run with no other
 * user of the mapping (open, close, a fork child).  A backend's helper
 * threads (the log's replay) live and end inside nvm_map_pool. */
#ifndef PMT_NVM_H
#define PMT_NVM_H

#include "base/config.h"
#include "base/stats_fields.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NVM_LINE 64

struct nvm;

struct nvm_ops {
	const char *name;
	/* Begin write-back of the lines covering [addr, addr+len). */
	void (*flush)(struct nvm *n, const void *addr, size_t len);
	/* Make every line flushed so far durable. */
	void (*fence)(struct nvm *n);
	/* Order every line flushed so far before any flushed later (nvm.h);
	 * NULL: fence. */
	void (*order)(struct nvm *n);
	/* nvm_group_room; NULL: 0. */
	size_t (*group_room)(const struct nvm *n);
	/* nvm_group_room_max; NULL where group_room is. */
	size_t (*group_room_max)(const struct nvm *n);
	/* nvm_discard_flushed; NULL where group_room is. */
	void (*discard_flushed)(struct nvm *n);
	void (*unmap)(struct nvm *n);
	/* Store len bytes from src at dst (inside the mapping) and begin their
	 * write-back, as one primitive.  NULL: memcpy then flush.  The pmem
	 * backend uses non-temporal stores here. */
	void (*copy_flush)(struct nvm *n, void *dst, const void *src, size_t len);
	/* nvm_accept: the first write of an open that passed every check
	 * (the log backend's deferred checkpoint).  NULL: nothing deferred.
	 * 0 or an errno. */
	int (*accept)(struct nvm *n);
	/* nvm_write_direct; NULL: copy_flush (nvm_has_direct false). */
	void (*write_direct)(struct nvm *n, void *dst, const void *src, size_t len);
	/* nvm_direct_stage; NULL: none. */
	void *(*direct_stage)(struct nvm *n, size_t len);
	/* nvm_direct_reserve; NULL: nothing to reserve. */
	void (*direct_reserve)(struct nvm *n);
	/* nvm_direct_allowed, where write_direct is not NULL. */
	bool (*direct_allowed)(const struct nvm *n, const void *addr, size_t len);
	/* nvm_is_memory_like. */
	bool memory_like;
};

/* X(kind, field, report key): base/stats_fields.h. */
#define NVM_STATS_FIELDS(X) \
	X(count, flushes, "nvm_flushes") /* nvm_flush / nvm_copy_flush calls */ \
	X(count, lines_flushed, "nvm_lines_flushed") /* 64-byte lines covered */ \
	X(count, fences, "nvm_fences") \
	X(count, errors, "nvm_errors") /* write-backs that failed (msync: EIO...) */ \
	X(count, fences_skipped, "nvm_fences_skipped") /* fences not issued after the error */ \
	X(count, bus_faults, "nvm_bus_faults") /* stores the file system refused (SIGBUS) */ \
	X(count, orders, "nvm_orders") /* nvm_order calls that did not wait (log backend) */ \
	/* Device flushes the backend asked for (msync, fdatasync) and the \
	 * bytes it submitted itself (the log backend's writes; msync's are \
	 * the kernel's, not counted) */ \
	X(count, device_flushes, "device_flushes") \
	X(count, device_bytes, "device_bytes") \
	/* of them, whole pages written straight from the write-back's \
	 * buffer (nvm_write_direct) */ \
	X(count, direct_bytes, "device_direct_bytes") \
	X(count, log_records, "log_records") /* records appended to the pool's log */ \
	X(count, log_bytes, "log_bytes") \
	X(count, checkpoints, "log_checkpoints") /* pages written in place, head moved */ \
	X(count, checkpoint_bytes, "log_checkpoint_bytes") \
	X(count, writes_through, "log_writes_through") /* groups too large for the ring */ \
	X(count, log_replayed_records, "log_replayed_records") /* at open */ \
	X(count, log_replayed_bytes, "log_replayed_bytes") \
	X(count, log_replay_us, "log_replay_us") /* reading and applying them at open */ \
	X(count, log_replay_prefaulted, "log_replay_prefaulted") /* pages its helper made private */

struct nvm_stats {
	NVM_STATS_FIELDS(STATS_DECLARE)
};

/* One mapping of a pool file.  Guards ("the writer": see Threading below):
 * every field is set by the nvm_map* call that makes it and read-only after,
 * unless its note says otherwise.  Outside persist/, read base, len and
 * stats only; everything else goes through the functions below. */
struct nvm {
	/* Replaced once by nvm_accept when a pending switch completes (the
	 * writer, before any other thread uses the mapping: the runtime
	 * accepts at start-up), else set at map. */
	const struct nvm_ops *ops;
	void *base;		/* the mapping of the whole file; its address
				 * never changes, not even at a switch */
	size_t len;
	/* The pool's fd (owned by pool, not closed here); registered with
	 * own_fds, which may move it and rewrite this (under its lock). */
	int fd;
	unsigned latency_ns;	/* emulated extra latency per flushed line */
	/* Written by the writer (bus_faults by nvm_claim_fault, on the
	 * faulting thread); read by anyone, a count momentarily stale. */
	struct nvm_stats stats;
	void *impl;		/* backend state: the writer's, see each backend */
	bool read_only;		/* mapped PROT_READ: flush/fence are bugs;
				 * set by nvm_abandon in a fork child too */
	/* Mapped private and writable (the log backend); cleared by a
	 * switch.  Outside nvm*.c: nvm_private_bytes. */
	bool private_map;
	/* The first write-back error (errno), sticky; 0: none.  Written once,
	 * from 0, by the writer or by nvm_claim_fault on the faulting thread;
	 * read by anyone (nvm_error). */
	int error;
	/* Whether the mapping may write the file (nvm_accept): until then
	 * nothing of an open reaches it, not even what replaying the log
	 * would write back, so that a pool refused by a later check is left
	 * as it was.  The writer's. */
	bool accepted;
	/* nvm_map_pool was asked for another backend than the log's: the
	 * log's mapping until nvm_accept switches in place (kind, and a copy
	 * of the simulator's options).  The writer's. */
	bool switch_pending;
	enum nvm_kind switch_kind;
	struct nvm_sim_options *switch_sim;
};

struct nvm_sim_options;	/* nvm_sim.h */
struct nvm_log_region;	/* nvm_log.h */

/* Map len bytes of the open pool file fd (path for messages) with the
 * backend chosen by kind (NVM_AUTO: pmem when the file is on a DAX file
 * system (MAP_SYNC mapping succeeds) or pmem_is_pmem() says so, e.g. with
 * PMEM_IS_PMEM_FORCE=1; msync otherwise; NVM_SIM: the simulator, configured
 * by sim, may be NULL).  fd must be open read-write.
 * Returns 0, or -1 with err_get() set. */
int nvm_map(struct nvm **out, int fd, const char *path, size_t len, enum nvm_kind kind,
	    unsigned latency_ns, const struct nvm_sim_options *sim);
/* Map len bytes of fd read-only (PROT_READ, shared): for tools that only
 * inspect a pool.  flush/fence on it abort.  Returns 0 or -1 with err_get(). */
int nvm_map_readonly(struct nvm **out, int fd, const char *path, size_t len);
/* A pool file that has a log region (nvm_log.h): whatever the backend, the
 * log is replayed first.  read_only: mapped private with the log replayed
 * into the mapping, nothing ever written (tools).  Otherwise kind as for
 * nvm_map, and NVM_LOG (the log backend; with sim, on a simulated device)
 * -- which NVM_AUTO picks where the file is not on persistent memory.  A
 * backend other than the log's starts from an empty log: what it held is
 * checkpointed into the file first -- by nvm_accept, once the caller has
 * checked the pool the replay made, which then maps the file shared with
 * that backend over the same addresses (until then the mapping is the
 * log's, switch_pending).  Nothing is written to the file by this call: the
 * log's own writes after a replay wait for nvm_accept too.  0, or -1 with
 * err_get() set. */
int nvm_map_pool(struct nvm **out, int fd, const char *path, size_t len, enum nvm_kind kind,
		 unsigned latency_ns, const struct nvm_sim_options *sim,
		 const struct nvm_log_region *log, bool read_only);
void nvm_unmap(struct nvm *n);
/* The pool the mapping holds passed every check of its open: from now on it
 * may be written (nvm.accepted).  The log backend writes what it deferred
 * (after a replay that met an earlier run's skip, a checkpoint); a switch
 * nvm_map_pool left pending writes the log into the file and maps it shared
 * with the backend asked for, at the same address.  Called by every writer
 * of a pool before its first store (pool_accept); nvm_flush, nvm_fence and
 * nvm_order accept an unaccepted mapping themselves.  0, or the (latched)
 * errno. */
int nvm_accept(struct nvm *n);
/* Unmap without writing anything more -- not even the log backend's
 * checkpoint of a clean close: a fork child's copy of the mapping, whose
 * pool the parent still writes. */
void nvm_abandon(struct nvm *n);

void nvm_flush(struct nvm *n, const void *addr, size_t len);
/* Make every line flushed so far durable -- unless nvm_error() is set, then
 * nothing is issued (see above). */
void nvm_fence(struct nvm *n);
/* See the contract above. */
void nvm_order(struct nvm *n);
/* Groups (the log backend): everything flushed and ordered from one fence
 * to the next reaches the file all at once or not at all -- a crash before
 * the fence returns loses all of it, whatever orders it held.  So stores
 * that must not be seen before a fence (persist.c's in-place write-back)
 * are safe while the group is small enough to stay in the log: this is how
 * many more bytes may be flushed (lines and range headers, as the log
 * counts them) before the next fence with that holding.  0 where the
 * backend has no such groups (pmem, msync, the simulator) or after an
 * error. */
size_t nvm_group_room(const struct nvm *n);
/* Whether the backend has such groups at all (nvm_group_room may still be
 * 0 for a while: before the first record after an open, after an error). */
bool nvm_has_groups(const struct nvm *n);
/* The most nvm_group_room can ever return on this mapping (a fixed size:
 * half the log backend's ring); 0 where the backend has no groups.  What a
 * caller reserves for one group's worth of stores is sized from it. */
size_t nvm_group_room_max(const struct nvm *n);
/* Forget every range flushed since the last order or fence: the caller put
 * their bytes back as they were then, so nothing of them need reach the
 * media (persist.c's put-back of an unpublished in-place attempt).  Only
 * where nvm_group_room is not 0. */
void nvm_discard_flushed(struct nvm *n);
/* 0, or the errno of the first write-back that failed on this mapping: from
 * then on nothing flushed is known durable, and the mapping never becomes
 * trustworthy again (a new nvm_map after recovery is). */
int nvm_error(const struct nvm *n);
/* Store src[0..len) at dst in the mapping and begin its write-back (one
 * primitive; durable after the next nvm_fence).  Nothing once nvm_error(). */
void nvm_copy_flush(struct nvm *n, void *dst, const void *src, size_t len);

/* Whole pages written from src straight to the medium, not through the
 * mapping's stores: len bytes (whole pages) at dst (page-aligned, inside
 * the mapping).  Durable after the next nvm_fence, as a flushed store is;
 * but unlike one it may reach the medium at once -- before what earlier
 * nvm_order calls ordered, and outside any group (nvm_group_room): a crash
 * may leave it written whatever else is lost.  So the caller writes only
 * what no crash can make count before it is fenced (persist.c: a working
 * copy whose seq, fenced first, marks it torn).  The mapping reads the
 * bytes written from the next nvm_order or nvm_fence on (the write may be
 * under way until then).  Where nvm_has_direct is false it is
 * nvm_copy_flush.  Nothing once nvm_error(). */
void nvm_write_direct(struct nvm *n, void *dst, const void *src, size_t len);
/* Memory of the backend's to prepare up to len bytes of whole pages in
 * (page-aligned), which the next nvm_write_direct then sends without a copy
 * if it names a prefix of it: the log backend's staging ring, from which
 * its writes go out asynchronously.  NULL where there is none (then the
 * caller's own buffer is written).  len at most NVM_DIRECT_STAGE_MAX. */
#define NVM_DIRECT_STAGE_MAX (4u << 20)
void *nvm_direct_stage(struct nvm *n, size_t len);
/* Map now what the backend's direct writes use (its staging memory, the
 * descriptor and context of its asynchronous writes), not at the first
 * one: memory mapped once the program may have set its RLIMIT_AS or
 * RLIMIT_DATA would come out of its share (runtime/memory_limits.h).
 * What cannot be had is done without. */
void nvm_direct_reserve(struct nvm *n);
/* Whether the backend has such a path, cheaper than the stores (the log
 * backend: the pages go to the file in one large write each run, never
 * into its log, then never again at a checkpoint). */
bool nvm_has_direct(const struct nvm *n);
/* Whether [addr, addr+len) may be written with nvm_write_direct now:
 * nothing the backend holds for that range would be applied over it later
 * (the log's records since its last checkpoint, which a replay applies in
 * order onto the file).  False where nvm_has_direct is. */
bool nvm_direct_allowed(const struct nvm *n, const void *addr, size_t len);

/* The backend's name, a static string ("pmem", "msync", "log", "sim",
 * "read-only"...): for messages and reports, never to choose behaviour by. */
const char *nvm_name(const struct nvm *n);
/* Whether the mapping is memory the medium writes back only as lines are
 * flushed (pmem: tmpfs or DAX pages under cache flushes), so that a page
 * made present or dirtied costs no write-back of its own: populating it
 * for write ahead of the stores (prim_populate_write) only saves the
 * faults.  False for msync (each dirty page-cache page is written back
 * whole at the fence), the log backend (a private mapping: each page
 * touched for write becomes an anonymous copy), the simulator and a
 * read-only mapping. */
bool nvm_is_memory_like(const struct nvm *n);
/* How many bytes of the mapping are private writable memory, counted by
 * the kernel like the process's own data (RLIMIT_DATA) as pages are
 * written: len for the log backend's private mapping, 0 for a shared one
 * (whose pages are the file's).  It may change once, at nvm_accept's
 * switch (nvm_map_pool). */
uint64_t nvm_private_bytes(const struct nvm *n);

/* The mapping whose refused stores nvm_claim_fault takes (one at a time;
 * NULL: none, before it is unmapped). */
void nvm_watch_faults(struct nvm *n);
/* Reads of the watched mapping on this thread that the program's data
 * depends on (the restore of its heap): a load there that the storage
 * cannot serve (a read error of the file -- EIO from a disk, a network or
 * FUSE file system -- raises SIGBUS) calls failed(ctx, off) in the SIGBUS
 * handler, off the file offset of the page, and failed must not return
 * (nothing could stand in for the page).  Guards nest, innermost first;
 * push and pop on the same thread, in order.  Thread-local stores only. */
typedef void (*nvm_read_failed_fn)(void *ctx, uint64_t off);
struct nvm_read_guard {
	nvm_read_failed_fn failed;
	void *ctx;
	struct nvm_read_guard *outer;	/* set by push */
};
void nvm_read_guard_push(struct nvm_read_guard *g);
void nvm_read_guard_pop(struct nvm_read_guard *g);
/* A fault_signal claim function for SIGBUS (see above).  Async-signal-safe. */
bool nvm_claim_fault(const siginfo_t *si, void *ucontext);

#endif
