/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm_log_internal -- what the log backend's files share: the ring's
 * on-media records and head slots with their checksums, the per-mapping
 * state (struct log_state) and the device under it.  Private to
 * persist/nvm_log*.c; everything else uses nvm_log.h (the design) and
 * nvm.h (the contract).
 *
 *   nvm_log.c        the writer: flush, order and fence appended as records,
 *                    checkpoints (whole or in waves), the head slots, the
 *                    device's writes and syncs, set-up, format and queries
 *   nvm_log_replay.c replay at open, with its helper thread (prefault)
 *   nvm_log_sim.c    the simulated device of crash tests: unsynced writes
 *                    undone sector by sector at a crash
 *   nvm_log_test.c   test builds only (nvm_log_test.h): the device's
 *                    primitives counted, injected I/O errors
 */
#ifndef PMT_NVM_LOG_INTERNAL_H
#define PMT_NVM_LOG_INTERNAL_H

#include "persist/nvm.h"
#include "persist/nvm_log.h"
#include "prim/prim.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

/* Records of the first format 6 pools (before groups) each counted alone;
 * a record of a group counts only with the group's commit record. */
#define REC_MAGIC_SINGLE 0x31524c544d504dULL	/* "PMTLR1\0" little-endian-ish tag */
#define REC_MAGIC 0x32524c544d504dULL		/* "PMTLR2\0" */
#define REC_COMMIT 1ULL
#define REC_ALIGN NVM_LINE
/* A range header: offset/8 in bits 16-63, length/8 in bits 0-15. */
#define RANGE_MAX_BYTES (0xffffu * 8u)

/* The head of every record; len includes it and is a multiple of REC_ALIGN. */
struct log_rec {
	uint64_t magic;
	uint64_t seq;		/* consecutive from 1 */
	uint64_t pos;		/* its byte position (monotonic, ring offset = pos % size) */
	uint32_t len;
	uint32_t nranges;
	uint64_t payload;	/* bytes of range headers and data after this head */
	uint64_t check;		/* XXH3 of the record with check = 0 */
	uint64_t flags;		/* REC_COMMIT: the last record of a group */
	uint64_t reserved;
};
_Static_assert(sizeof(struct log_rec) == REC_ALIGN, "a record head is one line");

/* One head slot: the position and seq of the oldest record still needed;
 * and where a run that opened the pool after a crash began appending, with
 * the seq it skipped to there (jump_past_stale).  The resume fields have
 * their own checksum: slots written before them (zeros) have none, and
 * resume where nothing does. */
struct log_head {
	uint64_t gen;
	uint64_t pos;
	uint64_t seq;
	uint64_t check;		/* of gen, pos, seq */
	uint64_t resume_pos;
	uint64_t resume_seq;
	uint64_t resume_check;	/* of everything before it */
};
_Static_assert(sizeof(struct log_head) <= NVM_LINE, "a head slot is one line");

struct range {
	uint64_t off;
	uint64_t len;
};

/* Heads are written with the groups' tag; a reader takes the older one too
 * (pools written before groups), while a binary from before groups finds
 * no valid head in a pool written since and refuses it, rather than
 * replaying none of its records (whose magic it does not know). */
#define HEAD_TAG_SINGLE 0x4c4f4748ULL	/* "LOGH" */
#define HEAD_TAG 0x4c4f4732ULL		/* "LOG2" */

/* Who writes what, here and in struct log_state: one mapping is used by one
 * thread at a time -- the opener through the replay and the open's checks,
 * then the epoch thread's write-back, then the closer (nvm.h's calls are
 * never concurrent on one mapping; the pool's life orders the hand-overs).
 * So no field takes a lock or is atomic; each says which calls write it.
 * The replay's helper thread reads none of it: what it shares with the
 * opener is its own struct prefault, of atomics (nvm_log_replay.c). */

