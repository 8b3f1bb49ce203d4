/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_create -- a new pool file: formatted, locked and synced before its
 * name appears.  See pool.h and pool_internal.h. */
#include "persist/pool.h"
#include "persist/pool_internal.h"

#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uuid/uuid.h>

/* A random (version 4) UUID from libuuid. */
static int fill_uuid(uint8_t uuid[16])
{
	uuid_t u;
	uuid_generate_random(u);
	memcpy(uuid, u, 16);
	return uuid_is_null(u) ? -1 : 0;
}

/* A pool is sized with one ftruncate and relies on the file system to keep
 * the untouched part a hole.  Some do not (a FUSE server that turns the new
 * size into zero writes, some network file systems): there an 8 GiB pool
 * means 16 GiB written at creation, a long silent wait.  Find out with a
 * small probe first and say so before the wait. */
#define SPARSE_PROBE_BYTES (1u << 20)
#define SPARSE_MIN_POOL (64ull << 20)	/* below this it costs little either way */
static void say_if_not_sparse(int fd, const char *path, uint64_t size)
{
	if (size < SPARSE_MIN_POOL || prim_ftruncate(fd, SPARSE_PROBE_BYTES) != 0)
		return;
	struct stat st;
	if (prim_fstat(fd, &st) != 0 || (uint64_t)st.st_blocks * 512 < SPARSE_PROBE_BYTES / 2)
		return;
	log_msg(LOG_WARN, "the file system under %s cannot hold a sparse file (a %u KiB hole "
		"took %llu KiB of disk): creating the pool writes all of its %llu MiB now, which "
		"can take minutes, and it takes that much disk.  Put the pool on a file system "
		"with sparse files (ext4, xfs, btrfs, tmpfs) or make it smaller "
		"(PMTHREADS_POOL_SIZE)", path, SPARSE_PROBE_BYTES >> 10,
		(unsigned long long)st.st_blocks / 2, (unsigned long long)(size >> 20));
}

/* On a disk the log ring is written in full at creation (see
 * pool_format_file): a ring larger than the free space would fill the file
 * system before the write fails, leaving every other program on it without
 * space meanwhile.  Refuse it first, with room to spare for the heap's first
 * pages.  -1 with err_get() set. */
#define LOG_FILL_SPARE (16ull << 20)
static int check_log_space(int fd, const char *path, uint64_t log_size)
{
	uint64_t avail;
	if (prim_fs_avail(fd, &avail) != 0 || avail >= log_size + LOG_FILL_SPARE)
		return 0;	/* cannot be told: the write reports ENOSPC itself */
	err_set("cannot create pool %s: its redo log of %llu MiB is written in full when the "
		"pool is created, and the file system has %llu MiB free: set a smaller "
		"PMTHREADS_LOG_SIZE (pmthreads-recover create --log-size) or free disk space; "
		"nothing was written", path, (unsigned long long)(log_size >> 20),
		(unsigned long long)(avail >> 20));
	return -1;
}

/* The header of a new pool for o: h filled (magic and checksum aside), l
 * its layout.  -1 with err_get() set when o cannot make a pool. */
