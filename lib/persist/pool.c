/* SPDX-License-Identifier: BSD-3-Clause */
/* pool -- the pool file: create, open, close, publish, reserve.  See pool.h
 * and pool_internal.h for the other files of the pool. */
#include "persist/pool.h"
#include "persist/pool_internal.h"

#include "base/log.h"
#include "base/own_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <uuid/uuid.h>
#include <xxhash.h>

#define REFUSE_FIX "choose another PMTHREADS_POOL path, or remove the file if its data is expendable"

/* ---- creation ---- */

/* A random (version 4) UUID from libuuid. */
static int fill_uuid(uint8_t uuid[16])
{
	uuid_t u;
	uuid_generate_random(u);
	memcpy(uuid, u, 16);
	return uuid_is_null(u) ? -1 : 0;
}

int pool_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *b = buf;
	while (len > 0) {
		ssize_t w = pwrite(fd, b, len, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		b += w;
		len -= (size_t)w;
		off += w;
	}
	return 0;
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
	if (size < SPARSE_MIN_POOL || ftruncate(fd, SPARSE_PROBE_BYTES) != 0)
		return;
	struct stat st;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_blocks * 512 < SPARSE_PROBE_BYTES / 2)
		return;
	log_msg(LOG_WARN, "the file system under %s cannot hold a sparse file (a %u KiB hole "
		"took %llu KiB of disk): creating the pool writes all of its %llu MiB now, which "
		"can take minutes, and it takes that much disk.  Put the pool on a file system "
		"with sparse files (ext4, xfs, btrfs, tmpfs) or make it smaller "
		"(PMTHREADS_POOL_SIZE)", path, SPARSE_PROBE_BYTES >> 10,
		(unsigned long long)st.st_blocks / 2, (unsigned long long)(size >> 20));
}

/* Format the empty, locked file fd.  The magic is written last, after
 * everything else is on disk, so an interrupted format is never taken for a
 * pool. */
static int format_pool(int fd, const char *path, const struct pool_open_options *o,
		       size_t page_size)
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
	struct pool_layout l = pool_layout_for(npages, page_size);
	_Alignas(64) unsigned char buf[POOL_HEADER_READ];
	memset(buf, 0, sizeof(buf));
	struct pool_header h;
	memset(&h, 0, sizeof(h));
	h.format_version = POOL_FORMAT_VERSION;
	h.header_bytes = sizeof(h);
	if (fill_uuid(h.uuid) != 0) {
		err_set_errno(errno, "cannot create pool %s: no random bytes for its UUID", path);
		return -1;
	}
	h.page_size = page_size;
	h.npages = npages;
	h.shadow_base = o->shadow_base;
	h.seq_off = l.seq_off;
	h.data_off = l.data_off;
	h.file_size = l.file_size;
	h.created_sec = (uint64_t)time(NULL);
	if (o->creator != NULL)
		snprintf(h.creator, sizeof(h.creator), "%s", o->creator);
	memcpy(h.magic, POOL_MAGIC, 8);
	h.checksum = pool_header_checksum(&h);
	memcpy(buf, &h, sizeof(h));
	/* A new pool counts as cleanly closed: nothing to recover.  Both
	 * slots hold a valid record, generations 0 and 1. */
	for (int slot = 0; slot < 2; slot++) {
		struct ver_record r = pool_make_record((uint64_t)slot, 0, 1, slot, h.uuid);
		memcpy(buf + POOL_REC_OFF(slot), &r, sizeof(r));
	}

	/* The header without its magic first: a file that a crash left with
	 * it is recognised as an unfinished creation (pool_open), not refused
	 * as a foreign file. */
	unsigned char nomagic[8] = { 0 };
	if (pool_pwrite_all(fd, nomagic, 8, 0) != 0 ||
	    pool_pwrite_all(fd, buf + 8, sizeof(buf) - 8, 8) != 0) {
		err_set_errno(errno, "cannot create pool %s: writing its header failed", path);
		return -1;
	}
	say_if_not_sparse(fd, path, l.file_size);
	if (ftruncate(fd, (off_t)l.file_size) != 0) {
		err_set_errno(errno, "cannot create pool %s: cannot size it to %llu bytes", path,
			      (unsigned long long)l.file_size);
		return -1;
	}
	if (fsync(fd) != 0 || pool_pwrite_all(fd, buf, 8, 0) != 0 || fsync(fd) != 0) {
		err_set_errno(errno, "cannot create pool %s: writing its header failed", path);
		return -1;
	}
	return 0;
}

