/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool -- the NVM pool file: its format, creation, opening and checks.
 *
 * Layout (all offsets page-aligned, file sparse on creation):
 *   header page   immutable part (magic, format version, UUID, page size,
 *                 capacity, shadow base, layout offsets, creator program,
 *                 XXH3 checksum); then two version records, each in its own
 *                 cache line: {generation, VER_d, clean flag, XXH3 checksum};
 *                 in a further line the pid of the process holding the pool
 *                 read-write (advisory, for messages)
 *   seq table     uint64_t seq[npages][2]: sequence number of each copy
 *   sum table     uint64_t sum[npages][2]: the checksum of each copy's
 *                 content (pool_sum.h: keyed by the pool's UUID and the
 *                 page index), 0 for a copy never written.  Every copy an
 *                 epoch writes gets one, from the bytes written (updated
 *                 from the lines rewritten, pool_sum.h) and flushed with
 *                 them before the data fence, so it is durable before VER_d
 *                 makes the copy valid: a valid copy always has its own
 *                 checksum.  Restore (lazy or eager) and pmthreads-recover
 *                 check verify every valid copy against it.
 *   copies        copy c of heap page i at data_off + (c*npages + i) *
 *                 page_size: two planes, one a copy (format 7; up to format
 *                 6 the two copies of a page were side by side, at data_off
 *                 + (2*i + c) * page_size -- pool.page_step, copy_step)
 * A copy is valid when its seq <= VER_d; seq 0 is "never written" (zeros);
 * POOL_SEQ_INVALID marks a copy invalidated by recovery.
 *
 * Version records: the valid record (checksum matches) with the larger
 * generation holds VER_d and the clean flag.  A new record (an epoch's
 * publication, a change of the clean flag) is written into the other slot
 * with the next generation, flushed and fenced: a crash while it is written
 * leaves at worst that slot failing its checksum, and the previous record
 * stands.  The file is sparse: the pages' copies and seq entries get disk
 * space (fallocate) as the heap's high-water mark grows (pool_reserve), so a
 * full file system is an allocation failure, never a SIGBUS.
 *
 * Owns: the format and its checks; open/create with O_NOFOLLOW, mode 0600,
 * an exclusive lock; never reinitialises or modifies a file that fails a
 * check.
 *
 * Locking: an open file description lock (F_OFD_SETLK) on the whole file,
 * exclusive for read-write opens and shared for read-only ones.  It conflicts
 * between processes and between two opens in one process, and it is released
 * when the process dies -- or, after fork(), once the child has closed its
 * copy of the descriptor too (parent and child share the description; the
 * child must not use the pool).  A new pool appears under its name only once
 * fully written (O_TMPFILE + linkat where the file system allows it), so a
 * crash during creation never leaves a half-made pool behind.
 */
#ifndef PMT_POOL_H
#define PMT_POOL_H

#include "base/config.h"
#include "persist/nvm.h"
#include "persist/pool_sum.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define POOL_MAGIC "PMTHRDS\0"
/* 7: version 6 with each copy in a plane of its own (the first copies of
 * all pages, then the second ones), so that the copies an epoch writes
 * whole for a run of pages are one run of the file; format 6 is still read
 * and written as it is (its copies side by side), and pool_upgrade makes
 * it a version-7 pool.
 * 6: version 5 with a redo-log ring after the page pairs (its size is the
 * file's size less the data's end) and its two head slots in the header,
 * for the log backend of block storage (nvm_log.h).
 * 3: the sum table (a version-2 pool has none, and its data starts where a
 * version-3 pool's sum table does); 4: the same layout, but every copy has a
 * checksum (version 3 summed the heap's metadata pages only), an XXH3-64 of
 * the page; 5: the same layout, the checksum of pool_sum.h, which the
 * write-back updates from the lines it rewrites.  The older versions are
 * refused by the runtime with a message naming the way out, pool_upgrade
 * (pmthreads-recover upgrade); only that opens them. */
#define POOL_FORMAT_VERSION 7
/* The oldest format the runtime opens read-write as it is: 6 differs from
 * 7 in the place of the copies only (pool.page_step, copy_step). */
#define POOL_FORMAT_RW_OLDEST 6
#define POOL_SEQ_INVALID UINT64_MAX
#define POOL_CREATOR_MAX 256