static int new_header(const char *path, const struct pool_open_options *o, size_t page_size,
		      struct pool_header *h, struct pool_layout *l)
{
	if (o->capacity == 0) {
		err_set("cannot create pool %s: capacity 0 (set PMTHREADS_POOL_SIZE)", path);
		return -1;
	}
	uint64_t npages = pool_round_up(o->capacity, page_size) / page_size;
	if (npages > POOL_MAX_PAGES || o->capacity > UINT64_MAX - page_size) {
		err_set("cannot create pool %s: capacity %llu bytes is too large (at most %llu)",
			path, (unsigned long long)o->capacity,
			(unsigned long long)(POOL_MAX_PAGES * page_size));
		return -1;
	}
	if (o->shadow_base % page_size != 0) {
		err_set("cannot create pool %s: shadow base 0x%llx is not page-aligned", path,
			(unsigned long long)o->shadow_base);
		return -1;
	}
	uint64_t log_size = o->log_size != 0 ? pool_round_up(o->log_size, page_size)
					      : pool_default_log_size(o->capacity, page_size);
	if (log_size < NVM_LOG_MIN_SIZE) {
		err_set("cannot create pool %s: a log of %llu bytes is too small (at least %u; "
			"PMTHREADS_LOG_SIZE)", path, (unsigned long long)log_size, NVM_LOG_MIN_SIZE);
		return -1;
	}
	*l = pool_layout_with_log(pool_layout_for(npages, page_size), log_size);
	memset(h, 0, sizeof(*h));
	h->format_version = POOL_FORMAT_VERSION;
	h->header_bytes = sizeof(*h);
	if (fill_uuid(h->uuid) != 0) {
		err_set_errno(errno, "cannot create pool %s: no random bytes for its UUID", path);
		return -1;
	}
	h->page_size = page_size;
	h->npages = npages;
	h->shadow_base = o->shadow_base;
	pool_header_set_layout(h, l);
	h->created_sec = (uint64_t)time(NULL);
	if (o->creator != NULL)
		snprintf(h->creator, sizeof(h->creator), "%s", o->creator);
	return 0;
}

int pool_format_file(int fd, const char *path, const struct pool_open_options *o,
		     size_t page_size)
{
	struct pool_header h;
	struct pool_layout l;
	if (new_header(path, o, page_size, &h, &l) != 0)
		return -1;
	bool fill = pool_log_needs_fill(fd);
	if (fill && check_log_space(fd, path, l.log_size) != 0)
		return -1;
	memcpy(h.magic, POOL_MAGIC, 8);
	/* A new pool counts as cleanly closed: nothing to recover (VER_d 0,
	 * clean 1 in both records, as pool_unfinished_format expects). */
	_Alignas(64) unsigned char buf[POOL_HEADER_READ];
	pool_header_image(buf, &h, 0, 1);

	/* The header without its magic first: a file that a crash left with
	 * it is recognised as an unfinished creation (pool_open), not refused
	 * as a foreign file. */
	unsigned char nomagic[8] = { 0 };
	if (prim_pwrite_all(fd, nomagic, 8, 0) != 0 ||
	    prim_pwrite_all(fd, buf + 8, sizeof(buf) - 8, 8) != 0) {
		err_set_errno(errno, "cannot create pool %s: writing its header failed", path);
		return -1;
	}
	say_if_not_sparse(fd, path, l.file_size);
	if (prim_ftruncate(fd, (off_t)l.file_size) != 0) {
		err_set_errno(errno, "cannot create pool %s: cannot size it to %llu bytes", path,
			      (unsigned long long)l.file_size);
		return -1;
	}
	/* The ring is written once now, on a disk: overwriting blocks that
	 * hold data later changes no file metadata, so the log's fdatasync
	 * commits no journal transaction.  On tmpfs a hole costs nothing and
	 * holds zeros as well. */
	struct nvm_log_region r = pool_log_region(&l, h.uuid);
	if (nvm_log_format(fd, path, &r, fill) != 0)
		return -1;
	if (prim_fsync(fd) != 0 || prim_pwrite_all(fd, buf, 8, 0) != 0 || prim_fsync(fd) != 0) {
		err_set_errno(errno, "cannot create pool %s: writing its header failed", path);
		return -1;
	}
	return 0;
}

bool pool_log_needs_fill(int fd)
{
	return prim_fs_type(fd) != TMPFS_MAGIC;
}

bool pool_unfinished_format(const unsigned char *buf)
{
	static const unsigned char nomagic[8];
	if (memcmp(buf, nomagic, 8) != 0)
		return false;
	struct pool_header h;
	memcpy(&h, buf, sizeof(h));
	memcpy(h.magic, POOL_MAGIC, 8);
	if (h.header_bytes != sizeof(h) || h.format_version < POOL_FORMAT_RW_OLDEST ||
	    h.format_version > POOL_FORMAT_VERSION ||
	    pool_header_checksum(&h) != h.checksum)
		return false;
	/* And both version records as created: a pool that was ever opened
	 * for writing has a later one, and is never taken for unfinished. */
	for (int slot = 0; slot < 2; slot++) {
		struct ver_record r = pool_make_record((uint64_t)slot, 0, 1, slot, h.uuid);
		if (memcmp(buf + POOL_REC_OFF(slot), &r, sizeof(r)) != 0)
			return false;
	}
	return true;
}