/* buf (POOL_HEADER_READ bytes) is the header format_pool writes before its
 * magic, complete and checksummed, but the magic never came: a creation
 * interrupted by a crash.  Such a file was never a pool; nothing in it is
 * worth keeping. */
static bool unfinished_format(const unsigned char *buf)
{
	static const unsigned char nomagic[8];
	if (memcmp(buf, nomagic, 8) != 0)
		return false;
	struct pool_header h;
	memcpy(&h, buf, sizeof(h));
	memcpy(h.magic, POOL_MAGIC, 8);
	if (h.header_bytes != sizeof(h) || h.format_version != POOL_FORMAT_VERSION ||
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
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return -1;
	int rc = fsync(d);
	int e = errno;
	close(d);
	errno = e;
	return rc;
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
 * 0, 1 when path exists (tmp is then removed), -1 with errno. */
static int publish_name(const char *tmp, const char *path)
{
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno == EEXIST) {
		unlink(tmp);
		return 1;
	}
	if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
		return -1;
	/* No RENAME_NOREPLACE here (NFS, older FUSE servers): a hard link
	 * fails on an existing name just the same. */
	if (link(tmp, path) == 0) {
		unlink(tmp);
		return 0;
	}
	if (errno == EEXIST) {
		unlink(tmp);
		return 1;
	}
	/* Neither: a plain rename, refused when path is there.  Two creators
	 * at once both hold the temporary file's lock in turn, so only a
	 * foreign file appearing in between could be replaced. */
	struct stat st;
	if (lstat(path, &st) == 0) {
		unlink(tmp);
		return 1;
	}
	return rename(tmp, path);
}

/* Create the pool under its temporary name (creating_name), formatted and
 * locked, then rename it to path.  Same results as create_pool. */
static int create_named(const char *path, const struct pool_open_options *o, size_t page_size)
{
	char tmp[PATH_MAX];
	if (creating_name(path, tmp, sizeof(tmp)) != 0)
		return -1;
	int fd = open(tmp, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err_set_errno(errno, "cannot create pool %s (as %s first)", path, tmp);
		return -1;
	}
	/* Another process creating the same pool holds the lock until it
	 * closes the pool, long after the rename: wait only while the file is
	 * still under the temporary name, then find the pool at path. */
	struct stat fst, nst;
	for (;;) {
		if (fstat(fd, &fst) != 0 || lstat(tmp, &nst) != 0 || fst.st_ino != nst.st_ino ||
		    fst.st_dev != nst.st_dev) {
			close(fd);
			return -2;
		}
		if (pool_lock_fd(fd, false) == 0)
			break;
		if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
			err_set_errno(errno, "cannot lock %s while creating the pool %s", tmp, path);
			close(fd);
			return -1;
		}
		usleep(10000);
	}
	/* Renamed by the creator that held the lock just before us? */
	if (lstat(tmp, &nst) != 0 || fst.st_ino != nst.st_ino || fst.st_dev != nst.st_dev) {
		close(fd);
		return -2;
	}
	if (!S_ISREG(fst.st_mode) || fst.st_nlink != 1 || fst.st_uid != geteuid()) {
		err_set("cannot create pool %s: %s is in the way and is not an unfinished pool "
			"creation of this user; remove it", path, tmp);
		close(fd);
		return -1;
	}
	if (fst.st_size != 0)
		log_msg(LOG_INFO, "pool %s: finishing a creation that was interrupted (%s)", path,
			tmp);
	/* Whatever an interrupted creation left: it never had a name anyone
	 * uses, so it holds nothing. */
	if (ftruncate(fd, 0) != 0 || format_pool(fd, path, o, page_size) != 0) {
		if (err_get()[0] == '\0')
			err_set_errno(errno, "cannot create pool %s", path);
		close(fd);
		unlink(tmp);
		return -1;
	}
	int pr = publish_name(tmp, path);
	if (pr != 0) {
		if (pr < 0) {
			err_set_errno(errno, "cannot create pool %s: renaming %s to it failed", path,
				      tmp);
			unlink(tmp);
		}
		close(fd);
		return pr < 0 ? -1 : -2;
	}
	pool_sync_dir(path);	/* best effort: the pool is in place either way */
	return fd;
}

