/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool_upgrade -- a pool of an older format version replaced by a current
 * one holding the same published image (pmthreads-recover upgrade).  See
 * pool.h.  Format 6, which the runtime still uses as it is, becomes 7 too
 * (its copies moved into planes).
 *
 * The new pool is a new file: the old one is never written, so whatever
 * happens before the rename, the old pool is intact at its path, and the
 * rename puts a complete, synced new pool there in one step.
 */
#include "persist/pool.h"
#include "persist/pool_internal.h"

#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pool_upgrade_tmp_name(const char *path, char *out, size_t len)
{
	const char *slash = strrchr(path, '/');
	int n = slash == NULL ? snprintf(out, len, "./.%s.pmthreads-upgrading", path)
			      : snprintf(out, len, "%.*s/.%s.pmthreads-upgrading",
					 (int)(slash - path), path, slash + 1);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int reserve(int fd, uint64_t off, uint64_t len)
{
	int r = prim_fallocate(fd, off, len);
	if (r != 0 && (errno == EOPNOTSUPP || errno == ENOSYS))
		return 0;
	return r;
}

/* The path still names old's file (not replaced since it was opened). */
static bool still_at_path(const struct pool *old)
{
	struct stat a, b;
	return prim_fstat(old->fd, &a) == 0 && prim_lstat(old->path, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Open (or take over what an interrupted upgrade left of) the temporary
 * file, locked and empty.  -1 with err_get() set. */
static int open_tmp(const struct pool *old, const char *tmp)
{
	int fd = prim_open(tmp, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err_set_errno(errno, "cannot upgrade pool %s: cannot create %s beside it for the new "
			      "pool", old->path, tmp);
		return -1;
	}
	struct stat st;
	if (prim_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    st.st_uid != prim_geteuid()) {
		err_set("cannot upgrade pool %s: %s is in the way and is not an unfinished upgrade "
			"of this user; remove it", old->path, tmp);
		prim_close(fd);
		return -1;
	}
	/* Only an upgrade of this pool uses the name, and it holds the old
	 * pool's exclusive lock, which this process has: whatever the file
	 * holds was left by an interrupted upgrade and never had a use. */
	if (pool_lock_fd(fd, false) != 0 || prim_ftruncate(fd, 0) != 0) {
		err_set_errno(errno, "cannot upgrade pool %s: cannot lock and empty %s", old->path,
			      tmp);
		prim_close(fd);
		return -1;
	}
	/* The old pool's owner and mode, so that its program (root may be
	 * the one upgrading) opens the new one as it did the old. */
	struct stat ost;
	if (prim_fstat(old->fd, &ost) != 0 || prim_fchmod(fd, ost.st_mode & 07777) != 0) {
		err_set_errno(errno, "cannot upgrade pool %s: cannot give %s the old pool's mode",
			      old->path, tmp);
		prim_close(fd);
		prim_unlink(tmp);
		return -1;
	}
	if ((ost.st_uid != st.st_uid || ost.st_gid != st.st_gid) &&
	    prim_fchown(fd, ost.st_uid, ost.st_gid) != 0)
		log_msg(LOG_WARN, "pool %s: the upgraded pool belongs to uid %u gid %u, not to the "
			"old pool's uid %u gid %u (%s): chown it if its program runs as them",
			old->path, (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)ost.st_uid,
			(unsigned)ost.st_gid, strerror(errno));
	return fd;
}

static void note_step(void (*step)(const char *what, void *arg), const char *what, void *arg)
{
	if (step != NULL)
		step(what, arg);
}

/* The new pool's header at l, the file sized to it, and its empty log.  -1
 * with err_get() set. */
static int write_header(const struct pool *old, int fd, const char *tmp,
			const struct pool_layout *l)
{
	_Alignas(64) unsigned char head[POOL_HEADER_READ];
	struct pool_header h;
	memcpy(&h, old->nvm->base, sizeof(h));	/* UUID, creator, base, capacity kept */
	h.format_version = POOL_FORMAT_VERSION;
	pool_header_set_layout(&h, l);
	pool_header_image(head, &h, old->ver_d_now, old->clean_now);
	if (prim_pwrite_all(fd, head, sizeof(head), 0) != 0 ||
	    prim_ftruncate(fd, (off_t)l->file_size) != 0) {
		err_set_errno(errno, "cannot upgrade pool %s: writing the new pool's header to %s "
			      "failed", old->path, tmp);
		return -1;
	}
	/* An empty log, its ring written as a new pool's is (pool_create.c). */
	struct nvm_log_region r = pool_log_region(l, h.uuid);
	return nvm_log_format(fd, tmp, &r, pool_log_needs_fill(fd));
}

/* The disk space old had for the heap (its seq table's extent): the runtime
 * reserved it as the heap grew and counts on it.  -1 with err_get() set. */
static int reserve_heap(const struct pool *old, int fd, const struct pool_layout *l)
{
	const uint64_t n = old->seq_pages, ps = old->page_size;
	const uint64_t table_bytes = pool_round_up(n * 2 * sizeof(uint64_t), ps);
	if (reserve(fd, l->seq_off, table_bytes) != 0 || reserve(fd, l->sum_off, table_bytes) != 0 ||
	    reserve(fd, pool_layout_copy_off(l, 0, 0), n * ps) != 0 ||
	    reserve(fd, pool_layout_copy_off(l, 0, 1), n * ps) != 0) {
		err_set_errno(errno, "cannot upgrade pool %s: no disk space for the new pool (%llu "
			      "bytes of heap, written beside the old pool until it replaces it)",
			      old->path, (unsigned long long)(2 * n * ps));
		return -1;
	}
	return 0;
}

/* Each page's valid copy written to its slot at l in fd, its seq and sum
 * entered in seq and sum; *copied counts them.  -1 with err_get() set. */
static int copy_pages(const struct pool *old, int fd, const char *tmp,
		      const struct pool_layout *l, uint64_t (*seq)[2], uint64_t (*sum)[2],
		      uint64_t *copied)
{
	const uint64_t ps = old->page_size;
	*copied = 0;
	for (uint64_t i = 0; i < old->seq_pages; i++) {
		int c = pool_valid_copy(old, i);
		if (c < 0)
			continue;	/* never persisted: zeros, a hole */
		const unsigned char *src = pool_copy(old, i, c);
		/* Same slot, same seq: the one copy is the valid one (the
		 * other's seq 0 is "never written"). */
		seq[i][c] = old->seq[i][c];
		sum[i][c] = pool_page_sum(old, i, src);
		off_t at = (off_t)pool_layout_copy_off(l, i, c);
		if (prim_pwrite_all(fd, src, ps, at) != 0) {
			err_set_errno(errno, "cannot upgrade pool %s: writing page %llu to %s "
				      "failed", old->path, (unsigned long long)i, tmp);
			return -1;
		}
		++*copied;
	}
	return 0;
}

static void free_tables(void *seq, void *sum, size_t len)
{
	if (seq != NULL)
		prim_unmap(seq, len);
	if (sum != NULL)
		prim_unmap(sum, len);
}

/* The valid copies, then the seq and sum tables, written at l in fd.  -1
 * with err_get() set. */
static int write_pages(const struct pool *old, int fd, const char *tmp,
		       const struct pool_layout *l, uint64_t *copied,
		       void (*step)(const char *what, void *arg), void *arg)
{
	const uint64_t n = old->seq_pages;
	/* Zeroed, and from the runtime's own memory like all of persist/'s
	 * (pmthreads-recover's only, but the code is the library's). */
	const size_t len = (n != 0 ? n : 1) * sizeof(uint64_t[2]);
	uint64_t(*seq)[2] = prim_map_any(len);
	uint64_t(*sum)[2] = prim_map_any(len);
	if (seq == NULL || sum == NULL) {
		free_tables(seq, sum, len);
		err_set_errno(ENOMEM, "cannot upgrade pool %s", old->path);
		return -1;
	}
	int rc = copy_pages(old, fd, tmp, l, seq, sum, copied);
	if (rc == 0)
		note_step(step, "pages copied", arg);
	if (rc == 0 && n != 0 &&
	    (prim_pwrite_all(fd, seq, n * sizeof(*seq), (off_t)l->seq_off) != 0 ||
	     prim_pwrite_all(fd, sum, n * sizeof(*sum), (off_t)l->sum_off) != 0)) {
		err_set_errno(errno, "cannot upgrade pool %s: writing the seq and sum tables to %s "
			      "failed", old->path, tmp);
		rc = -1;
	}
	free_tables(seq, sum, len);
	if (rc == 0)
		note_step(step, "tables written", arg);
	return rc;
}

/* Write the new pool into fd: header, reserved space, valid copies, seq and
 * sum tables.  -1 with err_get() set. */
static int write_new(const struct pool *old, int fd, const char *tmp, uint64_t *copied,
		     void (*step)(const char *what, void *arg), void *arg)
{
	const uint64_t ps = old->page_size, npages = old->npages;
	struct pool_layout l = pool_layout_with_log(pool_layout_for(npages, ps),
						    pool_default_log_size(npages * ps, ps));
	if (write_header(old, fd, tmp, &l) != 0)
		return -1;
	note_step(step, "header written", arg);
	if (reserve_heap(old, fd, &l) != 0)
		return -1;
	note_step(step, "space reserved", arg);
	return write_pages(old, fd, tmp, &l, copied, step, arg);
}

/* Whether old can be upgraded, tmp (len bytes) set to the new pool's
 * temporary name.  -1 with err_get() set. */
static int check_upgradable(const struct pool *old, char *tmp, size_t len)
{
	if (old->format_version == POOL_FORMAT_VERSION || !old->read_only) {
		err_set("pool %s: pool_upgrade needs a pool of an older format opened with .legacy",
			old->path);
		return -1;
	}
	if (pool_upgrade_tmp_name(old->path, tmp, len) != 0) {
		err_set("cannot upgrade pool %s: its path is too long for the temporary name of the "
			"new pool", old->path);
		return -1;
	}
	if (!still_at_path(old)) {
		err_set("pool %s was replaced while being upgraded (another upgrade?); nothing was "
			"changed", old->path);
		return -1;
	}
	return 0;
}

/* The new pool in fd, written at tmp, synced and renamed over old's path.
 * -1 with err_get() set, the old pool still in place. */
static int replace_old(const struct pool *old, int fd, const char *tmp,
		       void (*step)(const char *what, void *arg), void *arg)
{
	if (prim_fsync(fd) != 0) {
		err_set_errno(errno, "cannot upgrade pool %s: syncing the new pool %s failed",
			      old->path, tmp);
		return -1;
	}
	note_step(step, "new pool synced", arg);
	/* We hold the old file's exclusive lock, so no other upgrade or
	 * program is at this path's file; one that replaced the name is. */
	if (!still_at_path(old)) {
		err_set("pool %s was replaced while being upgraded; the new pool was discarded and "
			"nothing was changed", old->path);
		return -1;
	}
	if (prim_rename(tmp, old->path) != 0) {
		err_set_errno(errno, "cannot upgrade pool %s: renaming %s over it failed (the old "
			      "pool is still there)", old->path, tmp);
		return -1;
	}
	note_step(step, "renamed over the old pool", arg);
	return 0;
}

int pool_upgrade(struct pool *old, struct pool_upgrade_result *out,
		 void (*step)(const char *what, void *arg), void *arg)
{
	err_clear();
	memset(out, 0, sizeof(*out));
	out->from_version = old->format_version;
	out->ver_d = old->ver_d_now;
	char tmp[PATH_MAX];
	int fd = -1;
	if (check_upgradable(old, tmp, sizeof(tmp)) != 0)
		goto fail;
	fd = open_tmp(old, tmp);
	if (fd < 0)
		goto fail;
	note_step(step, "temporary file created", arg);
	if (write_new(old, fd, tmp, &out->pages_copied, step, arg) != 0 ||
	    replace_old(old, fd, tmp, step, arg) != 0)
		goto fail_unlink;
	if (pool_sync_dir(old->path) != 0) {
		/* The new pool is at the path; only its durability across a
		 * power cut right now is in doubt. */
		log_msg(LOG_WARN, "pool %s: the upgraded pool is in place, but syncing its "
			"directory failed (%s): a power cut now could bring back the old pool, "
			"which can be upgraded again", old->path, strerror(errno));
	} else {
		note_step(step, "directory synced", arg);
	}
	prim_close(fd);
	pool_close(old);
	return 0;
fail_unlink:
	prim_unlink(tmp);
fail:
	if (fd >= 0)
		prim_close(fd);
	pool_close(old);
	return -1;
}