static void dir_of(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		snprintf(dir, len, ".");
	else if (slash == path)
		snprintf(dir, len, "/");
	else
		snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

int pool_sync_dir(const char *path)
{
	char dir[PATH_MAX];
	dir_of(path, dir, sizeof(dir));
	return prim_sync_dir(dir);
}

/* The name a pool is formatted under before it is renamed to path, where
 * O_TMPFILE is not available: in the same directory (a rename never crosses
 * file systems), hidden, and one per pool path, so that a creation
 * interrupted by a crash is found and finished by the next one instead of
 * being left behind. */
static int creating_name(const char *path, char *out, size_t len)
{
	char dir[PATH_MAX];
	dir_of(path, dir, sizeof(dir));
	const char *slash = strrchr(path, '/');
	const char *base = slash != NULL ? slash + 1 : path;
	int n = snprintf(out, len, "%s/.%s.pmthreads-creating", dir, base);
	if (n < 0 || (size_t)n >= len) {
		err_set("cannot create pool %s: its path is too long for the temporary name used "
			"while it is created", path);
		return -1;
	}
	return 0;
}

/* Move the formatted file at tmp to path without replacing anything there.
 * 0, 1 when path exists (tmp is then removed), 2 when path is a second link
 * to the file (tmp is to be removed once the file is closed: see
 * create_named), -1 with errno. */
static int publish_name(const char *tmp, const char *path)
{
	if (prim_rename_noreplace(tmp, path) == 0)
		return 0;
	if (errno == EEXIST) {
		prim_unlink(tmp);
		return 1;
	}
	if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
		return -1;
	/* No RENAME_NOREPLACE here (NFS, sshfs, LazyFS and other FUSE
	 * servers): a hard link fails on an existing name just the same. */
	if (prim_link(tmp, path) == 0)
		return 2;
	if (errno == EEXIST) {
		prim_unlink(tmp);
		return 1;
	}
	/* Neither: a plain rename, refused when path is there.  Two creators
	 * at once both hold the temporary file's lock in turn, so only a
	 * foreign file appearing in between could be replaced. */
	struct stat st;
	if (prim_lstat(path, &st) == 0) {
		prim_unlink(tmp);
		return 1;
	}
	return prim_rename(tmp, path);
}

/* Wait for the lock of fd, the file at tmp, while it is still there (see
 * create_named); *fst its status then.  0 when locked, -2 when tmp was
 * renamed meanwhile, -1 with err_get() set. */
static int lock_creating(int fd, const char *tmp, const char *path, struct stat *fst)
{
	struct stat nst;
	for (;;) {
		if (prim_fstat(fd, fst) != 0 || prim_lstat(tmp, &nst) != 0 ||
		    fst->st_ino != nst.st_ino || fst->st_dev != nst.st_dev)
			return -2;
		if (pool_lock_fd(fd, false) == 0)
			break;
		if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
			err_set_errno(errno, "cannot lock %s while creating the pool %s", tmp, path);
			return -1;
		}
		prim_sleep_ns(10000000);
	}
	/* Renamed by the creator that held the lock just before us? */
	if (prim_lstat(tmp, &nst) != 0 || fst->st_ino != nst.st_ino || fst->st_dev != nst.st_dev)
		return -2;
	return 0;
}

/* The new pool fd is linked at path and still at tmp.  A file unlinked
 * while it is open stays behind on a FUSE file system as .fuse_hiddenN until
 * it is closed (libfuse's high-level API hides it rather than remove it,
 * unless the server sets hard_remove) -- for a pool, the program's life, and
 * for good if the file system goes first.  So the pool is closed before tmp
 * is removed, and
 * opened again at path: the locked descriptor, or -2 when the file there is
 * locked by another process already or is not the one just formatted (the
 * caller then opens what is at path), -1 with err_get() set. */