/* Create a new pool at path, fully formatted and locked before its name
 * appears, so that a crash during creation never leaves a file without a
 * header at path: formatted as an unnamed O_TMPFILE and linked in, or where
 * that is unsupported (FUSE, some network file systems), under a temporary
 * name renamed into place.  Returns the fd, -1 with err_get() set, or -2
 * when path appeared meanwhile (the caller then opens the existing file). */
static int create_pool(const char *path, const struct pool_open_options *o, size_t page_size)
{
	char dir[PATH_MAX];
	dir_of(path, dir, sizeof(dir));
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0) {
		if (pool_lock_fd(fd, false) != 0) {
			err_set_errno(errno, "cannot lock the new pool %s", path);
			close(fd);
			return -1;
		}
		if (format_pool(fd, path, o, page_size) != 0) {
			close(fd);
			return -1;
		}
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		if (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0) {
			pool_sync_dir(path);	/* best effort: the pool is in place either way */
			return fd;
		}
		int e = errno;
		close(fd);
		if (e == EEXIST)
			return -2;
		/* No /proc, or a file system that cannot link a tmpfile: fall
		 * through to the temporary name. */
	}
	return create_named(path, o, page_size);
}

/* ---- validation ---- */

/* What validate_header found in the version records. */
struct records {
	struct ver_record r[2];
	int cur;		/* -1: neither usable (inspect mode only) */
};

