/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lossyfs -- a FUSE file system for tests that loses what was never synced.
 *
 *   lossyfs BACKING_DIR MOUNTPOINT [--no-holes] [--keep-cache] [--no-rename-flags]
 *           [--inode-numbers] [--refuse-direct-writes]
 *
 * Passes everything through to BACKING_DIR, except file data: a write is
 * kept in this process's memory until an fsync of its file (msync of a
 * shared mapping arrives here as fsync: the kernel writes the dirty pages
 * back as FUSE writes, then sends FUSE_FSYNC), which writes it to the backing
 * file and fdatasyncs it.  Whatever is still only in memory when the file
 * system is unmounted is lost: a power failure.  Metadata (create, rename,
 * link, unlink, truncate) reaches the backing directory at once.
 *
 * Why unmount is the power cut: a shared writable mapping of a FUSE file
 * goes through the kernel's page cache (direct_io must stay off for mmap),
 * so dropping data here while the kernel still caches the page would not
 * lose anything a reader sees.  Unmounting flushes the page cache into this
 * process and ends it; only the synced data survives into the next mount.
 *
 * Commands, written to /.lossyfs-ctl in the mount (one per write):
 *   fail-fsync [ERRNO]  the next fsync fails with ERRNO (default EIO) and
 *                       its unsynced data is dropped, as a device that lost
 *                       the write (the kernel then reports the error to the
 *                       msync that caused it)
 *   fail-fsync-all [ERRNO]  every fsync from now on fails so
 *   fail-fsync-nth K [ERRNO]  the K-th fsync from now (1: the next) fails so,
 *                       once: fault injection at each I/O step
 *   fail-write-nth K [ERRNO]  the K-th write from now (1: the next) fails
 *                       with ERRNO (default EIO), once, its data not kept:
 *                       a pwrite that fails, or the write-back of a mapped
 *                       page that fails (the kernel reports it to the next
 *                       msync or fsync)
 *   fail-read OFF LEN [ERRNO]  every read of bytes in [OFF, OFF+LEN) of a
 *                       file fails from now on with ERRNO (default EIO), as
 *                       sectors of a device that went bad; LEN 0: none
 *                       fails any more.  A mapped page there then raises
 *                       SIGBUS at the load that needs it
 *   tear SEED           at the power cut, keep a pseudo-random half of the
 *                       unsynced 512-byte sectors instead of none (torn
 *                       writes), chosen from SEED
 * Reading /.lossyfs-ctl gives counters: fsyncs, failed fsyncs, writes (the
 * failed ones included), failed writes, the unsynced bytes now held and the
 * failed reads: a test counts the I/O steps of a clean run from them, then
 * fails each.
 *
 * --no-holes: extending a file by truncate writes zeros to it, as a file
 * system without sparse files does.
 *
 * --no-rename-flags: a rename with flags (RENAME_NOREPLACE, RENAME_EXCHANGE)
 * fails with EINVAL, as on sshfs, LazyFS and other userspace file systems
 * that do not implement them.
 *
 * --inode-numbers: stat reports the backing files' inode numbers (libfuse's
 * use_ino), so that two links to one file have the same one, as LazyFS
 * reports them; by default libfuse numbers each name it looks up, as sshfs
 * does.
 *
 * --refuse-direct-writes: a file opened with O_DIRECT opens, but every write
 * through that descriptor fails with EINVAL and keeps nothing, as on a file
 * system whose direct I/O takes other alignments or none (refused-direct in
 * the counters).
 *
 * --keep-cache: the kernel keeps a file's cached pages as a local file system
 * does (FUSE otherwise drops them at each open, and at the next read once the
 * file's times or size changed: auto_inval_data), so after a failed fsync the
 * page cache goes on showing bytes this process dropped, as ext4's does, until
 * the test evicts them (posix_fadvise POSIX_FADV_DONTNEED on a file no one
 * maps, madvise MADV_PAGEOUT in the process that maps it): the next open of
 * the same boot then sees the kept pages, or the device's, or a mixture.
 *
 * Single-threaded (libfuse's -s): no locking here.
 */
#define FUSE_USE_VERSION 31

#include <fuse.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define CTL_NAME "/.lossyfs-ctl"
#define SECTOR 512

/* One write not yet synced: its bytes, in the order written. */
struct extent {
	off_t off;
	size_t len;
	unsigned char *data;
};

/* The unsynced writes of one file, by its backing inode (so that rename
 * and link keep them). */
struct file_state {
	dev_t dev;
	ino_t ino;
	struct extent *ext;
	size_t n, cap;
	off_t size;		/* logical size: backing size or beyond */
	int fd;			/* the backing file, for the power cut's torn writes */
	struct file_state *next;
};

static int backing = -1;	/* the backing directory */
static struct file_state *files;
static bool no_holes;
static bool keep_cache;
static bool no_rename_flags;
static bool inode_numbers;
static int fail_once, fail_all;	/* errno, 0: none */
static uint64_t fail_nth;	/* fsyncs until fail_once applies, 0: at the next */
static int fail_write;		/* errno of the write fail_write_nth selects, 0: none */
static uint64_t fail_write_nth;	/* writes until it, 0: the next */
static bool tear;
static uint64_t tear_rng;
static uint64_t n_fsyncs, n_failed, n_writes, n_failed_writes, n_failed_reads;
/* --refuse-direct-writes: the backing descriptors of opens with O_DIRECT. */
static bool refuse_direct;
static bool direct_fd[4096];
static uint64_t n_refused_direct;
static off_t bad_off, bad_len;	/* fail-read's range, bad_len 0: none */
static int bad_errno;

static const char *rel(const char *path)
{
	while (*path == '/')
		path++;
	return *path == '\0' ? "." : path;
}

static struct file_state *state_of_stat(const struct stat *st, bool create)
{
	for (struct file_state *f = files; f != NULL; f = f->next)
		if (f->dev == st->st_dev && f->ino == st->st_ino)
			return f;
	if (!create)
		return NULL;
	struct file_state *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return NULL;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->size = st->st_size;
	f->fd = -1;
	f->next = files;
	files = f;
	return f;
}

static struct file_state *state_of_fd(int fd, bool create)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return NULL;
	struct file_state *f = state_of_stat(&st, create);
	if (f != NULL && f->fd < 0)
		f->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return f;
}

static void drop_extents(struct file_state *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->ext[i].data);
	f->n = 0;
}