/* An open pool.  Who touches it: the opener (pool_open, on one thread);
 * then "the writer", the one thread at a time that stores into the pool --
 * the nvm mapping's writer (nvm.h: the opening thread until the epoch
 * thread starts, the epoch thread, the thread that ends the runtime) --
 * which calls pool_accept, pool_publish, pool_set_clean, persist.h and
 * pool_identity_holds; beside it, an application thread in pool_reserve
 * (under the heap's growth lock) and lazy restore's threads reading the
 * copies of pages not yet restored (pool_valid_copy, pool_verify_page:
 * restore.h); the closer (pool_close, pool_abandon) once no other thread
 * uses it.  Each field says which of them writes it; "set at open" fields
 * are read-only afterwards and may be read by anyone. */
struct pool {
	/* Set at open; registered with own_fds, which may move a descriptor
	 * and rewrite the field (under its lock, base/own_fds.h). */
	int fd;
	char path[PATH_MAX];		/* set at open */
	struct nvm *nvm;		/* set at open; guarded as nvm.h says */
	/* Set at open: */
	uint32_t format_version;	/* POOL_FORMAT_VERSION or 6, or 2-5 with .legacy */
	size_t page_size;
	uint64_t npages;		/* heap capacity in pages */
	uint64_t shadow_base;		/* recorded heap address */
	uint8_t uuid[16];
	char creator[POOL_CREATOR_MAX];
	bool created;			/* this open created the file */
	bool was_clean;			/* previous run shut down cleanly */
	/* The current version record's VER_d and clean flag (kept in DRAM:
	 * on media they live in two checksummed slots, see above).  Written
	 * only by pool_publish / pool_set_clean, on the writer; *ver_d is
	 * read by any thread (pmthreads_durable_epoch): one aligned 8-byte
	 * volatile load, never torn.  The pointers are set at open. */
	volatile uint64_t *ver_d;
	volatile uint64_t *clean;
	uint64_t ver_d_now, clean_now;
	uint64_t rec_gen;		/* generation of the current record: the writer's */
	int rec_slot;			/* its slot (0 or 1): the writer's */
	/* Pointers into the mapping, set at open.  The tables' entries and
	 * the copies are stored by the writer only; lazy restore reads those
	 * of pages no epoch writes (not yet restored). */
	uint64_t (*seq)[2];
	uint64_t (*sum)[2];		/* NULL in a version-2 pool (legacy open) */
	struct pool_sum_key sum_key;	/* the checksum's keys (pool_sum.h): set at open */
	unsigned char *data;
	/* Added for tools and recovery: */
	bool read_only;			/* opened read-only: nothing is ever written (set at open) */
	/* No copy has seq > VER_d (checked after open): the writer's. */
	bool torn_invalidated;
	/* Set at open: */
	uint64_t file_size;
	uint64_t seq_off, sum_off, data_off;	/* file offsets of the seq and sum tables, copies */
	/* Copy c of page i at data_off + i * page_step + c * copy_step: the
	 * format's (pool_layout_of_version). */
	uint64_t page_step, copy_step;
	uint64_t log_off, log_size;	/* the log ring (format 6; 0: none) */
	/* What the in-place write-back overwrote in the attempt under way, to
	 * put back if it is not published (persist.c); reserved at the first
	 * such attempt, undo_cap bytes.  These five are persist.c's, on the
	 * writer (persist_reserve_memory at start-up, before the epoch thread). */
	unsigned char *undo;
	size_t undo_cap, undo_used;
	size_t in_place_est;		/* group bytes per page of the last attempts */
	bool in_place_backoff;		/* the last one outgrew the group's room: not the next */
	/* Whole pages (persist.c, on the writer): what the last write-backs
	 * of each page found (one byte a page, address space reserved at the
	 * first attempt that may write pages whole), and the buffer a run of
	 * them is copied into, summed and written from. */
	uint8_t *page_hint;
	unsigned char *whole_buf;
	/* The fewest whole pages an attempt writes whole (0: PERSIST_WHOLE_MIN;
	 * the crash sweeps' small pools set 1). */
	size_t whole_min;
	/* pid of the read-write opener: a pointer into the mapping (set at
	 * open), stored by pool_set_clean on the writer. */
	volatile uint64_t *holder_pid;
	/* Seq entries of pages >= seq_pages are zero (never written: the seq
	 * table's holes, found with SEEK_DATA at open); scans stop there, so a
	 * large sparse pool costs start-up time in proportion to its use.
	 * Once the pool is open it only grows, from two threads: an
	 * application thread reserving heap (pool_reserve, under the heap's
	 * growth lock) and the epoch thread writing a page's seq entry
	 * (persist.c); both raise it with pool_seq_pages_raise, and readers
	 * that may run beside them read it with pool_seq_pages.  Atomic. */
	uint64_t seq_pages;
	/* Identity (read-write opens): the pool is the file that was opened
	 * and locked, found as name in the directory dir_fd; dev/ino are that
	 * file's.  name_fd holds the name lock (pool_lock.c), -1 when none.
	 * All set at open (the fds registered with own_fds as fd is).
	 * lost says how the name stopped leading to the file, "" while it
	 * does: written by pool_identity_holds on the writer, read by it (the
	 * runtime's messages run there or after it stopped). */
	int dir_fd, name_fd;
	char name[256];
	uint64_t dev, ino;
	/* The directory's absolute, symlink-free path, resolved once at open
	 * from dir_fd (so that a later chdir, or a relative PMTHREADS_POOL,
	 * changes nothing), and that directory's device and inode: the check
	 * also requires that this path still leads to the directory, so that
	 * a rename of it or of any directory above it is caught.  dir_path is
	 * "" when it could not be resolved to a path that leads back to the
	 * directory (no /proc; a directory outside the process's root): the
	 * check is then by directory only.  Set at open. */
	char dir_path[PATH_MAX];
	uint64_t dir_dev, dir_ino;
	/* Written with lost: the directory moved (dir_path leads elsewhere or
	 * nowhere, and the kernel names the directory by another path), and
	 * the command that puts it back. */
	bool dir_moved;
	char put_back[2 * PATH_MAX + 16];
	char lost[PATH_MAX + 200];
};