static int validate_header(const unsigned char *buf, const struct stat *st, const char *path,
			   const struct pool_open_options *o, size_t page_size,
			   struct pool_header *h, struct records *rec)
{
	memcpy(h, buf, sizeof(*h));
	if (memcmp(h->magic, POOL_MAGIC, 8) != 0) {
		if (unfinished_format(buf))
			err_set("%s is a pool whose creation was interrupted (it never held data); "
				"it was left untouched: the program's next start creates it again "
				"(or remove it)", path);
		else
			err_set("%s is not a pmthreads pool (no pool header); it was left "
				"untouched: %s", path, REFUSE_FIX);
		return -1;
	}
	if (h->format_version == 1) {
		err_set("%s is a pmthreads pool of format version 1, which this pmthreads (format "
			"version %u) does not read; it was left "
			"untouched: finish with the pmthreads that made it (its pmthreads-recover "
			"dump saves the heap image), then remove the file and let the program "
			"create a new pool", path, POOL_FORMAT_VERSION);
		return -1;
	}
	bool older = h->format_version >= 2 && h->format_version < POOL_FORMAT_VERSION;
	if (older && !o->legacy) {
		/* The same refusal for all: versions 3 and 4 have the same
		 * layout, but their checksums (of the metadata pages only, or
		 * another function of every page) would fail verification as if
		 * the pages were corrupt. */
		err_set("%s is a pmthreads pool of format version %u, which this pmthreads (format "
			"version %u: a checksum of every page copy, kept current from the lines "
			"each epoch rewrites and verified whenever a page is restored) does not "
			"read; it was left untouched: convert it, keeping its data, with "
			"'pmthreads-recover upgrade %s' (while no program uses it)",
			path, h->format_version, POOL_FORMAT_VERSION, path);
		return -1;
	}
	if (h->format_version != POOL_FORMAT_VERSION && !older) {
		err_set("%s is a pmthreads pool of format version %u, but this pmthreads reads "
			"version %u; it was left untouched: use a matching pmthreads, or %s",
			path, h->format_version, POOL_FORMAT_VERSION, REFUSE_FIX);
		return -1;
	}
	if (h->header_bytes != sizeof(*h) || pool_header_checksum(h) != h->checksum) {
		err_set("the header of pool %s fails its checksum (the file is corrupt); it was "
			"left untouched: %s", path, REFUSE_FIX);
		return -1;
	}
	if (h->page_size != page_size) {
		err_set("pool %s was made with page size %llu but this system's is %zu; it was "
			"left untouched: use it on a matching system, or %s", path,
			(unsigned long long)h->page_size, page_size, REFUSE_FIX);
		return -1;
	}
	struct pool_layout l = pool_layout_of_version(h->format_version, h->npages, page_size);
	if (h->npages == 0 || h->npages > POOL_MAX_PAGES || h->seq_off != l.seq_off ||
	    h->data_off != l.data_off || h->file_size != l.file_size) {
		err_set("pool %s has an inconsistent layout in its header (corrupt); it was left "
			"untouched: %s", path, REFUSE_FIX);
		return -1;
	}
	if ((uint64_t)st->st_size < h->file_size) {
		err_set("pool %s is truncated: %llu bytes, its header says %llu; it was left "
			"untouched: restore it from a copy, or %s", path,
			(unsigned long long)st->st_size, (unsigned long long)h->file_size, REFUSE_FIX);
		return -1;
	}
	if ((uint64_t)st->st_size > h->file_size) {
		err_set("pool %s is %llu bytes, larger than its header says (%llu): it was changed "
			"by something else and left untouched: %s", path,
			(unsigned long long)st->st_size, (unsigned long long)h->file_size, REFUSE_FIX);
		return -1;
	}
	memcpy(&rec->r[0], buf + POOL_REC_OFF(0), sizeof(rec->r[0]));
	memcpy(&rec->r[1], buf + POOL_REC_OFF(1), sizeof(rec->r[1]));
	rec->cur = pool_current_record(rec->r, h->uuid);
	if (rec->cur < 0 && !o->inspect) {
		err_set("pool %s has no valid version record (VER_d): the records at offsets %d "
			"and %d fail their checksums or contradict each other (the file is "
			"corrupt); it was left untouched: %s", path, POOL_REC_OFF(0),
			POOL_REC_OFF(1), REFUSE_FIX);
		return -1;
	}
	if (h->creator[POOL_CREATOR_MAX - 1] != '\0') {
		err_set("pool %s has a corrupt creator name; it was left untouched: %s", path,
			REFUSE_FIX);
		return -1;
	}
	if (o->creator != NULL && strncmp(h->creator, o->creator, POOL_CREATOR_MAX - 1) != 0) {
		err_set("pool %s was created by the program '%s', not by '%s'; it was left "
			"untouched: give this program its own pool with another PMTHREADS_POOL "
			"path, or delete the file if the data of '%s' is no longer needed",
			path, h->creator, o->creator, h->creator);
		return -1;
	}
	return 0;
}

/* ---- open ---- */

static const char *file_kind(mode_t m)
{
	return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
	     : S_ISSOCK(m) ? "a socket" : S_ISDIR(m) ? "a directory" : "not a regular file";
}

/* Anything but a regular file on a real file system is refused before it is
 * opened for reading: a FIFO would block, a device or /proc/self/mem would
 * be read or written as if it were a pool. */
