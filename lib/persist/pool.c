/* SPDX-License-Identifier: BSD-3-Clause */
/* pool -- an open pool file: close, remove, VER_d publication and the clean
 * flag, disk space, valid copies and their checksums.  See pool.h, and
 * pool_internal.h for the other files of the pool. */
#include "persist/pool.h"
#include "persist/pool_internal.h"

#include "base/log.h"
#include "base/own_fds.h"
#include "persist/persist.h"
#include "prim/prim.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

int pool_remove(const char *path)
{
	err_clear();
	int fd = -1;
	int rc = pool_open_existing(path, false, &fd);
	if (rc > 0)
		err_set("%s does not exist", path);
	if (rc != 0)
		return -1;
	char magic[8];
	struct stat st;
	if (prim_pread_all(fd, magic, sizeof(magic), 0) != (ssize_t)sizeof(magic) ||
	    memcmp(magic, POOL_MAGIC, sizeof(magic)) != 0) {
		err_set("%s is not a pmthreads pool (no pool header); it was not removed", path);
		prim_close(fd);
		return -1;
	}
	if (prim_fstat(fd, &st) != 0 || pool_lock_fd(fd, false) != 0) {
		if (errno == EAGAIN || errno == EACCES)
			pool_report_locked(fd, path, &st);
		else
			err_set_errno(errno, "cannot lock pool %s", path);
		char why[600];
		snprintf(why, sizeof(why), "%s", err_get());
		err_set("%s; it was not removed", why);
		prim_close(fd);
		return -1;
	}
	struct stat now;
	if (prim_lstat(path, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
		err_set("pool %s was replaced while being removed; nothing was removed", path);
		prim_close(fd);
		return -1;
	}
	if (prim_unlink(path) != 0) {
		err_set_errno(errno, "cannot remove pool %s", path);
		prim_close(fd);
		return -1;
	}
	prim_close(fd);
	return 0;
}

static void close_pool(struct pool *p, void (*unmap)(struct nvm *))
{
	if (p == NULL)
		return;
	unmap(p->nvm);
	persist_release(p);
	own_fd_close(&p->fd);
	/* The name before the directory: an opener passes over a name whose
	 * holder has no pool directory open (pool_lock.c). */
	own_fd_close(&p->name_fd);	/* a fork child's copy too: the name is the parent's */
	own_fd_close(&p->dir_fd);
	pool_sum_key_fini(&p->sum_key);
	pool_free(p);
}

void pool_free(struct pool *p) { prim_unmap(p, sizeof(*p)); }

void pool_close(struct pool *p) { close_pool(p, nvm_unmap); }

void pool_abandon(struct pool *p) { close_pool(p, nvm_abandon); }

int pool_accept(struct pool *p)
{
	if (p->read_only)
		log_fatal("pool_accept on %s, which was opened read-only", p->path);
	return nvm_accept(p->nvm);
}

/* Write the next record into the slot that does not hold the current one.
 * Returns 0, or the latched write-back error (nvm.h): then nothing was
 * stored (when it was latched before) or the record's fence failed, and the
 * pool's idea of its current record is unchanged. */
static int write_record(struct pool *p, uint64_t ver_d, uint64_t clean)
{
	if (pool_accept(p) != 0)
		return nvm_error(p->nvm);
	/* No record goes to a file the pool's path no longer names: nobody
	 * would find what it acknowledges. */
	if (!pool_identity_holds(p))
		return nvm_error(p->nvm);
	int slot = 1 - p->rec_slot;
	struct ver_record r = pool_make_record(p->rec_gen + 1, ver_d, clean, slot, p->uuid);
	unsigned char *dst = (unsigned char *)p->nvm->base + POOL_REC_OFF(slot);
	memcpy(dst, &r, sizeof(r));
	nvm_flush(p->nvm, dst, sizeof(r));
	nvm_fence(p->nvm);
	if (nvm_error(p->nvm) != 0)
		return nvm_error(p->nvm);
	p->rec_slot = slot;
	p->rec_gen = r.gen;
	p->clean_now = clean;
	p->ver_d_now = ver_d;
	return 0;
}

int pool_set_clean(struct pool *p, bool clean)
{
	if (p->read_only)
		log_fatal("pool_set_clean on %s, which was opened read-only", p->path);
	if (pool_accept(p) != 0)
		return nvm_error(p->nvm);
	if (!clean)
		*p->holder_pid = (uint64_t)prim_getpid();
	return write_record(p, p->ver_d_now, clean ? 1 : 0);
}

int pool_publish(struct pool *p, uint64_t ver_d)
{
	return write_record(p, ver_d, p->clean_now);
}

/* Allocate [off, off + len) of p's file; ENOSPC and the like as -1 + errno.
 * A file system that cannot reserve (FUSE, NFS before 4.2, ext4 without
 * extents) is said once: there the pool stays sparse, and filling the file
 * system up shows only when the write-back stores into an unallocated page
 * -- a storage error then (nvm.h), the program going on unpersisted.
 * Writing zeros instead would not reserve on most of them (FUSE and NFS
 * allocate on the server at write-back) and would cost the heap's size in
 * writes. */
static int allocate_range(const struct pool *p, uint64_t off, uint64_t len)
{
	static atomic_bool said;
	int r = prim_fallocate(p->fd, off, len);
	if (r != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) {
		if (!atomic_exchange(&said, true))
			log_msg(LOG_WARN, "the file system under %s cannot reserve disk space "
				"(fallocate: %s): should it fill up, the write-back fails, and "
				"the program goes on without persistence (or exits with "
				"PMTHREADS_STRICT=1) from the last durable epoch; keep the pool "
				"on xfs, btrfs, tmpfs or ext4 with extents to be told at "
				"allocation instead",
				p->path, strerror(errno));
		return 0;
	}
	return r;
}

/* Reserve pages [from, to): their copies and the seq- and sum-table pages
 * holding their entries. */
static int reserve_range(struct pool *p, uint64_t from, uint64_t to)
{
	uint64_t ps = p->page_size;
	uint64_t s0 = pool_seq_offset(p, from, 0) / ps * ps;
	uint64_t s1 = pool_round_up(pool_seq_offset(p, to, 0), ps);
	if (s1 > p->sum_off)
		s1 = p->sum_off;
	if (allocate_range(p, s0, s1 - s0) != 0)
		return -1;
	s0 = pool_sum_offset(p, from, 0) / ps * ps;
	s1 = pool_round_up(pool_sum_offset(p, to, 0), ps);
	if (s1 > p->data_off)
		s1 = p->data_off;
	if (allocate_range(p, s0, s1 - s0) != 0)
		return -1;
	/* Both copies: one run where they are side by side (format 6), one
	 * in each plane otherwise. */
	if (p->copy_step == ps)
		return allocate_range(p, pool_copy_offset(p, from, 0), 2 * (to - from) * ps);
	if (allocate_range(p, pool_copy_offset(p, from, 0), (to - from) * ps) != 0)
		return -1;
	return allocate_range(p, pool_copy_offset(p, from, 1), (to - from) * ps);
}

int pool_reserve(struct pool *p, uint64_t first, uint64_t end)
{
	if (end > p->npages)
		end = p->npages;
	if (first >= end || p->read_only)
		return 0;
	if (reserve_range(p, first, end) != 0) {
		err_set_errno(errno, "pool %s: no disk space for %llu more bytes of heap (its "
			      "file system is full); the allocation failed and nothing was lost: "
			      "free space on that file system", p->path,
			      (unsigned long long)((end - first) * p->page_size));
		return -1;
	}
	pool_seq_pages_raise(p, end);
	return 0;
}

int pool_valid_copy(const struct pool *p, uint64_t page)
{
	if (page >= pool_seq_pages(p))
		return -1;	/* a hole of the seq table: never written */
	uint64_t v = *p->ver_d;
	uint64_t s0 = p->seq[page][0], s1 = p->seq[page][1];
	/* POOL_SEQ_INVALID > any VER_d, so it is never valid. */
	bool ok0 = s0 <= v, ok1 = s1 <= v;
	int c;
	if (ok0 && ok1)
		c = s1 > s0 ? 1 : 0;
	else if (ok0)
		c = 0;
	else if (ok1)
		c = 1;
	else
		return -1;
	return p->seq[page][c] == 0 ? -1 : c;
}

uint64_t pool_page_sum(const struct pool *p, uint64_t page, const void *bytes)
{
	return pool_sum_of_page(&p->sum_key, page, bytes);
}

/* Seeded with the page index, so that a page's bytes stored as another page
 * do not pass, and with the UUID, so that a page from another pool does not
 * either. */
uint64_t pool_page_sum_v4(const uint8_t uuid[16], size_t page_size, uint64_t page,
			  const void *bytes)
{
	uint64_t seed;
	memcpy(&seed, uuid, sizeof(seed));
	uint64_t s = XXH3_64bits_withSeed(bytes, page_size, seed ^ ((page + 1) * 0x9e3779b97f4a7c15ULL));
	return s != 0 ? s : 1;
}

int pool_verify_page(const struct pool *p, uint64_t page, const void *bytes, char *what,
		     size_t what_len)
{
	int c = pool_valid_copy(p, page);
	if (c < 0 || p->sum == NULL)
		return 0;	/* never persisted, or a version-2 pool: no checksums */
	uint64_t want = p->sum[page][c];
	if (want == 0 && p->format_version == 3)
		return 0;	/* version 3 summed the heap's metadata pages only */
	unsigned long long copy_off = (unsigned long long)pool_copy_offset(p, page, c);
	unsigned long long epoch = (unsigned long long)p->seq[page][c];
	if (want == 0) {
		snprintf(what, what_len, "copy %d, written by epoch %llu, at file offset %llu, has no "
			 "checksum (its entry at offset %llu is 0)", c, epoch, copy_off,
			 (unsigned long long)pool_sum_offset(p, page, c));
		return -1;
	}
	uint64_t got = p->format_version >= 5
			       ? pool_page_sum(p, page, bytes)
			       : pool_page_sum_v4(p->uuid, p->page_size, page, bytes);
	if (got != want) {
		snprintf(what, what_len, "copy %d, written by epoch %llu, at file offset %llu, does not "
			 "match the checksum recorded when it was made durable (at offset %llu)", c,
			 epoch, copy_off, (unsigned long long)pool_sum_offset(p, page, c));
		return -1;
	}
	return 0;
}