static void forget(struct file_state *f)
{
	struct file_state **pp = &files;
	while (*pp != f)
		pp = &(*pp)->next;
	*pp = f->next;
	drop_extents(f);
	if (f->fd >= 0)
		close(f->fd);
	free(f->ext);
	free(f);
}

static int pwrite_all(int fd, const unsigned char *b, size_t len, off_t off)
{
	while (len > 0) {
		ssize_t w = pwrite(fd, b, len, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		len -= (size_t)w;
		off += w;
	}
	return 0;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* ---- operations ---- */

static void *lossy_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	/* Sizes and names change behind the kernel's back only through us,
	 * but the tests look from several processes: no stale attributes. */
	cfg->attr_timeout = 0;
	cfg->entry_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->direct_io = 0;	/* mmap needs the page cache */
	cfg->use_ino = inode_numbers;
	if (keep_cache) {
		cfg->kernel_cache = 1;	/* no invalidation at open */
		cfg->auto_cache = 0;
		conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;	/* nor at a change of times */
	}
	return NULL;
}

static int lossy_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	if (strcmp(path, CTL_NAME) == 0) {
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		st->st_uid = getuid();
		st->st_gid = getgid();
		return 0;
	}
	int r = fi != NULL ? fstat((int)fi->fh, st) : fstatat(backing, rel(path), st, AT_SYMLINK_NOFOLLOW);
	if (r != 0)
		return -errno;
	if (S_ISREG(st->st_mode)) {
		struct file_state *f = state_of_stat(st, false);
		if (f != NULL && f->size > st->st_size)
			st->st_size = f->size;
	}
	return 0;
}