static int refuse_special(int fd, const char *path, struct stat *st)
{
	if (fstat(fd, st) != 0) {
		err_set_errno(errno, "cannot stat pool %s", path);
		return -1;
	}
	if (S_ISLNK(st->st_mode)) {
		err_set("pool %s is a symbolic link; pmthreads does not follow links for its pool "
			"(O_NOFOLLOW): set PMTHREADS_POOL to the real file's path", path);
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		err_set("pool %s is %s, not a regular file; it was left untouched: set "
			"PMTHREADS_POOL to a file path", path, file_kind(st->st_mode));
		return -1;
	}
	struct statfs fs;
	if (fstatfs(fd, &fs) == 0) {
		switch ((unsigned long)fs.f_type) {
		case PROC_SUPER_MAGIC:
		case SYSFS_MAGIC:
		case DEBUGFS_MAGIC:
		case TRACEFS_MAGIC:
		case SECURITYFS_MAGIC:
		case CGROUP_SUPER_MAGIC:
		case CGROUP2_SUPER_MAGIC:
		case BPF_FS_MAGIC:
			err_set("pool %s is a kernel pseudo-file (/proc, /sys and the like), not a "
				"file that can hold a pool; it was left untouched: set "
				"PMTHREADS_POOL to a file path", path);
			return -1;
		default:
			break;
		}
	}
	return 0;
}

static int open_existing(const char *path, bool read_only, int *fd_out)
{
	/* Look first without opening (O_PATH: no side effect of opening a
	 * device, no wait on a FIFO), then open the same file for real. */
	struct stat st, st2;
	int pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd >= 0) {
		int rc = refuse_special(pfd, path, &st);
		close(pfd);
		if (rc != 0)
			return -1;
	}
	int fd = pfd < 0 ? -1 : open(path, (read_only ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC |
					    O_NONBLOCK | O_NOCTTY);
	if (fd >= 0) {
		if (refuse_special(fd, path, &st2) != 0) {
			close(fd);
			return -1;
		}
		if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
			close(fd);
			err_set("pool %s was replaced while being opened; is another program "
				"replacing it?", path);
			return -1;
		}
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
		*fd_out = fd;
		return 0;
	}
	int e = errno;
	if (e == ENOENT)
		return 1;
	if (e == ELOOP)
		err_set("pool %s is a symbolic link; pmthreads does not follow links for its pool "
			"(O_NOFOLLOW): set PMTHREADS_POOL to the real file's path", path);
	else
		err_set_errno(e, "cannot open pool %s", path);
	return -1;
}

/* Pages whose seq entries may be non-zero: up to the end of the last
 * allocated extent of the seq table (holes read as zeros).  npages when the
 * file system cannot say. */
static uint64_t seq_extent(int fd, const struct pool_header *h, uint64_t sum_off)
{
	off_t off = (off_t)h->seq_off, end = (off_t)sum_off, last = off;
	while (off < end) {
		off_t d = lseek(fd, off, SEEK_DATA);
		if (d < 0 && errno == ENXIO)
			break;
		if (d < 0)
			return h->npages;
		if (d >= end)
			break;
		off_t hole = lseek(fd, d, SEEK_HOLE);
		if (hole < 0)
			return h->npages;
		last = hole < end ? hole : end;
		off = hole;
	}
	uint64_t bytes = (uint64_t)(last - (off_t)h->seq_off);
	uint64_t pages = (bytes + 2 * sizeof(uint64_t) - 1) / (2 * sizeof(uint64_t));
	return pages < h->npages ? pages : h->npages;
}

/* Every seq entry is one that some sequence of epochs and crashes can leave:
 * 0, <= VER_d, VER_d + 1 (an interrupted epoch) or POOL_SEQ_INVALID; at most
 * one copy of a page not valid; two copies never share a seq (pool_check
 * says why).  Returns the number of bad pages; the first is described in
 * err_get(). */
