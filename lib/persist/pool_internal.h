/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool_internal -- what the pool's files share: the on-media structures and
 * their checksums (pool_format.c), the file lock and its holder
 * (pool_lock.c), and the steps of making, checking and opening a pool that
 * one file owns and another calls.  Private to persist/pool*.c; everything
 * else uses pool.h.
 *
 *   pool_format.c   header and version records: layout, checksums, choice
 *   pool_create.c   a new pool: formatted, locked, synced, then named
 *   pool_validate.c an existing pool's header, records and seq table checked
 *   pool_open.c     pool_open: find or create, lock, validate, map
 *   pool.c          close, remove; VER_d publication; disk space; checksums
 *   pool_lock.c     the exclusive/shared OFD lock and who holds it
 *   pool_check.c    pmthreads-recover check: every problem of an open pool
 *   pool_upgrade.c  a version-2 to -5 pool replaced by a current one
 */
#ifndef PMT_POOL_INTERNAL_H
#define PMT_POOL_INTERNAL_H

#include "persist/nvm.h"
#include "persist/nvm_log.h"
#include "persist/pool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* On-media header, at offset 0.  Everything up to and including checksum is
 * written once at creation; the mutable lines follow at fixed offsets. */
struct pool_header {
	char magic[8];
	uint32_t format_version;
	uint32_t header_bytes;		/* sizeof(struct pool_header) */
	uint8_t uuid[16];
	uint64_t page_size;
	uint64_t npages;
	uint64_t shadow_base;
	uint64_t seq_off;
	uint64_t data_off;
	uint64_t file_size;
	uint64_t created_sec;		/* CLOCK_REALTIME at creation */
	char creator[POOL_CREATOR_MAX];
	uint64_t checksum;		/* XXH3-64 of every byte before it */
};

/* A version record (see pool.h); each slot has a cache line of its own, so
 * that a record is flushed as one line.  The advisory holder pid gets its
 * own line too, so that its (unflushed) store never rides along with them. */
struct ver_record {
	uint64_t gen;
	uint64_t ver_d;
	uint64_t clean;
	uint64_t check;		/* XXH3-64 of the fields above, seeded per slot */
};
#define POOL_MUTABLE_OFF 1024
#define POOL_REC_OFF(slot) (POOL_MUTABLE_OFF + (slot) * NVM_LINE)
#define POOL_HOLDER_OFF (POOL_MUTABLE_OFF + 2 * NVM_LINE)
/* Format 6: the log's two head slots (nvm_log.h), written by nvm_log only. */
#define POOL_LOG_HEAD_OFF (POOL_HOLDER_OFF + NVM_LINE)
#define POOL_HEADER_READ (POOL_LOG_HEAD_OFF + NVM_LOG_HEAD_BYTES)

_Static_assert(sizeof(struct pool_header) <= POOL_MUTABLE_OFF, "header overlaps mutable part");
_Static_assert(sizeof(struct ver_record) <= NVM_LINE, "a version record spans two lines");

/* Capacity limit: keeps every offset computation far from overflow. */
#define POOL_MAX_PAGES (1ULL << 32)

static inline uint64_t pool_round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* Where the seq table, the sum table and the data start, and the file's
 * size; copy c of page i at data_off + i * page_step + c * copy_step
 * (pool_layout_copy_off). */
struct pool_layout {
	uint64_t seq_off, sum_off, data_off, file_size;
	uint64_t log_off, log_size;	/* the log ring (format 6); 0, 0: none */
	uint64_t page_step, copy_step;
	uint32_t version;		/* the format version it is of */
};
/* The current format's (POOL_FORMAT_VERSION). */
struct pool_layout pool_layout_for(uint64_t npages, uint64_t page_size);
/* The same for an older format version (2: no sum table, sum_off ==
 * data_off; 3: as 4; up to 6 the copies of a page side by side, from 7 in
 * two planes). */