static int lossy_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
			 struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off, (void)fi, (void)flags;
	int fd = openat(backing, rel(path), O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return -errno;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		fill(buf, e->d_name, NULL, 0, 0);
	closedir(d);
	return 0;
}

static int lossy_open(const char *path, struct fuse_file_info *fi)
{
	if (strcmp(path, CTL_NAME) == 0) {
		fi->direct_io = 1;
		fi->fh = (uint64_t)-1;
		return 0;
	}
	/* Read-write whatever the caller asked: an fsync through a read-only
	 * descriptor still writes the held data. */
	/* Never O_DIRECT on the backing file: what is held is written back
	 * from this process's memory, unaligned. */
	int flags = fi->flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW | O_TRUNC | O_ACCMODE | O_DIRECT);
	int fd = openat(backing, rel(path), flags | O_RDWR);
	if (fd < 0)
		fd = openat(backing, rel(path), flags | (fi->flags & O_ACCMODE));
	if (fd < 0)
		return -errno;
	if (fi->flags & O_TRUNC) {
		struct file_state *f = state_of_fd(fd, false);
		if (f != NULL) {
			drop_extents(f);
			f->size = 0;
		}
		if (ftruncate(fd, 0) != 0) {
			int e = errno;
			close(fd);
			return -e;
		}
	}
	fi->fh = (uint64_t)fd;
	if (fi->fh < sizeof(direct_fd))
		direct_fd[fi->fh] = (fi->flags & O_DIRECT) != 0;
	return 0;
}

static int lossy_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int fd = openat(backing, rel(path), (fi->flags & ~O_ACCMODE) | O_RDWR | O_CREAT, mode);
	if (fd < 0)
		return -errno;
	struct file_state *f = state_of_fd(fd, false);
	if (f != NULL)	/* an inode number reused after an unlink */
		forget(f);
	fi->fh = (uint64_t)fd;
	return 0;
}

static int ctl_read(char *buf, size_t size, off_t off)
{
	uint64_t held = 0;
	for (struct file_state *f = files; f != NULL; f = f->next)
		for (size_t i = 0; i < f->n; i++)
			held += f->ext[i].len;
	char text[256];
	int n = snprintf(text, sizeof(text),
			 "fsyncs %llu\nfailed %llu\nwrites %llu\nfailed-writes %llu\nunsynced %llu\n"
			 "failed-reads %llu\nrefused-direct %llu\n",
			 (unsigned long long)n_fsyncs, (unsigned long long)n_failed,
			 (unsigned long long)n_writes, (unsigned long long)n_failed_writes,
			 (unsigned long long)held, (unsigned long long)n_failed_reads,
			 (unsigned long long)n_refused_direct);
	if (off >= n)
		return 0;
	size_t len = (size_t)(n - off) < size ? (size_t)(n - off) : size;
	memcpy(buf, text + off, len);
	return (int)len;
}