/* Whole pages written straight to the file (nvm_write_direct), by
 * nvm_log_direct.c: through a second descriptor of the file opened for
 * direct I/O (prim_reopen_direct), asynchronously (prim_aio) from a ring of
 * staging memory the write-back prepares them in (nvm_direct_stage), many
 * in flight at once -- runs of a few pages are the common case, and one at
 * a time each would wait for the device.  Where the file system takes no
 * direct I/O or the kernel no AIO: synchronously, large runs direct, small
 * ones through the page cache.  The writer's (one thread, nvm.h). */
#define DIRECT_STAGE_BYTES (16u << 20)
#define DIRECT_INFLIGHT 256u		/* a power of two */
struct log_direct {
	/* The file for direct I/O, opened at the first whole page (tried);
	 * -1: none.  Registered with own_fds, which may move it (read at
	 * each use). */
	int fd;
	bool tried;
	/* The AIO context (0: none: synchronous writes) and the staging
	 * ring, DIRECT_STAGE_BYTES: positions grow without end, the ring
	 * offset is pos % DIRECT_STAGE_BYTES.  [tail, head) is queued or in
	 * flight; given is where the last nvm_direct_stage handed out room
	 * (UINT64_MAX: nothing handed out). */
	uint64_t aio;
	unsigned char *stage;
	uint64_t head, tail, given;
	/* The writes submitted, in order: [first, next) of fl, indices mod
	 * DIRECT_INFLIGHT; each its ring span and whether it completed.  And
	 * those queued, not yet submitted (submitted PRIM_AIO_BATCH at once). */
	struct direct_write {
		uint64_t start, end;	/* its span of the ring */
		uint64_t off;		/* where in the file */
		bool done;
	} fl[DIRECT_INFLIGHT];
	uint64_t first, next;
	uint64_t inflight;		/* submitted, not yet reaped */
	struct prim_aio_write queued[PRIM_AIO_BATCH];
	size_t nqueued;
	/* The first write that failed (errno), reported by the next drain. */
	int error;
	/* The kernel took no asynchronous write (io_submit refused: seccomp,
	 * ENOSYS) or the file system no direct one (a completion's EINVAL):
	 * what was staged went synchronously, and nothing more is staged. */
	bool stopped;
	/* The pool's descriptor (nvm.fd: own_fds may move it, read at each
	 * use), for a write the descriptor for direct I/O cannot take. */
	const int *file;
	/* Pages written since the last sync: a fence drains and syncs them
	 * before it writes its commit, so that no group counts before the
	 * pages it publishes are durable.  Set by those writes, cleared by a
	 * sync that succeeded (which drains first). */
	bool unsynced;
};

/* The device under the log: the file, or (tests) a simulation of it. */
struct log_dev {
	/* The mapping's descriptor (&nvm.fd), read at each use: own_fds
	 * rewrites nvm.fd when it moves the descriptor (a dup2 onto it, from
	 * any thread), so it is never copied. */
	const int *fd;
	/* Simulation only (sim != NULL, set at init; nvm_log_sim.c): the
	 * writes and syncs so far, the survival's random state, and the
	 * unsynced writes with what they overwrote, for the crash -- written
	 * by each write and sync of the device. */
	struct nvm_sim_options *sim;
	uint64_t primitives;
	uint64_t rng;
	struct undo {
		uint64_t off;
		size_t len;
		size_t at;	/* the overwritten bytes: old_bytes + at */
	} *undo;
	size_t nundo, undo_cap;
	/* What the unsynced writes overwrote, one after another (the
	 * runtime's memory, prim_array_grow: not malloc's). */
	unsigned char *old_bytes;
	size_t old_used, old_cap;
	/* Whole pages written straight (nvm_write_direct;
	 * nvm_log_direct.c), which every sync of the device drains first. */
	struct log_direct direct;
	/* Test builds only (nvm_log_fail_io, between the user's calls): the
	 * fail_at-th write or sync from now fails with fail_err, doing
	 * nothing.  The shipped build never reads them. */
	uint64_t fail_at;
	int fail_err;
};