static int reopen_linked(int fd, const char *tmp, const char *path)
{
	unsigned char made[POOL_HEADER_READ], found[POOL_HEADER_READ];
	bool read_made = prim_pread_all(fd, made, sizeof(made), 0) == (ssize_t)sizeof(made);
	prim_close(fd);
	prim_unlink(tmp);
	if (!read_made) {
		err_set_errno(errno, "cannot create pool %s: reading it back failed", path);
		return -1;
	}
	fd = prim_open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return -2;	/* gone again: the caller looks once more */
	if (pool_lock_fd(fd, false) != 0 ||
	    prim_pread_all(fd, found, sizeof(found), 0) != (ssize_t)sizeof(found) ||
	    memcmp(made, found, sizeof(made)) != 0) {
		prim_close(fd);
		return -2;
	}
	pool_sync_dir(path);	/* best effort: the pool is in place either way */
	return fd;
}

/* Create the pool under its temporary name (creating_name), formatted and
 * locked, then rename it to path.  Same results as pool_create_file. */
static int create_named(const char *path, const struct pool_open_options *o, size_t page_size)
{
	char tmp[PATH_MAX];
	if (creating_name(path, tmp, sizeof(tmp)) != 0)
		return -1;
	int fd = prim_open(tmp, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err_set_errno(errno, "cannot create pool %s (as %s first)", path, tmp);
		return -1;
	}
	/* Another process creating the same pool holds the lock until it
	 * closes the pool, long after the rename: wait only while the file is
	 * still under the temporary name, then find the pool at path. */
	struct stat fst;
	int locked = lock_creating(fd, tmp, path, &fst);
	if (locked != 0) {
		prim_close(fd);
		return locked;
	}
	struct stat pst;
	if (S_ISREG(fst.st_mode) && fst.st_nlink == 2 && prim_lstat(path, &pst) == 0) {
		/* Linked at path by a creator that has not yet removed this
		 * name (publish_name's fallback): the pool is there. */
		prim_close(fd);
		return -2;
	}
	if (!S_ISREG(fst.st_mode) || fst.st_nlink != 1 || fst.st_uid != prim_geteuid()) {
		err_set("cannot create pool %s: %s is in the way and is not an unfinished pool "
			"creation of this user; remove it", path, tmp);
		prim_close(fd);
		return -1;
	}
	if (fst.st_size != 0)
		log_msg(LOG_INFO, "pool %s: finishing a creation that was interrupted (%s)", path,
			tmp);
	/* Whatever an interrupted creation left: it never had a name anyone
	 * uses, so it holds nothing. */
	if (prim_ftruncate(fd, 0) != 0 || pool_format_file(fd, path, o, page_size) != 0) {
		if (err_get()[0] == '\0')
			err_set_errno(errno, "cannot create pool %s", path);
		prim_close(fd);
		prim_unlink(tmp);
		return -1;
	}
	int pr = publish_name(tmp, path);
	if (pr == 2)
		return reopen_linked(fd, tmp, path);
	if (pr != 0) {
		if (pr < 0) {
			err_set_errno(errno, "cannot create pool %s: renaming %s to it failed", path,
				      tmp);
			prim_unlink(tmp);
		}
		prim_close(fd);
		return pr < 0 ? -1 : -2;
	}
	pool_sync_dir(path);	/* best effort: the pool is in place either way */
	return fd;
}

int pool_create_file(const char *path, const struct pool_open_options *o, size_t page_size)
{
	char dir[PATH_MAX];
	dir_of(path, dir, sizeof(dir));
	int fd = prim_open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0) {
		if (pool_lock_fd(fd, false) != 0) {
			err_set_errno(errno, "cannot lock the new pool %s", path);
			prim_close(fd);
			return -1;
		}
		if (pool_format_file(fd, path, o, page_size) != 0) {
			prim_close(fd);
			return -1;
		}
		if (prim_link_fd(fd, path) == 0) {
			prim_sync_dir(dir);	/* best effort: the pool is in place either way */
			return fd;
		}
		int e = errno;
		prim_close(fd);
		if (e == EEXIST)
			return -2;
		/* No /proc, or a file system that cannot link a tmpfile: fall
		 * through to the temporary name. */
	}
	return create_named(path, o, page_size);
}