struct pool_layout pool_layout_of_version(uint32_t version, uint64_t npages, uint64_t page_size);
static inline uint64_t pool_layout_copy_off(const struct pool_layout *l, uint64_t page, int c)
{
	return l->data_off + page * l->page_step + (uint64_t)c * l->copy_step;
}
/* l (a layout of format 5's shape) with a log ring of log_size bytes after
 * the data, as format 6 has. */
struct pool_layout pool_layout_with_log(struct pool_layout l, uint64_t log_size);
/* The log ring a new pool of capacity bytes gets when none is asked for:
 * a quarter of the heap, at least NVM_LOG_MIN_SIZE and at most
 * POOL_LOG_DEFAULT_MAX. */
#define POOL_LOG_DEFAULT_MAX (64ull << 20)
#define POOL_LOG_MAX (64ull << 30)
uint64_t pool_default_log_size(uint64_t capacity, size_t page_size);
/* The layout the header h of a pool of its format version must have, the
 * log ring (format 6) sized from its file size.  false when h cannot have
 * one (no room for a ring, or one of a size the log cannot take). */
bool pool_layout_of_header(const struct pool_header *h, struct pool_layout *out);
/* Where nvm_log finds the ring and its head in a pool with this layout. */
struct nvm_log_region pool_log_region(const struct pool_layout *l, const uint8_t uuid[16]);

uint64_t pool_header_checksum(const struct pool_header *h);
/* Seeded with the slot, so a record copied into the other slot does not
 * pass; and with the UUID, so one copied from another pool does not. */
uint64_t pool_record_checksum(const struct ver_record *r, int slot, const uint8_t uuid[16]);
struct ver_record pool_make_record(uint64_t gen, uint64_t ver_d, uint64_t clean, int slot,
				   const uint8_t uuid[16]);
bool pool_record_valid(const struct ver_record *r, int slot, const uint8_t uuid[16]);
/* Which record is current: the valid one with the larger generation.
 * -1 when neither is valid, or when both are but they cannot be two
 * consecutive records (generations adjacent, VER_d equal or one apart). */
int pool_current_record(const struct ver_record r[2], const uint8_t uuid[16]);

/* Give back the memory of a struct pool made by pool_open (the runtime's
 * own, prim_map_any), nothing else: its fds and mapping are the caller's. */
void pool_free(struct pool *p);

/* Take the pool's OFD lock (shared for readers) without waiting: 0, or -1
 * with errno set. */
int pool_lock_fd(int fd, bool shared);
/* The lock is taken: set err_get() to a message naming the holder (its pid
 * from the header, this process, or a /proc scan) and the fix; returns that
 * pid, 0 when unknown. */
pid_t pool_report_locked(int fd, const char *path, const struct stat *st);
/* Read-write opens, before the file is looked for: p->dir_fd opened on the
 * directory of o->path, p->name set, and the name lock taken, so that no two
 * processes run on pools at one path -- even when the first one's file was
 * deleted or replaced under it, where the file's own lock no longer meets
 * the second one's.  The lock is an abstract unix socket named after the
 * directory's device and inode and the file name: the kernel releases it
 * when the process dies, and a fork child closes its copy (pool_abandon).
 * A name held by a process of another user (not root) is no pool's holder
 * -- anyone may bind any abstract name -- and is passed over with a
 * warning, the file's own lock still guarding; so is one held by a process of
 * the pool's user (or root) that has open neither the pool's directory
 * (every pmthreads holder has, from open to close) nor the file at the
 * name nor a deleted file of that name (prim_process_holds).  One whose
 * descriptors cannot be read is refused, the message saying how to check.
 * Directory path and device/inode (p->dir_path, dir_dev, dir_ino) are
 * recorded for pool_identity_holds.  POOL_OK, POOL_ERR_LOCKED
 * (*o->lock_holder set), or POOL_ERR_REFUSED, err_get() set. */
enum pool_error pool_lock_name(struct pool *p, const struct pool_open_options *o);
/* After the file is locked: it is the file at p->name (a lock-file
 * protocol's check), its device and inode recorded.  0, or -1 with
 * err_get() set. */
int pool_bind_identity(struct pool *p, const struct stat *locked);

#define POOL_REFUSE_FIX \
	"choose another PMTHREADS_POOL path, or remove the file if its data is expendable"