/* A log-backed mapping's state (nvm.impl). */
struct log_state {
	/* Set at init (nvm_log_init), read-only after. */
	struct nvm_log_region r;
	size_t page_size;
	struct log_dev dev;		/* struct log_dev says who writes it */

	/* The ring's live part: [head, tail) positions.  The replay sets
	 * them from the head slot and the records it applies; then append
	 * moves tail and next_seq, a checkpoint's end (move_head) head and
	 * head_seq. */
	uint64_t head, tail;
	uint64_t head_seq, next_seq;
	/* The current head slot and its generation: the replay (read), then
	 * each head written (write_head_resume) only. */
	uint64_t head_gen;
	int head_slot;
	/* The record at resume_pos has seq resume_seq (not one more than the
	 * one before it): struct log_head.  The replay, then
	 * write_head_resume. */
	uint64_t resume_pos, resume_seq;

	/* Ranges flushed since the last fence: log_flush adds, append
	 * (take_pending) and log_discard_flushed empty; pending_cap set at
	 * init.  NULL on a read-only mapping. */
	struct range *pending;
	size_t npending, pending_cap;	/* entries (address space reserved) */
	uint64_t pending_bytes;		/* what their record would take */

	/* File pages written by records since the last checkpoint: the
	 * replay (apply) and append (take_pending) set bits, a checkpoint
	 * clears them, a wave swaps them with wave; touched_words set at
	 * init. */
	uint64_t *touched;
	size_t touched_words;
	bool any_touched;
	/* File pages the mapping may hold a private copy of (a store through
	 * it, flushed or not, or the replay's): a page written straight drops
	 * its copy (log_write_direct), which other pages are spared -- a
	 * madvise and the TLB flush behind it.  Set by log_flush and, all of
	 * them, by a replay that applied anything; cleared page by page by
	 * log_write_direct.  touched_words long, NULL on a read-only mapping. */
	uint64_t *cowed;
	/* A checkpoint spread over the fences (wave_step): the pages records
	 * before wave_pos (seq wave_seq) touched, which stay set until the
	 * head moves past those records (their pages are the ring's until
	 * then: nvm_direct_allowed); the wave has written those before page
	 * wave_cursor; wave_budget pages a fence.  Written right after a fence
	 * (wave_step) and by a whole checkpoint only. */
	uint64_t *wave;
	bool wave_on;
	uint64_t wave_pos, wave_seq;
	uint64_t wave_cursor;
	size_t wave_budget;
	/* Records appended since the last sync: append sets it, a sync of
	 * the records (sync_records) clears it. */
	bool unsynced;

	/* An open group's records not yet written: s->buf[0, buffered) is
	 * ring bytes from position tail - buffered.  A group is
	 * all-or-nothing, so its records need reach the file only with its
	 * commit: one write a group, not one a record (write_buffered).
	 * append and write_buffered. */
	size_t buffered;
	/* Ring bytes before it left the page cache: set at init after the
	 * replay, moved by drop_synced after each sync of records. */
	uint64_t cached_from;
	bool group_open;		/* records appended since the last commit: append */
	/* The next append first checkpoints and moves the head past a gap of
	 * seq numbers (see jump_past_stale): set at init after the replay,
	 * cleared by that jump. */
	bool jump_pending;
	/* The replay met the skip of an earlier run: the head moves past it
	 * with a checkpoint when the pool is accepted (log_accept), before
	 * anything is stored, never while a check may still refuse it.  Set
	 * at init, cleared by log_accept. */
	bool resume_due;
	/* A checkpoint after a fence failed (errno; 0: none).  The fence's
	 * records were synced before it began, so the fence's epoch stands
	 * (acknowledged, as the next open replays it); the error is latched
	 * at the next fence, order or checkpoint, before any of them writes
	 * (latch_deferred).  Latched at once it failed an epoch that the
	 * next run then recovered: the runtime said one epoch was the last
	 * durable one and the next start gave back the one after it.
	 * log_fence sets it. */
	int deferred_error;

	/* Record assembly, r.size bytes reserved at init (NULL read-only):
	 * append's. */
	unsigned char *buf;
};

