/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_open -- an existing pool file found, locked, validated and mapped, or
 * a new one created in its place.  See pool.h and pool_internal.h. */
#include "persist/pool.h"
#include "persist/pool_internal.h"

#include "base/log.h"
#include "base/own_fds.h"
#include "prim/prim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <unistd.h>

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
	if (prim_fstat(fd, st) != 0) {
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
	switch (prim_fs_type(fd)) {
	case PROC_SUPER_MAGIC:
	case SYSFS_MAGIC:
	case DEBUGFS_MAGIC:
	case TRACEFS_MAGIC:
	case SECURITYFS_MAGIC:
	case CGROUP_SUPER_MAGIC:
	case CGROUP2_SUPER_MAGIC:
	case BPF_FS_MAGIC:
		err_set("pool %s is a kernel pseudo-file (/proc, /sys and the like), not a file "
			"that can hold a pool; it was left untouched: set PMTHREADS_POOL to a file "
			"path", path);
		return -1;
	default:
		return 0;
	}
}

int pool_open_existing(const char *path, bool read_only, int *fd_out)
{
	/* Look first without opening (O_PATH: no side effect of opening a
	 * device, no wait on a FIFO), then open the same file for real. */
	struct stat st, st2;
	int pfd = prim_open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	if (pfd >= 0) {
		int rc = refuse_special(pfd, path, &st);
		prim_close(pfd);
		if (rc != 0)
			return -1;
	}
	int fd = pfd < 0 ? -1 : prim_open(path, (read_only ? O_RDONLY : O_RDWR) | O_NOFOLLOW |
						 O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0);
	if (fd >= 0) {
		if (refuse_special(fd, path, &st2) != 0) {
			prim_close(fd);
			return -1;
		}
		if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
			prim_close(fd);
			err_set("pool %s was replaced while being opened; is another program "
				"replacing it?", path);
			return -1;
		}
		prim_set_blocking(fd);
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

/* The pool's fields from its validated header h and records rec. */
static void fill_from_header(struct pool *p, const struct pool_header *h,
			     const struct pool_records *rec, const struct pool_open_options *o)
{
	unsigned char *base = p->nvm->base;
	p->page_size = h->page_size;
	p->npages = h->npages;
	p->shadow_base = h->shadow_base;
	memcpy(p->uuid, h->uuid, sizeof(p->uuid));
	memcpy(p->creator, h->creator, sizeof(p->creator));
	p->file_size = h->file_size;
	p->format_version = h->format_version;
	p->seq_off = h->seq_off;
	struct pool_layout l;
	(void)pool_layout_of_header(h, &l);	/* checked by pool_validate_header */
	p->sum_off = l.sum_off;
	p->log_off = l.log_off;
	p->log_size = l.log_size;
	p->data_off = h->data_off;
	p->page_step = l.page_step;
	p->copy_step = l.copy_step;
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
	p->seq_pages = p->created ? 0 : pool_seq_extent(p->fd, h, p->sum_off);
	/* A new pool has no torn copies; an existing one is scanned by
	 * persist_invalidate_torn before its first epoch. */
	p->torn_invalidated = p->created;
}

static int map_and_fill(struct pool *p, const struct pool_header *h,
			const struct pool_records *rec, const struct pool_open_options *o)
{
	struct pool_layout l;
	(void)pool_layout_of_header(h, &l);	/* checked by pool_validate_header */
	struct nvm_log_region log = pool_log_region(&l, h->uuid);
	if (nvm_map_pool(&p->nvm, p->fd, p->path, h->file_size, o->nvm, o->latency_ns, o->sim,
			 l.log_size != 0 ? &log : NULL, o->read_only) != 0)
		return -1;
	/* The version records as the log left them, not as the file had them.
	 * Nothing is written to the file until every check has passed (the
	 * mapping is not accepted: pool_accept), so a refusal from here on
	 * leaves it as it was, whatever the replay made of the mapping. */
	struct pool_records now = *rec;
	if (l.log_size != 0 &&
	    pool_read_records(p->nvm->base, h, p->path, o, true, &now) != 0) {
		nvm_abandon(p->nvm);
		p->nvm = NULL;
		return -1;
	}
	fill_from_header(p, h, &now, o);
	if (l.log_size != 0) {
		/* Seq entries the log replayed may lie past the file's data. */
		uint64_t end = nvm_log_touched_end(p->nvm, p->seq_off, p->sum_off);
		uint64_t pages = (end - p->seq_off + 2 * sizeof(uint64_t) - 1) / (2 * sizeof(uint64_t));
		if (pages > p->npages)
			pages = p->npages;
		if (pages > p->seq_pages)
			p->seq_pages = pages;
	}
	if (!o->inspect && pool_validate_seq(p) != 0) {
		nvm_abandon(p->nvm);
		p->nvm = NULL;
		char why[600];
		snprintf(why, sizeof(why), "%s", err_get());
		err_set("%s; it was left untouched: %s", why, POOL_REFUSE_FIX);
		return -1;
	}
	if (pool_sum_key_init(&p->sum_key, p->uuid, p->page_size) != 0) {
		nvm_abandon(p->nvm);
		p->nvm = NULL;
		err_set_errno(ENOMEM, "cannot open pool %s", p->path);
		return -1;
	}
	if (!o->accept_later && !o->read_only && nvm_accept(p->nvm) != 0) {
		int e = nvm_error(p->nvm);
		nvm_abandon(p->nvm);
		p->nvm = NULL;
		pool_sum_key_fini(&p->sum_key);
		err_set_errno(e, "pool %s: writing what its log holds into the file failed; the "
			      "log is kept, replayed again at the next open", p->path);
		return -1;
	}
	return 0;
}

/* p->fd: the existing file at o->path, or a pool just created there
 * (p->created).  -1 with err_get() set. */
static int find_or_create(struct pool *p, const struct pool_open_options *o, size_t page_size)
{
	for (int attempt = 0; p->fd < 0; attempt++) {
		/* legacy: read-write for the exclusive lock only */
		int found = pool_open_existing(o->path, o->read_only && !o->legacy, &p->fd);
		if (found < 0)
			return -1;
		if (found == 0)
			break;
		if (!o->create || o->read_only) {
			err_set("pool %s does not exist; check PMTHREADS_POOL", o->path);
			return -1;
		}
		int fd = pool_create_file(o->path, o, page_size);
		if (fd == -1)
			return -1;
		if (fd >= 0) {
			p->fd = fd;
			p->created = true;
		} else if (attempt > 8) {
			err_set("pool %s keeps appearing and disappearing while being opened; is "
				"another program replacing it?", o->path);
			return -1;
		}
	}
	return 0;
}

/* p->fd locked (a pool just created already is), *st its status under the
 * lock.  POOL_OK, or the error with err_get() set. */
static enum pool_error lock_file(struct pool *p, const struct pool_open_options *o,
				 struct stat *st)
{
	if (prim_fstat(p->fd, st) != 0) {
		err_set_errno(errno, "cannot stat pool %s", o->path);
		return POOL_ERR_REFUSED;
	}
	if (!S_ISREG(st->st_mode)) {
		err_set("pool %s is not a regular file; it was left untouched: set PMTHREADS_POOL "
			"to a file path", o->path);
		return POOL_ERR_REFUSED;
	}
	if (!p->created && pool_lock_fd(p->fd, o->read_only && !o->legacy) != 0) {
		if (errno == EAGAIN || errno == EACCES) {
			pid_t holder = pool_report_locked(p->fd, o->path, st);
			if (o->lock_holder != NULL)
				*o->lock_holder = holder;
			return POOL_ERR_LOCKED;
		}
		err_set_errno(errno, "cannot lock pool %s", o->path);
		return POOL_ERR_REFUSED;
	}
	/* Size again under the lock: a concurrent formatter is done now. */
	if (prim_fstat(p->fd, st) != 0) {
		err_set_errno(errno, "cannot stat pool %s", o->path);
		return POOL_ERR_REFUSED;
	}
	return POOL_OK;
}

/* A file that holds no pool and no data -- empty, or left by an interrupted
 * creation (emptied first) -- formatted in place; *st its status after.
 * -1 with err_get() set. */
static int format_if_empty(struct pool *p, const struct pool_open_options *o, size_t page_size,
			   struct stat *st)
{
	if (st->st_size >= POOL_HEADER_READ && !o->read_only) {
		_Alignas(64) unsigned char head[POOL_HEADER_READ];
		if (prim_pread_all(p->fd, head, sizeof(head), 0) == (ssize_t)sizeof(head) &&
		    pool_unfinished_format(head)) {
			log_msg(LOG_INFO, "pool %s: its creation was interrupted (no magic yet); "
				"creating it again", o->path);
			if (prim_ftruncate(p->fd, 0) != 0) {
				err_set_errno(errno, "cannot empty %s, a pool whose creation was "
					      "interrupted, to create it again", o->path);
				return -1;
			}
			st->st_size = 0;
		}
	}
	if (st->st_size != 0)
		return 0;
	if (o->read_only) {
		err_set("%s is an empty file, not a pmthreads pool", o->path);
		return -1;
	}
	/* An empty file (e.g. made by mktemp) holds no data to lose. */
	if (pool_format_file(p->fd, o->path, o, page_size) != 0) {
		if (prim_ftruncate(p->fd, 0) != 0)
			log_msg(LOG_WARN, "could not empty %s again after a failed format", o->path);
		return -1;
	}
	p->created = true;
	if (prim_fstat(p->fd, st) != 0) {
		err_set_errno(errno, "cannot stat pool %s", o->path);
		return -1;
	}
	return 0;
}

/* The first POOL_HEADER_READ bytes of the file into buf.  -1 with err_get()
 * set when they cannot be read or the file is shorter. */
static int read_head(const struct pool *p, const char *path, unsigned char *buf)
{
	memset(buf, 0, POOL_HEADER_READ);
	ssize_t got = prim_pread_all(p->fd, buf, POOL_HEADER_READ, 0);
	if (got < 0) {
		err_set_errno(errno, "cannot read pool %s", path);
		return -1;
	}
	if ((size_t)got < POOL_HEADER_READ) {
		if (got >= 8 && memcmp(buf, POOL_MAGIC, 8) == 0)
			err_set("pool %s is truncated: %lld bytes, too short for its header; it was "
				"left untouched: %s", path, (long long)got, POOL_REFUSE_FIX);
		else
			err_set("%s is not a pmthreads pool (%lld bytes, no pool header); it was "
				"left untouched: %s", path, (long long)got, POOL_REFUSE_FIX);
		return -1;
	}
	return 0;
}

/* Whether the pool's current record says its last run did not shut down
 * cleanly: a crash, or a write-back that failed (no record is written after
 * the error, nvm.h), or one that could not be told. */
static bool left_unclean(const struct pool_records *rec)
{
	return rec->cur < 0 || rec->r[rec->cur].clean != 1;
}

/* The file's pages leave the page cache, so that what is read next is what
 * the device holds.  After a failed msync or fsync the kernel keeps the
 * pages it could not write, marked clean (ext4, and FUSE with kernel_cache):
 * a run of the same boot that trusted them would open an epoch the failed
 * run was told was not durable -- and the version record, seq entries and
 * checksums of it -- and, rewriting a copy with the bytes the cache already
 * shows, write nothing of them (persist.c writes only the lines that
 * differ) while publishing their checksum: the epoch it acknowledges then
 * fails its checksums after a power cut (issue 39 item 4, test_lossyfs's
 * "page cache" sweep).  Dirty pages, a crashed run's stores that no msync
 * covered, are synced first so that they are clean and leave too; an error
 * there is one more write the device lost, none of it acknowledged.  Only
 * after a crash or a failure: a clean shutdown synced everything, and its
 * cache is the warm start's.  Read-only opens as well, so that `check` says
 * what the device holds. */
static void forget_cache(const struct pool *p)
{
	if (prim_fdatasync(p->fd) != 0)
		log_msg(LOG_DEBUG, "pool %s: syncing what a crashed run left dirty failed (%s); "
			"the pool is read from what the device holds", p->path, strerror(errno));
	prim_drop_cache(p->fd, 0, 0);
}

/* The header page read and validated; again from the device when the pool
 * was left unclean, or refused as the page cache shows it (a file that is no
 * pool is refused as it is). */
static int read_and_validate(struct pool *p, const struct pool_open_options *o, size_t page_size,
			     const struct stat *st, unsigned char *buf, struct pool_header *h,
			     struct pool_records *rec)
{
	int r = read_head(p, o->path, buf) != 0 ||
		pool_validate_header(buf, st, o->path, o, page_size, h, rec) != 0;
	bool pool = memcmp(buf, POOL_MAGIC, 8) == 0;
	if (p->created || !pool || (r == 0 && !left_unclean(rec)))
		return r ? -1 : 0;
	forget_cache(p);
	r = read_head(p, o->path, buf) != 0 ||
	    pool_validate_header(buf, st, o->path, o, page_size, h, rec) != 0;
	return r ? -1 : 0;
}

/* A new struct pool for o, no file yet; NULL with err_get() set. */
static struct pool *new_pool(const struct pool_open_options *o)
{
	if (o == NULL || o->path == NULL || o->path[0] == '\0') {
		err_set("no pool path given (set PMTHREADS_POOL)");
		return NULL;
	}
	if (strlen(o->path) >= PATH_MAX) {
		err_set("pool path is too long (%zu bytes, at most %d)", strlen(o->path), PATH_MAX - 1);
		return NULL;
	}
	/* The runtime's memory (prim_map_any: zeroed), not malloc's: inside
	 * the library malloc is our wrapper, and in malloc mode the
	 * persistent heap's.  pool_free gives it back. */
	struct pool *p = prim_map_any(sizeof(*p));
	if (p == NULL) {
		err_set_errno(ENOMEM, "cannot open pool %s", o->path);
		return NULL;
	}
	snprintf(p->path, sizeof(p->path), "%s", o->path);
	p->fd = -1;
	p->dir_fd = -1;
	p->name_fd = -1;
	return p;
}

enum pool_error pool_open(struct pool **out, const struct pool_open_options *o)
{
	err_clear();
	struct pool *p = new_pool(o);
	if (p == NULL)
		return POOL_ERR_REFUSED;
	size_t page_size = prim_page_size();
	enum pool_error rc = POOL_ERR_REFUSED;
	struct stat st;
	_Alignas(64) unsigned char buf[POOL_HEADER_READ];
	struct pool_header h;
	struct pool_records rec;
	if (!o->read_only) {
		rc = pool_lock_name(p, o);
		if (rc != POOL_OK)
			goto fail;
		rc = POOL_ERR_REFUSED;
	}
	if (find_or_create(p, o, page_size) != 0)
		goto fail;
	own_fd_keep(&p->fd, "pool file");
	rc = lock_file(p, o, &st);
	if (rc != POOL_OK)
		goto fail;
	rc = POOL_ERR_REFUSED;
	if (pool_bind_identity(p, &st) != 0)
		goto fail;
	if (format_if_empty(p, o, page_size, &st) != 0 ||
	    read_and_validate(p, o, page_size, &st, buf, &h, &rec) != 0 ||
	    map_and_fill(p, &h, &rec, o) != 0)
		goto fail;
	*out = p;
	return POOL_OK;
fail:
	own_fd_close(&p->fd);
	own_fd_close(&p->dir_fd);
	own_fd_close(&p->name_fd);
	pool_free(p);
	return rc;
}