static uint64_t validate_seq(const struct pool *p)
{
	const uint64_t v = p->ver_d_now;
	uint64_t bad = 0;
	for (uint64_t i = 0; i < p->seq_pages; i++) {
		uint64_t s0 = p->seq[i][0], s1 = p->seq[i][1];
		bool inv0 = s0 == POOL_SEQ_INVALID, inv1 = s1 == POOL_SEQ_INVALID;
		bool far0 = !inv0 && s0 > v + 1, far1 = !inv1 && s1 > v + 1;
		bool out0 = inv0 || s0 > v, out1 = inv1 || s1 > v;
		if (!far0 && !far1 && !(out0 && out1) && (s0 != s1 || s0 == 0))
			continue;
		if (bad++ != 0)
			continue;
		int c = far0 || (!far1 && inv0) ? 0 : 1;
		if (far0 || far1)
			err_set("pool %s: seq entry of page %llu copy %d (offset %llu) is %llu, beyond "
				"the next epoch %llu (VER_d %llu): the seq table is corrupt",
				p->path, (unsigned long long)i, c,
				(unsigned long long)pool_seq_offset(p, i, c),
				(unsigned long long)p->seq[i][c], (unsigned long long)(v + 1),
				(unsigned long long)v);
		else if (out0 && out1)
			err_set("pool %s: neither copy of page %llu is valid (seq entries at offset "
				"%llu: %llu and %llu, VER_d %llu): the seq table is corrupt",
				p->path, (unsigned long long)i,
				(unsigned long long)pool_seq_offset(p, i, 0), (unsigned long long)s0,
				(unsigned long long)s1, (unsigned long long)v);
		else
			err_set("pool %s: both copies of page %llu have seq %llu (offset %llu): the "
				"seq table is corrupt", p->path, (unsigned long long)i,
				(unsigned long long)s0, (unsigned long long)pool_seq_offset(p, i, 0));
	}
	return bad;
}

static int map_and_fill(struct pool *p, const struct pool_header *h, const struct records *rec,
			const struct pool_open_options *o)
{
	int rc = o->read_only ? nvm_map_readonly(&p->nvm, p->fd, p->path, h->file_size)
			      : nvm_map(&p->nvm, p->fd, p->path, h->file_size, o->nvm, o->latency_ns,
					o->sim);
	if (rc != 0)
		return -1;
	unsigned char *base = p->nvm->base;
	p->page_size = h->page_size;
	p->npages = h->npages;
	p->shadow_base = h->shadow_base;
	memcpy(p->uuid, h->uuid, sizeof(p->uuid));
	memcpy(p->creator, h->creator, sizeof(p->creator));
	p->file_size = h->file_size;
	p->format_version = h->format_version;
	p->seq_off = h->seq_off;
	p->sum_off = pool_layout_of_version(h->format_version, h->npages, h->page_size).sum_off;
	p->data_off = h->data_off;
	if (rec->cur >= 0) {
		p->rec_slot = rec->cur;
		p->rec_gen = rec->r[rec->cur].gen;
		p->ver_d_now = rec->r[rec->cur].ver_d;
		p->clean_now = rec->r[rec->cur].clean;
	}
	p->ver_d = &p->ver_d_now;
	p->clean = &p->clean_now;
	p->holder_pid = (volatile uint64_t *)(base + POOL_HOLDER_OFF);
	p->seq = (uint64_t(*)[2])(base + h->seq_off);
	p->sum = h->format_version == 2 ? NULL : (uint64_t(*)[2])(base + p->sum_off);
	p->data = base + h->data_off;
	p->was_clean = p->clean_now == 1;
	p->read_only = o->read_only;
	p->seq_pages = p->created ? 0 : seq_extent(p->fd, h, p->sum_off);
	/* A new pool has no torn copies; an existing one is scanned by
	 * persist_invalidate_torn before its first epoch. */
	p->torn_invalidated = p->created;
	if (!o->inspect && validate_seq(p) != 0) {
		nvm_unmap(p->nvm);
		p->nvm = NULL;
		char why[600];
		snprintf(why, sizeof(why), "%s", err_get());
		err_set("%s; it was left untouched: %s", why, REFUSE_FIX);
		return -1;
	}
	if (pool_sum_key_init(&p->sum_key, p->uuid, p->page_size) != 0) {
		nvm_unmap(p->nvm);
		p->nvm = NULL;
		err_set_errno(ENOMEM, "cannot open pool %s", p->path);
		return -1;
	}
	return 0;
}