static inline uint64_t pool_seq_pages(const struct pool *p)
{
	return __atomic_load_n(&p->seq_pages, __ATOMIC_ACQUIRE);
}

static inline void pool_seq_pages_raise(struct pool *p, uint64_t end)
{
	uint64_t cur = __atomic_load_n(&p->seq_pages, __ATOMIC_RELAXED);
	while (cur < end && !__atomic_compare_exchange_n(&p->seq_pages, &cur, end, true,
							 __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

struct pool_open_options {
	const char *path;
	uint64_t capacity;		/* heap bytes, for creation */
	uint64_t log_size;		/* log ring bytes, for creation; 0: by capacity */
	uint64_t shadow_base;		/* for creation */
	const char *creator;		/* program identity; NULL: do not check */
	bool create;			/* create when missing */
	bool read_only;			/* tools: no lock upgrade, no writes */
	/* With read_only: open a pool whose header is sound even when its
	 * version records or seq table fail validation, so that pool_check can
	 * list every problem (pmthreads-recover check).  Nothing else may use
	 * such a pool. */
	bool inspect;
	/* With read_only: open a pool of format version 2, 3 or 4 as well, for
	 * pool_upgrade, with an exclusive lock (the file is opened read-write
	 * for the lock only and never written), so that no program or other
	 * upgrade uses it meanwhile.  pool_check, pool_valid_copy and
	 * pool_verify_page work on it (the latter checks the checksums such a
	 * pool has: a version-4 pool's XXH3 of every page, a version-3 pool's
	 * of its metadata pages, none in version 2);
	 * nothing else may use it. */
	bool legacy;
	enum nvm_kind nvm;
	unsigned latency_ns;
	const struct nvm_sim_options *sim;
	/* Where pool_open stores, when it returns POOL_ERR_LOCKED, the pid of
	 * the process holding the pool (0 when unknown); NULL: not wanted. */
	pid_t *lock_holder;
	/* The caller runs checks of its own on the pool before anything may be
	 * written to it (the runtime: the restored pages' checksums, the
	 * heap's validation) and calls pool_accept once they passed.  false:
	 * pool_open accepts the pool once its own checks passed (what the log
	 * backend deferred is written then, another backend takes over), so
	 * that the caller may store into the mapping at once. */
	bool accept_later;
};

/* What pool_open returns; err_get() holds the message that goes with an
 * error (the problem, its offset, the fix). */
enum pool_error {
	POOL_OK = 0,
	POOL_ERR_REFUSED = -1,	/* anything else: no such pool, not a pool,
				 * damaged, another program's, I/O error */
	POOL_ERR_LOCKED = -2,	/* another opener holds the lock */
};

/* Open (or create) a pool.  On success POOL_OK and *out is owned by the
 * caller.  On failure an enum pool_error with err_get() naming the problem,
 * its offset and the fix; the file is left untouched.  Refused
 * (POOL_ERR_LOCKED for the lock, else POOL_ERR_REFUSED): a symbolic link,
 * anything but a regular file (FIFO, device, /proc file: opened O_NONBLOCK,
 * never read), a file that is not a pool or has another format version, page
 * size or a bad checksum, a truncated one, one whose version records both
 * fail their checksums, one whose seq table holds an entry that no crash can
 * leave (beyond VER_d + 1, both copies of a page invalid, two copies with
 * one seq), one created by another program (o->creator set and different),
 * one locked by another opener (the message names its pid when known).  An
 * existing 0-byte file is initialised (when !read_only); any other existing
 * file never is.  Nothing is written before every check of pool_open has
 * passed, not even what replaying a log would write back; with
 * o->accept_later nothing at all (the first write is pool_accept's, which
 * every writer of the pool calls first: pool_set_clean, pool_publish, the
 * epoch and torn-copy invalidation of persist.h), so that the caller's own
 * checks may still refuse the pool untouched.  read_only: O_RDONLY, shared lock, PROT_READ mapping,
 * no write at all; capacity/shadow_base/create are ignored then. */
enum pool_error pool_open(struct pool **out, const struct pool_open_options *o);

/* Whether the pool's path still names the file p holds (read-write
 * opens; always true for others): not deleted, renamed or replaced, and its
 * directory's path, resolved at open, still leads to the directory that
 * holds it (neither it nor a directory above it renamed).  When it does
 * not, p->lost says how (p->dir_moved, p->put_back: the directory moved,
 * and how to move it back) and the pool's write-back error is latched as
 * ESTALE (nvm.h), so that no epoch is published any more.  An error that
 * says nothing about the names (EACCES, ENOMEM, ELOOP...) is "cannot tell":
 * it holds, and the next call asks again.  pool_publish and pool_set_clean
 * call it before every record they write: the cost is an fstatat and a
 * stat of the directory's path per call. */
bool pool_identity_holds(struct pool *p);

/* Remove the pool file at path, refusing (-1, err_get() says why, nothing
 * removed) a symbolic link, a file that is not a pool (no pool magic) and a
 * pool in use (locked by another opener: the message names its pid when
 * known).  The exclusive lock is held while the name is removed. */
int pool_remove(const char *path);

/* Unmap and unlock; does not persist anything (see runtime shutdown) --
 * but the log backend checkpoints what its log holds, so that the next open
 * replays nothing, once the pool was accepted (pool_accept): a pool closed
 * before that, refused by a check after pool_open, is left exactly as it
 * was.  NULL is ignored. */
void pool_close(struct pool *p);
/* The pool passed every check of its open (the pool's, the heap's, the
 * restored pages' checksums): it may be written from now on.  Every writer
 * calls it before its first store; the caller that runs the checks calls it
 * once they passed.  0, or the latched write-back error (what the log
 * backend deferred could not be written: nothing else was). */
int pool_accept(struct pool *p);
/* The same in a fork child, whose copy of the pool is the parent's to
 * write: nothing at all is written. */
void pool_abandon(struct pool *p);

/* Address of copy c of page i in the mapping. */
static inline unsigned char *pool_copy(const struct pool *p, uint64_t page, int c)
{
	return p->data + page * p->page_step + (uint64_t)c * p->copy_step;
}

/* File offset of copy c of page i. */
static inline uint64_t pool_copy_offset(const struct pool *p, uint64_t page, int c)
{
	return p->data_off + page * p->page_step + (uint64_t)c * p->copy_step;
}

/* Mark the pool as in use (clean = 0, durable; also records this process
 * as the holder) / cleanly closed (1).  Must not be called on a read-only
 * pool (aborts).  Not concurrently with pool_publish.  Returns 0, or the
 * latched write-back error (nvm_error; nothing changed, the record on media
 * is the last one written before it). */
int pool_set_clean(struct pool *p, bool clean);

/* Durably make ver_d the pool's VER_d: one record write, one flush, one
 * fence (the third fence of an epoch).  *p->ver_d reads ver_d afterwards.
 * Returns 0, or the latched write-back error (nvm_error): then *p->ver_d is
 * unchanged and, when the error was latched before, nothing was stored. */
int pool_publish(struct pool *p, uint64_t ver_d);

/* Make sure heap pages [first, end) have disk space for both copies and
 * their seq entries (fallocate; the heap asks in chunks, so this is rare).
 * 0, or -1 with err_get() set (ENOSPC: the file system is full; the heap
 * must not use those pages, nothing else changed).  Callers serialise (the
 * heap calls it under its page lock); it may run while an epoch persists. */
int pool_reserve(struct pool *p, uint64_t first, uint64_t end);

/* Verify every invariant (header, checksum, version records, seq table vs
 * VER_d).  Returns the number of problems found, each reported through
 * report(msg, arg), every one of them (the first 64 in detail). */
unsigned pool_check(const struct pool *p, void (*report)(const char *msg, void *arg),
		    void *arg);

/* Facts about a pool's state, for tools (pmthreads-recover info). */
struct pool_summary {
	uint64_t ver_d;
	bool clean;
	uint64_t pages_written;		/* pages with a valid copy of seq > 0 */
	uint64_t torn_copies;		/* seq > VER_d: an interrupted epoch */
	uint64_t invalid_copies;	/* POOL_SEQ_INVALID */
	uint64_t holder_pid;		/* last read-write opener (0: none) */
	/* Format 6: the log ring's bytes, and the records (and bytes) that
	 * opening replayed -- epochs durable in the log, not yet written
	 * into the page copies by a checkpoint (0 after a clean close). */
	uint64_t log_size;
	uint64_t log_records, log_bytes;
};
void pool_summarize(const struct pool *p, struct pool_summary *s);

/* The copy (0 or 1) holding page i's consistent image, or -1 when the page
 * was never persisted (its image is zeros).  Pure; works read-only. */
int pool_valid_copy(const struct pool *p, uint64_t page);

/* Tests and the fuzzer: recompute the checksums of the header and both
 * version records in a copy of a pool's first len bytes (at least
 * POOL_RESEAL_BYTES), so that a deliberately altered header is judged by its
 * content, not refused for its checksum.  Never used on a pool in use. */
#define POOL_RESEAL_BYTES 1344
void pool_reseal(unsigned char *head, size_t len);

/* The checksum of page content bytes (page_size bytes) as page i of this
 * pool (pool_sum.h): never 0 (0 in the sum table means "none recorded"). */
uint64_t pool_page_sum(const struct pool *p, uint64_t page, const void *bytes);
/* The same as format versions 3 and 4 recorded it (an XXH3-64 of the page
 * seeded with the UUID and the page index): for pool_upgrade's check of
 * such a pool, and for tests that make one. */
uint64_t pool_page_sum_v4(const uint8_t uuid[16], size_t page_size, uint64_t page,
			  const void *bytes);
/* Check bytes, the content of page i as restored from the pool, against the
 * checksum recorded for its valid copy.  0 when they match or the page was
 * never persisted (its image is zeros); -1 when they differ or no checksum
 * was recorded for it, with what[] (what_len bytes) saying which copy, the
 * epoch that wrote it (its seq) and the file offsets of the copy and its
 * checksum.  Read-only. */
int pool_verify_page(const struct pool *p, uint64_t page, const void *bytes, char *what,
		     size_t what_len);

/* Replace the pool old (opened with .legacy, checked by the caller) by a
 * version-POOL_FORMAT_VERSION pool holding the same published image: same
 * UUID, creator, capacity, shadow base, VER_d and clean flag; each page's
 * valid copy (the one recovery restores) copied into the same slot with its
 * checksum, nothing else (copies of an interrupted epoch and invalidated
 * ones are dropped; holes stay holes); the disk space old had reserved for
 * the heap reserved again.  Crash-safe: the new pool is written under a
 * temporary name beside old (pool_upgrade_tmp_name; one left by an
 * interrupted upgrade is reused), fsynced, renamed over old's path, and the
 * directory fsynced: a crash leaves either old or the complete new pool at
 * the path.  step(what, arg), when not NULL, is called after each step (for
 * messages and the crash tests).  0 with *out filled, or -1 with err_get()
 * set (the temporary file removed, old untouched).  old is closed either
 * way. */
struct pool_upgrade_result {
	uint32_t from_version;
	uint64_t ver_d;
	uint64_t pages_copied;
};
int pool_upgrade(struct pool *old, struct pool_upgrade_result *out,
		 void (*step)(const char *what, void *arg), void *arg);
/* The temporary name pool_upgrade writes path's new pool under:
 * DIR/.BASE.pmthreads-upgrading.  0, or -1 when it does not fit len. */
int pool_upgrade_tmp_name(const char *path, char *out, size_t len);

/* File offset of page i's seq entry for copy c (for messages). */
static inline uint64_t pool_seq_offset(const struct pool *p, uint64_t page, int c)
{
	return p->seq_off + (2 * page + (uint64_t)c) * sizeof(uint64_t);
}

/* File offset of page i's checksum for copy c (for messages). */
static inline uint64_t pool_sum_offset(const struct pool *p, uint64_t page, int c)
{
	return p->sum_off + (2 * page + (uint64_t)c) * sizeof(uint64_t);
}

#endif
