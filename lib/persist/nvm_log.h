/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm_log -- the nvm backend for block storage: a redo log inside the pool.
 *
 * On an ordinary file every msync is a device flush and a file-system
 * journal commit, and the device writes whole pages of whatever was dirtied:
 * an epoch that changes a few random cache lines costs three flushes and
 * three or more 4 KiB pages per changed line (seq entry, checksum, data).
 * This backend makes the same nvm contract (nvm.h) cost one sequential
 * write of what changed and one fdatasync:
 *
 *   mapping     the pool is mapped private (copy-on-write): a store never
 *               reaches the file by itself, so nothing is written that no
 *               fence asked for, and nothing is written twice.
 *   flush       records the byte range (no I/O).
 *   order       appends the ranges flushed since the previous order or
 *               fence, with their bytes, as one checksummed record of a
 *               ring in the pool file: assembled in memory, written with
 *               its group's commit (a group is all-or-nothing, below).
 *   fence       the same, the record marked as its group's commit, the
 *               group's records written (one pwrite), then fdatasync: a
 *               device flush.  The records from one fence to
 *               the next are a group, and replay applies a group only with
 *               its commit: a crash before a fence returns loses every
 *               order since the last one, which is more than the ordering
 *               nvm.h promises -- all or nothing (nvm_group_room), what
 *               persist.c's in-place write-back builds on.  An epoch's three
 *               fences (persist.c) are two orders and one fence: three
 *               records, one write, one flush.
 *   checkpoint  once the ring is half full, the pages records touched
 *               since the last checkpoint are written in place from the
 *               mapping (which then holds what the records made durable, or
 *               newer), an eighth of them after each fence (a wave, so that
 *               no epoch stalls for all of it; all at once past three
 *               quarters, and at a clean close), fdatasync, then the ring's
 *               head moves past those records: one of two checksummed head
 *               slots in the header, written and synced.  A crash in between
 *               leaves the old head, and replaying from it rewrites every
 *               line those records changed, whatever part of the pages
 *               reached the disk.
 *   open        replays every complete group from the head, in order, onto
 *               the private mapping: the mapping is the pool as of the last
 *               fence that returned (or a later complete one).  A torn or
 *               stale record ends the replay; what follows it is never
 *               replayed: the first append after an open numbers its records
 *               past any the crashed run can have left (the head slot says
 *               where), so none of those can continue the new run's chain.
 *               Each record is read and checksummed once, a group applied
 *               from that copy once its commit is read; where a CPU is
 *               idle, a helper thread makes the pages records touch
 *               private ahead of the applying (nvm_log_set_helper).
 *
 * A record larger than half the ring (or one the ring has no room for) is
 * written through instead -- then its group is not all-or-nothing: every
 * record appended so far synced, then checkpointed with the group's ranges
 * written in place, fdatasync, the head moved -- durable and in order as
 * well, just not as one sequential write.
 *
 * The ring lives in the pool file and is written with data (zeros) before
 * its first use, so that overwriting it changes no file metadata and
 * fdatasync commits no journal transaction.
 *
 * Tests: with a struct nvm_sim_options the device is simulated -- each write
 * and each sync is a primitive, crash_after ends the process after the k-th,
 * and at that crash every write not followed by a sync keeps, sector by
 * sector, its new or its old bytes (survival), in the file itself
 * (nvm_log_sim.c).  The test build of the core adds nvm_log_test.h: the
 * primitives counted, I/O errors injected.
 *
 * Files (nvm_log_internal.h, what they share): nvm_log.c the writer and
 * checkpoints, nvm_log_replay.c replay with its helper thread,
 * nvm_log_sim.c the simulated device, nvm_log_test.c the test hooks.
 */
#ifndef PMT_NVM_LOG_H
#define PMT_NVM_LOG_H

#include "persist/nvm.h"

#include <pthread.h>
#include <stdint.h>

/* Where the ring and its head live in the pool file. */
struct nvm_log_region {
	uint64_t off;		/* the ring: file offset (page-aligned) */
	uint64_t size;		/* its bytes (a multiple of the page size) */
	uint64_t head_off;	/* the two head slots, NVM_LINE each */
	uint64_t seed;		/* checksum seed (from the pool's UUID) */
	/* The log may hold reloads (format 7): a range header of length 0 at
	 * a page names a page written straight to the file since the records
	 * before it, which a replay then reads from the file afresh.  Without
	 * them (format 6), such a page must have no record in the ring. */
	bool reloads;
};

/* Smallest ring: a few epochs of a small heap. */
#define NVM_LOG_MIN_SIZE (256u << 10)
/* The head slots' bytes. */
#define NVM_LOG_HEAD_BYTES (2 * NVM_LINE)

/* What a reader of a log-backed pool needs to know, for tools
 * (pmthreads-recover info) and tests. */
struct nvm_log_info {
	uint64_t head, tail;		/* byte positions (monotonic) */
	uint64_t head_seq, next_seq;	/* the record at head, the next one */
	uint64_t records_replayed, bytes_replayed;
	uint64_t size;
	int head_slot;			/* -1: neither slot valid */
};
/* 0 and *out filled when n is a log-backed mapping, -1 otherwise. */
int nvm_log_get_info(const struct nvm *n, struct nvm_log_info *out);

/* Write both head slots (head at position 0, seq 1) into the freshly
 * formatted file fd and, with fill, the ring's blocks (zeros: their first
 * use).  0, or -1 with err_get() set. */
int nvm_log_format(int fd, const char *path, const struct nvm_log_region *r, bool fill);

/* The end of the highest page in [lo, hi) of the file that a record replayed
 * or appended since the last checkpoint wrote; lo when none (or n is not a
 * log-backed mapping).  For the pool's scan bounds (seq_pages). */
uint64_t nvm_log_touched_end(const struct nvm *n, uint64_t lo, uint64_t hi);

/* Checkpoint now when anything is committed since the last one and nothing
 * is pending (a clean close, a test).  0, or the latched error. */
int nvm_log_checkpoint(struct nvm *n);

/* How replay starts its helper thread, which makes the pages the records
 * touch private ahead of the thread that applies them (nvm_log_replay.c,
 * prefault_main): start creates a thread running fn(arg) (0 or an errno),
 * join waits for it, done (may be NULL) is called by the thread as the last
 * thing it does.  The runtime passes its own threads' (created past the
 * program's interposed pthread_create, signals blocked); the tool pthread's.
 * Unset (start NULL), replay runs on one thread; so it does when no CPU is
 * idle at the open, unless when_busy (tests).  Set before opening pools,
 * not while one opens. */
typedef int (*nvm_log_thread_start_fn)(pthread_t *th, void *(*fn)(void *), void *arg);
typedef int (*nvm_log_thread_join_fn)(pthread_t th, void **ret);
void nvm_log_set_helper(nvm_log_thread_start_fn start, nvm_log_thread_join_fn join,
			void (*done)(void), bool when_busy);

#endif