enum pool_error pool_open(struct pool **out, const struct pool_open_options *o)
{
	err_clear();
	if (o == NULL || o->path == NULL || o->path[0] == '\0') {
		err_set("no pool path given (set PMTHREADS_POOL)");
		return POOL_ERR_REFUSED;
	}
	if (strlen(o->path) >= PATH_MAX) {
		err_set("pool path is too long (%zu bytes, at most %d)", strlen(o->path), PATH_MAX - 1);
		return POOL_ERR_REFUSED;
	}
	long ps = sysconf(_SC_PAGESIZE);
	size_t page_size = ps > 0 ? (size_t)ps : 4096;
	struct pool *p = calloc(1, sizeof(*p));
	if (p == NULL) {
		err_set_errno(ENOMEM, "cannot open pool %s", o->path);
		return POOL_ERR_REFUSED;
	}
	snprintf(p->path, sizeof(p->path), "%s", o->path);
	p->fd = -1;
	enum pool_error rc = POOL_ERR_REFUSED;

	for (int attempt = 0; p->fd < 0; attempt++) {
		/* legacy: read-write for the exclusive lock only */
		int found = open_existing(o->path, o->read_only && !o->legacy, &p->fd);
		if (found < 0)
			goto fail;
		if (found == 0)
			break;
		if (!o->create || o->read_only) {
			err_set("pool %s does not exist; check PMTHREADS_POOL", o->path);
			goto fail;
		}
		int fd = create_pool(o->path, o, page_size);
		if (fd == -1)
			goto fail;
		if (fd >= 0) {
			p->fd = fd;
			p->created = true;
		} else if (attempt > 8) {
			err_set("pool %s keeps appearing and disappearing while being opened; is "
				"another program replacing it?", o->path);
			goto fail;
		}
	}

	own_fd_keep(&p->fd, "pool file");
	struct stat st;
	if (fstat(p->fd, &st) != 0) {
		err_set_errno(errno, "cannot stat pool %s", o->path);
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		err_set("pool %s is not a regular file; it was left untouched: set PMTHREADS_POOL "
			"to a file path", o->path);
		goto fail;
	}
	if (!p->created && pool_lock_fd(p->fd, o->read_only && !o->legacy) != 0) {
		if (errno == EAGAIN || errno == EACCES) {
			pid_t holder = pool_report_locked(p->fd, o->path, &st);
			if (o->lock_holder != NULL)
				*o->lock_holder = holder;
			rc = POOL_ERR_LOCKED;
		} else {
			err_set_errno(errno, "cannot lock pool %s", o->path);
		}
		goto fail;
	}
	/* Size again under the lock: a concurrent formatter is done now. */
	if (fstat(p->fd, &st) != 0) {
		err_set_errno(errno, "cannot stat pool %s", o->path);
		goto fail;
	}
	if (st.st_size >= POOL_HEADER_READ && !o->read_only) {
		_Alignas(64) unsigned char head[POOL_HEADER_READ];
		if (pread(p->fd, head, sizeof(head), 0) == (ssize_t)sizeof(head) &&
		    unfinished_format(head)) {
			log_msg(LOG_INFO, "pool %s: its creation was interrupted (no magic yet); "
				"creating it again", o->path);
			if (ftruncate(p->fd, 0) != 0) {
				err_set_errno(errno, "cannot empty %s, a pool whose creation was "
					      "interrupted, to create it again", o->path);
				goto fail;
			}
			st.st_size = 0;
		}
	}
	if (st.st_size == 0) {
		if (o->read_only) {
			err_set("%s is an empty file, not a pmthreads pool", o->path);
			goto fail;
		}
		/* An empty file (e.g. made by mktemp) holds no data to lose. */
		if (format_pool(p->fd, o->path, o, page_size) != 0) {
			if (ftruncate(p->fd, 0) != 0)
				log_msg(LOG_WARN, "could not empty %s again after a failed format",
					o->path);
			goto fail;
		}
		p->created = true;
		if (fstat(p->fd, &st) != 0) {
			err_set_errno(errno, "cannot stat pool %s", o->path);
			goto fail;
		}
	}