static int lossy_read(const char *path, char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	if (strcmp(path, CTL_NAME) == 0)
		return ctl_read(buf, size, off);
	if (bad_len != 0 && off < bad_off + bad_len && off + (off_t)size > bad_off) {
		n_failed_reads++;
		return -bad_errno;
	}
	int fd = (int)fi->fh;
	struct file_state *f = state_of_fd(fd, false);
	off_t size_now = f != NULL ? f->size : lseek(fd, 0, SEEK_END);
	if (off >= size_now)
		return 0;
	if ((off_t)size > size_now - off)
		size = (size_t)(size_now - off);
	size_t got = 0;
	while (got < size) {
		ssize_t r = pread(fd, buf + got, size - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	memset(buf + got, 0, size - got);	/* beyond the backing file's end */
	if (f != NULL) {
		for (size_t i = 0; i < f->n; i++) {	/* in write order */
			const struct extent *e = &f->ext[i];
			off_t a = e->off > off ? e->off : off;
			off_t b = e->off + (off_t)e->len;
			if (b > off + (off_t)size)
				b = off + (off_t)size;
			if (a < b)
				memcpy(buf + (a - off), e->data + (a - e->off), (size_t)(b - a));
		}
	}
	return (int)size;
}

static int ctl_write(const char *buf, size_t size)
{
	char cmd[128];
	size_t n = size < sizeof(cmd) - 1 ? size : sizeof(cmd) - 1;
	memcpy(cmd, buf, n);
	cmd[n] = '\0';
	char word[32] = "";
	unsigned long long arg = 0;
	int got = sscanf(cmd, "%31s %llu", word, &arg);
	if (got < 1)
		return -EINVAL;
	unsigned long long arg2 = 0;
	int got2 = sscanf(cmd, "%*s %*u %llu", &arg2);
	if (strcmp(word, "fail-fsync") == 0)
		fail_once = got == 2 ? (int)arg : EIO;
	else if (strcmp(word, "fail-fsync-nth") == 0 && got == 2 && arg >= 1) {
		fail_nth = arg - 1;
		fail_once = got2 == 1 ? (int)arg2 : EIO;
	}
	else if (strcmp(word, "fail-write-nth") == 0 && got == 2 && arg >= 1) {
		fail_write_nth = arg - 1;
		fail_write = got2 == 1 ? (int)arg2 : EIO;
	}
	else if (strcmp(word, "fail-read") == 0 && got == 2) {
		unsigned long long len = 0, e = 0;
		int n = sscanf(cmd, "%*s %*u %llu %llu", &len, &e);
		if (n < 1)
			return -EINVAL;
		bad_off = (off_t)arg;
		bad_len = (off_t)len;
		bad_errno = n == 2 ? (int)e : EIO;
	}
	else if (strcmp(word, "fail-fsync-all") == 0)
		fail_all = got == 2 ? (int)arg : EIO;
	else if (strcmp(word, "tear") == 0 && got == 2) {
		tear = true;
		tear_rng = arg;
	} else {
		fprintf(stderr, "lossyfs: unknown command \"%s\" (fail-fsync [ERRNO], "
			"fail-fsync-all [ERRNO], fail-fsync-nth K [ERRNO], fail-write-nth K [ERRNO], "
			"fail-read OFF LEN [ERRNO], tear SEED)\n", word);
		return -EINVAL;
	}
	return (int)size;
}

static int lossy_write(const char *path, const char *buf, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	if (strcmp(path, CTL_NAME) == 0)
		return ctl_write(buf, size);
	n_writes++;
	if (refuse_direct && fi->fh < sizeof(direct_fd) && direct_fd[fi->fh]) {
		n_refused_direct++;
		return -EINVAL;
	}
	if (fail_write != 0) {
		if (fail_write_nth == 0) {
			int e = fail_write;
			fail_write = 0;
			n_failed_writes++;
			return -e;	/* nothing of it is kept */
		}
		fail_write_nth--;
	}
	struct file_state *f = state_of_fd((int)fi->fh, true);
	if (f == NULL)
		return -ENOMEM;
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 64;
		struct extent *e = realloc(f->ext, cap * sizeof(*e));
		if (e == NULL)
			return -ENOMEM;
		f->ext = e;
		f->cap = cap;
	}
	unsigned char *data = malloc(size ? size : 1);
	if (data == NULL)
		return -ENOMEM;
	memcpy(data, buf, size);
	f->ext[f->n++] = (struct extent){ off, size, data };
	if (off + (off_t)size > f->size)
		f->size = off + (off_t)size;
	return (int)size;
}

/* Write every held extent of f to its backing file (in order); all of them
 * when keep is NULL, else only the sectors keep() picks. */
static int apply(struct file_state *f, int fd, bool (*keep)(void))
{
	int rc = 0;
	for (size_t i = 0; i < f->n && rc == 0; i++) {
		const struct extent *e = &f->ext[i];
		if (keep == NULL) {
			rc = pwrite_all(fd, e->data, e->len, e->off);
			continue;
		}
		for (size_t s = 0; s < e->len && rc == 0; s += SECTOR) {
			size_t len = e->len - s < SECTOR ? e->len - s : SECTOR;
			if (keep())
				rc = pwrite_all(fd, e->data + s, len, e->off + (off_t)s);
		}
	}
	drop_extents(f);
	return rc;
}

static int lossy_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	if (strcmp(path, CTL_NAME) == 0)
		return 0;
	int fd = (int)fi->fh;
	n_fsyncs++;
	struct file_state *f = state_of_fd(fd, false);
	int err = fail_all;
	if (err == 0 && fail_once != 0) {
		if (fail_nth == 0)
			err = fail_once;
		else
			fail_nth--;
	}
	if (err != 0) {
		fail_once = 0;
		n_failed++;
		if (f != NULL)
			drop_extents(f);	/* the device lost them */
		return -err;
	}
	if (f != NULL && apply(f, fd, NULL) != 0)
		return -errno;
	if (f != NULL && f->size > lseek(fd, 0, SEEK_END) && ftruncate(fd, f->size) != 0)
		return -errno;
	return fdatasync(fd) == 0 ? 0 : -errno;
}