/* The checksums of a head slot (gen, pos, seq) and of its resume fields. */
static inline uint64_t head_check(const struct log_head *h, int slot, uint64_t seed, uint64_t tag)
{
	return XXH3_64bits_withSeed(h, offsetof(struct log_head, check), seed ^ (tag + (uint64_t)slot));
}

static inline uint64_t resume_check(const struct log_head *h, int slot, uint64_t seed)
{
	return XXH3_64bits_withSeed(h, offsetof(struct log_head, resume_check),
				    seed ^ (0x52534d45ULL + (uint64_t)slot));
}

/* The pages of [off, off + len) are the next checkpoint's. */
static inline void touch(struct log_state *s, uint64_t off, uint64_t len)
{
	uint64_t first = off / s->page_size, last = (off + len - 1) / s->page_size;
	for (uint64_t p = first; p <= last; p++)
		s->touched[p / 64] |= 1ULL << (p % 64);
	s->any_touched = true;
}

/* A range a record may name: inside the file, clear of the ring and the
 * head slots (which only the log writes, never through the mapping). */
static inline bool range_allowed(const struct nvm *n, const struct log_state *s, uint64_t off,
				 uint64_t len)
{
	if (len == 0 || off > n->len || len > n->len - off)
		return false;
	if (off < s->r.off + s->r.size && off + len > s->r.off)
		return false;
	return !(off < s->r.head_off + NVM_LOG_HEAD_BYTES && off + len > s->r.head_off);
}

/* The device's write of len bytes at off: 0 or an errno. */
static inline int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	return prim_pwrite_all(fd, buf, len, (off_t)off) == 0 ? 0 : errno;
}

/* nvm_log.c: a record's checksum (XXH3 of the record with check = 0); the
 * state of a log-backed mapping, NULL for another backend's. */
uint64_t nvm_log_rec_check(const struct log_state *s, const unsigned char *rec, size_t len);
struct log_state *nvm_log_of(const struct nvm *n);

#ifdef PMT_TEST_HOOKS
/* nvm_log_fail_io (nvm_log_test.h): this write or sync fails. */
static inline bool dev_fails(struct log_dev *d)
{
	return d->fail_at != 0 && --d->fail_at == 0;
}
#endif

/* nvm_log_direct.c (struct log_direct): room for len bytes of whole pages
 * in the staging ring (NULL where there is none: a simulated device, no
 * AIO); what the writes use, set up now (nvm_direct_reserve); the device's write of whole pages from buf (staged or not) at off,
 * 0 or an errno; every write of them completed (0, or the first one's
 * errno); set-up on a log_dev, and what it holds given back (drained
 * first, where the process still owns it). */
void *nvm_log_direct_stage(struct log_dev *d, size_t len);
void nvm_log_direct_reserve(struct log_dev *d);
int nvm_log_direct_write(struct log_dev *d, const void *buf, size_t len, uint64_t off);
int nvm_log_direct_drain(struct log_dev *d);
void nvm_log_direct_init(struct log_dev *d);
void nvm_log_direct_free(struct log_dev *d, bool drain);

/* nvm_log_replay.c: replay every complete group from the head slot's
 * position onto the mapping, setting head, tail and the seqs.  0, or -1
 * with err_get() set (both head slots corrupt, a record naming a range
 * outside the pool's data, no memory). */
int nvm_log_replay(struct nvm *n, struct log_state *s);

/* nvm_log_sim.c: the simulated device (d->sim set).  init copies o (0, or
 * -1 with err_get() set); write and sync are the device's primitives, each
 * counted and the crash_after-th ending the process as a power loss would
 * (0 or an errno); free releases what init and the writes kept. */
int nvm_log_sim_init(struct log_dev *d, const struct nvm_sim_options *o);
int nvm_log_sim_write(struct log_dev *d, const void *buf, size_t len, uint64_t off);
int nvm_log_sim_sync(struct log_dev *d);
void nvm_log_sim_free(struct log_dev *d);

#endif