/* The header's offsets and size set from l; whether they are l's. */
void pool_header_set_layout(struct pool_header *h, const struct pool_layout *l);
bool pool_header_has_layout(const struct pool_header *h, const struct pool_layout *l);
/* The first POOL_HEADER_READ bytes of a pool into buf: h, its checksum set
 * (in h too), and both version records, generations 0 and 1, holding ver_d
 * and clean. */
void pool_header_image(unsigned char *buf, struct pool_header *h, uint64_t ver_d, uint64_t clean);

/* pool_create.c.  Create a new pool at path, fully formatted and locked
 * before its name appears, so that a crash during creation never leaves a
 * file without a header at path: formatted as an unnamed O_TMPFILE and
 * linked in, or where that is unsupported (FUSE, some network file systems),
 * under a temporary name renamed into place.  Returns the fd, -1 with
 * err_get() set, or -2 when path appeared meanwhile (the caller then opens
 * the existing file). */
int pool_create_file(const char *path, const struct pool_open_options *o, size_t page_size);
/* Format the empty, locked file fd as a new pool for o.  The magic is
 * written last, after everything else is on disk, so an interrupted format
 * is never taken for a pool.  -1 with err_get() set. */
int pool_format_file(int fd, const char *path, const struct pool_open_options *o,
		     size_t page_size);
/* buf (POOL_HEADER_READ bytes) is the header pool_format_file writes before
 * its magic, complete and checksummed, but the magic never came: a creation
 * interrupted by a crash.  Such a file was never a pool; nothing in it is
 * worth keeping. */
bool pool_unfinished_format(const unsigned char *buf);
/* Whether the log ring of a new pool in the file fd is written with zeros
 * at creation: everywhere but tmpfs, where reserving its space is enough. */
bool pool_log_needs_fill(int fd);
/* fsync the directory holding path (so that a rename into it is durable).
 * 0, or -1 with errno. */
int pool_sync_dir(const char *path);

/* pool_validate.c.  What pool_validate_header found in the version
 * records. */
struct pool_records {
	struct ver_record r[2];
	int cur;		/* -1: neither usable (inspect mode only) */
};
/* The version records in buf (the header's first POOL_HEADER_READ bytes: as
 * read from the file, or once replayed, from the mapping) and which is
 * current.  -1 with err_get() set when neither is usable (but for
 * o->inspect). */
int pool_read_records(const unsigned char *buf, const struct pool_header *h, const char *path,
		      const struct pool_open_options *o, bool replayed, struct pool_records *rec);
/* The header in buf (POOL_HEADER_READ bytes of the file at path, whose
 * status is st), copied into h, and its records into rec: refused (-1,
 * err_get() naming the problem and the fix) unless it is a pool o may open
 * on this system. */
int pool_validate_header(const unsigned char *buf, const struct stat *st, const char *path,
			 const struct pool_open_options *o, size_t page_size,
			 struct pool_header *h, struct pool_records *rec);
/* Pages whose seq entries may be non-zero: up to the end of the last
 * allocated extent of the seq table (holes read as zeros).  npages when the
 * file system cannot say. */
uint64_t pool_seq_extent(int fd, const struct pool_header *h, uint64_t sum_off);
/* Every seq entry of the mapped pool p is one that some sequence of epochs
 * and crashes can leave: 0, <= VER_d, VER_d + 1 (an interrupted epoch) or
 * POOL_SEQ_INVALID; at most one copy of a page not valid; two copies never
 * share a seq (pool_check says why).  Returns the number of bad pages; the
 * first is described in err_get(). */
uint64_t pool_validate_seq(const struct pool *p);

/* pool_open.c, for pool_remove too.  Open the file at path (read-only or
 * read-write, never following a link), refusing anything but a regular file
 * on a real file system without opening it first (a FIFO would block, a
 * device or /proc/self/mem would be read or written as if it were a pool).
 * 0 with *fd_out, 1 when there is no such file, -1 with err_get() set. */
int pool_open_existing(const char *path, bool read_only, int *fd_out);

#endif