static int lossy_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path, (void)datasync, (void)fi;
	return 0;	/* metadata is durable at once here */
}

static int lossy_release(const char *path, struct fuse_file_info *fi)
{
	if (strcmp(path, CTL_NAME) != 0) {
		if (fi->fh < sizeof(direct_fd))
			direct_fd[fi->fh] = false;
		close((int)fi->fh);
	}
	return 0;
}

static int zero_fill(int fd, off_t from, off_t to)
{
	static const unsigned char zeros[1 << 16];
	while (from < to) {
		size_t n = (size_t)(to - from) < sizeof(zeros) ? (size_t)(to - from) : sizeof(zeros);
		if (pwrite_all(fd, zeros, n, from) != 0)
			return -1;
		from += (off_t)n;
	}
	return 0;
}

static int lossy_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	if (strcmp(path, CTL_NAME) == 0)
		return 0;
	int fd = fi != NULL ? (int)fi->fh : openat(backing, rel(path), O_WRONLY);
	if (fd < 0)
		return -errno;
	int rc = 0;
	struct file_state *f = state_of_fd(fd, false);
	struct stat st;
	if (fstat(fd, &st) != 0)
		rc = -errno;
	else if (no_holes && size > st.st_size && zero_fill(fd, st.st_size, size) != 0)
		rc = -errno;
	else if (ftruncate(fd, size) != 0)
		rc = -errno;
	if (rc == 0 && f != NULL) {
		f->size = size;
		for (size_t i = 0; i < f->n; i++) {	/* cut what lies beyond */
			struct extent *e = &f->ext[i];
			if (e->off >= size)
				e->len = 0;
			else if (e->off + (off_t)e->len > size)
				e->len = (size_t)(size - e->off);
		}
	}
	if (fi == NULL)
		close(fd);
	return rc;
}

static int lossy_unlink(const char *path)
{
	struct stat st;
	if (fstatat(backing, rel(path), &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_nlink == 1) {
		struct file_state *f = state_of_stat(&st, false);
		if (f != NULL)
			forget(f);
	}
	return unlinkat(backing, rel(path), 0) == 0 ? 0 : -errno;
}

static int lossy_rename(const char *from, const char *to, unsigned int flags)
{
	if (flags != 0 && no_rename_flags)
		return -EINVAL;
	return renameat2(backing, rel(from), backing, rel(to), flags) == 0 ? 0 : -errno;
}

static int lossy_link(const char *from, const char *to)
{
	return linkat(backing, rel(from), backing, rel(to), 0) == 0 ? 0 : -errno;
}

static int lossy_mkdir(const char *path, mode_t mode)
{
	return mkdirat(backing, rel(path), mode) == 0 ? 0 : -errno;
}

static int lossy_rmdir(const char *path)
{
	return unlinkat(backing, rel(path), AT_REMOVEDIR) == 0 ? 0 : -errno;
}

static int lossy_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int r = fi != NULL ? fchmod((int)fi->fh, mode) : fchmodat(backing, rel(path), mode, 0);
	return r == 0 ? 0 : -errno;
}