	_Alignas(64) unsigned char buf[POOL_HEADER_READ];
	memset(buf, 0, sizeof(buf));
	ssize_t got = pread(p->fd, buf, sizeof(buf), 0);
	if (got < 0) {
		err_set_errno(errno, "cannot read pool %s", o->path);
		goto fail;
	}
	if ((size_t)got < sizeof(buf)) {
		if (got >= 8 && memcmp(buf, POOL_MAGIC, 8) == 0)
			err_set("pool %s is truncated: %lld bytes, too short for its header; it was "
				"left untouched: %s", o->path, (long long)got, REFUSE_FIX);
		else
			err_set("%s is not a pmthreads pool (%lld bytes, no pool header); it was "
				"left untouched: %s", o->path, (long long)got, REFUSE_FIX);
		goto fail;
	}
	struct pool_header h;
	struct records rec;
	if (validate_header(buf, &st, o->path, o, page_size, &h, &rec) != 0)
		goto fail;
	if (map_and_fill(p, &h, &rec, o) != 0)
		goto fail;
	*out = p;
	return POOL_OK;
fail:
	own_fd_close(&p->fd);
	free(p);
	return rc;
}

int pool_remove(const char *path)
{
	err_clear();
	int fd = -1;
	int rc = open_existing(path, false, &fd);
	if (rc > 0)
		err_set("%s does not exist", path);
	if (rc != 0)
		return -1;
	char magic[8];
	struct stat st;
	if (pread(fd, magic, sizeof(magic), 0) != (ssize_t)sizeof(magic) ||
	    memcmp(magic, POOL_MAGIC, sizeof(magic)) != 0) {
		err_set("%s is not a pmthreads pool (no pool header); it was not removed", path);
		close(fd);
		return -1;
	}
	if (fstat(fd, &st) != 0 || pool_lock_fd(fd, false) != 0) {
		if (errno == EAGAIN || errno == EACCES)
			pool_report_locked(fd, path, &st);
		else
			err_set_errno(errno, "cannot lock pool %s", path);
		char why[600];
		snprintf(why, sizeof(why), "%s", err_get());
		err_set("%s; it was not removed", why);
		close(fd);
		return -1;
	}
	struct stat now;
	if (lstat(path, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
		err_set("pool %s was replaced while being removed; nothing was removed", path);
		close(fd);
		return -1;
	}
	if (unlink(path) != 0) {
		err_set_errno(errno, "cannot remove pool %s", path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

void pool_close(struct pool *p)
{
	if (p == NULL)
		return;
	nvm_unmap(p->nvm);
	own_fd_close(&p->fd);
	pool_sum_key_fini(&p->sum_key);
	free(p);
}

/* Write the next record into the slot that does not hold the current one.
 * Returns 0, or the latched write-back error (nvm.h): then nothing was
 * stored (when it was latched before) or the record's fence failed, and the
 * pool's idea of its current record is unchanged. */
static int write_record(struct pool *p, uint64_t ver_d, uint64_t clean)
{
	if (nvm_error(p->nvm) != 0)
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
	if (!clean)
		*p->holder_pid = (uint64_t)getpid();
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
	if (len == 0)
		return 0;
	int r;
	do
		r = fallocate(p->fd, 0, (off_t)off, (off_t)len);
	while (r != 0 && errno == EINTR);
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
	return allocate_range(p, p->data_off + 2 * from * ps, 2 * (to - from) * ps);
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
	if (p->seq_pages < end)
		p->seq_pages = end;
	return 0;
}

int pool_valid_copy(const struct pool *p, uint64_t page)
{
	if (page >= p->seq_pages)
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
	unsigned long long copy_off = (unsigned long long)(p->data_off + (2 * page + (uint64_t)c) *
							   p->page_size);
	unsigned long long epoch = (unsigned long long)p->seq[page][c];
	if (want == 0) {
		snprintf(what, what_len, "copy %d, written by epoch %llu, at file offset %llu, has no "
			 "checksum (its entry at offset %llu is 0)", c, epoch, copy_off,
			 (unsigned long long)pool_sum_offset(p, page, c));
		return -1;
	}
	uint64_t got = p->format_version == POOL_FORMAT_VERSION
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