static int lossy_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	int r = fi != NULL ? futimens((int)fi->fh, tv)
			   : utimensat(backing, rel(path), tv, AT_SYMLINK_NOFOLLOW);
	return r == 0 ? 0 : -errno;
}

static int lossy_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	return fstatvfs(backing, st) == 0 ? 0 : -errno;
}

static bool keep_half(void) { return splitmix64(&tear_rng) & 1; }

/* The power cut: everything unsynced is lost, or torn. */
static void lossy_destroy(void *data)
{
	(void)data;
	uint64_t held = 0;
	for (struct file_state *f = files; f != NULL; f = f->next)
		for (size_t i = 0; i < f->n; i++)
			held += f->ext[i].len;
	fprintf(stderr, "lossyfs: power cut: %llu unsynced bytes %s\n", (unsigned long long)held,
		tear ? "torn (about half of their sectors kept)" : "lost");
	while (files != NULL) {
		struct file_state *f = files;
		if (tear && f->n != 0 && f->fd >= 0 && apply(f, f->fd, keep_half) != 0)
			fprintf(stderr, "lossyfs: writing torn sectors failed: %s\n", strerror(errno));
		forget(f);
	}
}

static const struct fuse_operations ops = {
	.init = lossy_init,
	.getattr = lossy_getattr,
	.readdir = lossy_readdir,
	.open = lossy_open,
	.create = lossy_create,
	.read = lossy_read,
	.write = lossy_write,
	.fsync = lossy_fsync,
	.fsyncdir = lossy_fsyncdir,
	.release = lossy_release,
	.truncate = lossy_truncate,
	.unlink = lossy_unlink,
	.rename = lossy_rename,
	.link = lossy_link,
	.mkdir = lossy_mkdir,
	.rmdir = lossy_rmdir,
	.chmod = lossy_chmod,
	.utimens = lossy_utimens,
	.statfs = lossy_statfs,
	.destroy = lossy_destroy,
};

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: lossyfs BACKING_DIR MOUNTPOINT [--no-holes] [--keep-cache] "
			"[--no-rename-flags] [--inode-numbers] [--refuse-direct-writes] [FUSE options]\n");
		return 2;
	}
	backing = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (backing < 0) {
		fprintf(stderr, "lossyfs: cannot open the backing directory %s: %s\n", argv[1],
			strerror(errno));
		return 2;
	}
	char *fargv[16];
	int fargc = 0;
	fargv[fargc++] = argv[0];
	fargv[fargc++] = argv[2];
	fargv[fargc++] = "-f";
	fargv[fargc++] = "-s";
	for (int i = 3; i < argc && fargc < 15; i++) {
		if (strcmp(argv[i], "--no-holes") == 0)
			no_holes = true;
		else if (strcmp(argv[i], "--keep-cache") == 0)
			keep_cache = true;
		else if (strcmp(argv[i], "--refuse-direct-writes") == 0)
			refuse_direct = true;
		else if (strcmp(argv[i], "--no-rename-flags") == 0)
			no_rename_flags = true;
		else if (strcmp(argv[i], "--inode-numbers") == 0)
			inode_numbers = true;
		else
			fargv[fargc++] = argv[i];
	}
	fargv[fargc] = NULL;
	return fuse_main(fargc, fargv, &ops, NULL);
}
