/* pool -- the pool file: format, create/open/lock, checks.  See pool.h. */
#include "pool.h"

#include "log.h"
#include "persist.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
	uint64_t checksum;		/* FNV-1a over every byte before it */
};

/* VER_d and the clean flag share one line; the advisory holder pid gets its
 * own so that its (unflushed) store never rides along with theirs. */
#define POOL_MUTABLE_OFF 1024
#define POOL_HOLDER_OFF (POOL_MUTABLE_OFF + NVM_LINE)
#define POOL_HEADER_READ (POOL_HOLDER_OFF + NVM_LINE)

_Static_assert(sizeof(struct pool_header) <= POOL_MUTABLE_OFF, "header overlaps mutable part");

/* Capacity limit: keeps every offset computation far from overflow. */
#define POOL_MAX_PAGES (1ULL << 32)

#define REFUSE_FIX "choose another PMTHREADS_POOL path, or remove the file if its data is expendable"

static uint64_t header_checksum(const struct pool_header *h)
{
	const unsigned char *b = (const unsigned char *)h;
	uint64_t x = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < offsetof(struct pool_header, checksum); i++) {
		x ^= b[i];
		x *= 0x100000001b3ULL;
	}
	return x;
}

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct layout {
	uint64_t seq_off, data_off, file_size;
};

static struct layout layout_for(uint64_t npages, uint64_t page_size)
{
	struct layout l;
	l.seq_off = page_size;
	l.data_off = l.seq_off + round_up(npages * 2 * sizeof(uint64_t), page_size);
	l.file_size = l.data_off + npages * 2 * page_size;
	return l;
}

/* ---- locking and the holder's identity ---- */

static int lock_fd(int fd, bool shared)
{
	struct flock fl = { .l_type = shared ? F_RDLCK : F_WRLCK, .l_whence = SEEK_SET };
	return fcntl(fd, F_OFD_SETLK, &fl);
}

static bool pid_alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Some other process with the file open: a candidate holder when the header
 * names none (a read-only holder writes nothing).  Only processes whose
 * /proc/PID/fd we may read are seen. */
static pid_t scan_proc_for_file(const struct stat *st)
{
	DIR *d = opendir("/proc");
	if (d == NULL)
		return 0;
	pid_t self = getpid(), found = 0;
	struct dirent *e;
	while (found == 0 && (e = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end != '\0' || pid <= 0 || pid == self)
			continue;
		char dir[64];
		snprintf(dir, sizeof(dir), "/proc/%ld/fd", pid);
		DIR *fds = opendir(dir);
		if (fds == NULL)
			continue;
		struct dirent *f;
		while ((f = readdir(fds)) != NULL) {
			char link[sizeof(dir) + sizeof(f->d_name)];
			struct stat fst;
			snprintf(link, sizeof(link), "%s/%s", dir, f->d_name);
			if (f->d_name[0] != '.' && stat(link, &fst) == 0 && fst.st_dev == st->st_dev &&
			    fst.st_ino == st->st_ino) {
				found = (pid_t)pid;
				break;
			}
		}
		closedir(fds);
	}
	closedir(d);
	return found;
}

static _Thread_local pid_t last_lock_holder;

pid_t pool_last_lock_holder(void) { return last_lock_holder; }

static void set_locked_error(int fd, const char *path, const struct stat *st)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	bool reader = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_RDLCK;
	pid_t pid = 0;
	unsigned char buf[POOL_HEADER_READ];
	if (!reader && pread(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) &&
	    memcmp(buf, POOL_MAGIC, 8) == 0) {
		uint64_t v;
		memcpy(&v, buf + POOL_HOLDER_OFF, sizeof(v));
		if (v <= INT32_MAX && pid_alive((pid_t)v))
			pid = (pid_t)v;
	}
	if (pid == 0)
		pid = scan_proc_for_file(st);
	last_lock_holder = pid;
	const char *how = reader ? "being read (shared lock)" : "in use (exclusive lock)";
	if (pid == getpid())
		err_set("pool %s is already open in this process (%s); open it once, or use "
			"another PMTHREADS_POOL path", path, how);
	else if (pid != 0)
		err_set("pool %s is %s by process %d; stop that process first, or use another "
			"PMTHREADS_POOL path", path, how, (int)pid);
	else
		err_set("pool %s is %s by another process (pid unknown); stop it first, or use "
			"another PMTHREADS_POOL path", path, how);
}

/* ---- creation ---- */

static int fill_uuid(uint8_t uuid[16])
{
	size_t got = 0;
	while (got < 16) {
		ssize_t r = getrandom(uuid + got, 16 - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		got += (size_t)r;
	}
	uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40);	/* RFC 4122 version 4 */
	uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
	return 0;
}

static int write_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *b = buf;
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
	uint64_t npages = round_up(o->capacity, page_size) / page_size;
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
	struct layout l = layout_for(npages, page_size);
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
	h.checksum = header_checksum(&h);
	memcpy(buf, &h, sizeof(h));
	/* A new pool counts as cleanly closed: nothing to recover. */
	uint64_t one = 1;
	memcpy(buf + POOL_MUTABLE_OFF + sizeof(uint64_t), &one, sizeof(one));

	unsigned char nomagic[8] = { 0 };
	if (ftruncate(fd, (off_t)l.file_size) != 0) {
		err_set_errno(errno, "cannot create pool %s: cannot size it to %llu bytes", path,
			      (unsigned long long)l.file_size);
		return -1;
	}
	if (write_all(fd, nomagic, 8, 0) != 0 ||
	    write_all(fd, buf + 8, sizeof(buf) - 8, 8) != 0 || fsync(fd) != 0 ||
	    write_all(fd, buf, 8, 0) != 0 || fsync(fd) != 0) {
		err_set_errno(errno, "cannot create pool %s: writing its header failed", path);
		return -1;
	}
	return 0;
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

static void sync_dir(const char *path)
{
	char dir[PATH_MAX];
	dir_of(path, dir, sizeof(dir));
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d >= 0) {
		fsync(d);
		close(d);
	}
}

/* Create a new pool at path, fully formatted and locked before its name
 * appears.  Returns the fd, -1 with err_get() set, or -2 when path appeared
 * meanwhile (the caller then opens the existing file). */
static int create_pool(const char *path, const struct pool_open_options *o, size_t page_size)
{
	char dir[PATH_MAX];
	dir_of(path, dir, sizeof(dir));
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0) {
		if (lock_fd(fd, false) != 0) {
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
			sync_dir(path);
			return fd;
		}
		int e = errno;
		close(fd);
		if (e == EEXIST)
			return -2;
		/* No /proc, or a file system that cannot link a tmpfile: fall
		 * through to the plain exclusive create. */
	}
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		if (errno == EEXIST)
			return -2;
		err_set_errno(errno, "cannot create pool %s", path);
		return -1;
	}
	if (lock_fd(fd, false) != 0) {
		/* Someone opened our brand-new empty file and locked it first;
		 * it is theirs to format now. */
		close(fd);
		return -2;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size != 0) {
		close(fd);
		return -2;
	}
	if (format_pool(fd, path, o, page_size) != 0) {
		close(fd);
		unlink(path);
		return -1;
	}
	sync_dir(path);
	return fd;
}

/* ---- validation ---- */

static int validate_header(const unsigned char *buf, const struct stat *st, const char *path,
			   const struct pool_open_options *o, size_t page_size,
			   struct pool_header *h)
{
	memcpy(h, buf, sizeof(*h));
	if (memcmp(h->magic, POOL_MAGIC, 8) != 0) {
		err_set("%s is not a pmthreads pool (no pool header); it was left untouched: %s",
			path, REFUSE_FIX);
		return -1;
	}
	if (h->format_version != POOL_FORMAT_VERSION) {
		err_set("%s is a pmthreads pool of format version %u, but this pmthreads reads "
			"version %u; it was left untouched: use a matching pmthreads, or %s",
			path, h->format_version, POOL_FORMAT_VERSION, REFUSE_FIX);
		return -1;
	}
	if (h->header_bytes != sizeof(*h) || header_checksum(h) != h->checksum) {
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
	struct layout l = layout_for(h->npages, page_size);
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
	uint64_t ver_d, clean;
	memcpy(&ver_d, buf + POOL_MUTABLE_OFF, sizeof(ver_d));
	memcpy(&clean, buf + POOL_MUTABLE_OFF + sizeof(uint64_t), sizeof(clean));
	if (ver_d == POOL_SEQ_INVALID || clean > 1) {
		err_set("pool %s has a corrupt version record (VER_d %llu, clean flag %llu); it "
			"was left untouched: %s", path, (unsigned long long)ver_d,
			(unsigned long long)clean, REFUSE_FIX);
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

static int open_existing(const char *path, bool read_only, int *fd_out)
{
	int fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
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

static int map_and_fill(struct pool *p, const struct pool_header *h,
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
	p->seq_off = h->seq_off;
	p->data_off = h->data_off;
	p->ver_d = (volatile uint64_t *)(base + POOL_MUTABLE_OFF);
	p->clean = (volatile uint64_t *)(base + POOL_MUTABLE_OFF + sizeof(uint64_t));
	p->holder_pid = (volatile uint64_t *)(base + POOL_HOLDER_OFF);
	p->seq = (uint64_t(*)[2])(base + h->seq_off);
	p->data = base + h->data_off;
	p->was_clean = *p->clean == 1;
	p->read_only = o->read_only;
	/* A new pool has no torn copies; an existing one is scanned by
	 * pool_invalidate_torn before its first epoch. */
	p->torn_invalidated = p->created;
	if (!o->read_only)
		*p->holder_pid = (uint64_t)getpid();
	return 0;
}

int pool_open(struct pool **out, const struct pool_open_options *o)
{
	err_clear();
	if (o == NULL || o->path == NULL || o->path[0] == '\0') {
		err_set("no pool path given (set PMTHREADS_POOL)");
		return -1;
	}
	if (strlen(o->path) >= PATH_MAX) {
		err_set("pool path is too long (%zu bytes, at most %d)", strlen(o->path), PATH_MAX - 1);
		return -1;
	}
	long ps = sysconf(_SC_PAGESIZE);
	size_t page_size = ps > 0 ? (size_t)ps : 4096;
	struct pool *p = calloc(1, sizeof(*p));
	if (p == NULL) {
		err_set_errno(ENOMEM, "cannot open pool %s", o->path);
		return -1;
	}
	snprintf(p->path, sizeof(p->path), "%s", o->path);
	p->fd = -1;

	for (int attempt = 0; p->fd < 0; attempt++) {
		int rc = open_existing(o->path, o->read_only, &p->fd);
		if (rc < 0)
			goto fail;
		if (rc == 0)
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
	if (!p->created && lock_fd(p->fd, o->read_only) != 0) {
		if (errno == EAGAIN || errno == EACCES)
			set_locked_error(p->fd, o->path, &st);
		else
			err_set_errno(errno, "cannot lock pool %s", o->path);
		goto fail;
	}
	/* Size again under the lock: a concurrent formatter is done now. */
	if (fstat(p->fd, &st) != 0) {
		err_set_errno(errno, "cannot stat pool %s", o->path);
		goto fail;
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
	if (validate_header(buf, &st, o->path, o, page_size, &h) != 0)
		goto fail;
	if (map_and_fill(p, &h, o) != 0)
		goto fail;
	*out = p;
	return 0;
fail:
	if (p->fd >= 0)
		close(p->fd);
	free(p);
	return -1;
}

void pool_close(struct pool *p)
{
	if (p == NULL)
		return;
	nvm_unmap(p->nvm);
	close(p->fd);
	free(p);
}

void pool_set_clean(struct pool *p, bool clean)
{
	if (p->read_only)
		log_fatal("pool_set_clean on %s, which was opened read-only", p->path);
	*p->clean = clean ? 1 : 0;
	nvm_flush(p->nvm, (const void *)p->clean, sizeof(*p->clean));
	nvm_fence(p->nvm);
}

int pool_valid_copy(const struct pool *p, uint64_t page)
{
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

/* ---- checks ---- */

#define CHECK_DETAILS 64

struct checker {
	void (*report)(const char *msg, void *arg);
	void *arg;
	unsigned problems;
};

__attribute__((format(printf, 2, 3))) static void problem(struct checker *c, const char *fmt, ...)
{
	c->problems++;
	if (c->report == NULL || c->problems > CHECK_DETAILS)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->report(msg, c->arg);
}

unsigned pool_check(const struct pool *p, void (*report)(const char *msg, void *arg), void *arg)
{
	struct checker c = { report, arg, 0 };
	struct pool_header h;
	memcpy(&h, p->nvm->base, sizeof(h));
	if (memcmp(h.magic, POOL_MAGIC, 8) != 0)
		problem(&c, "header: magic is gone");
	if (h.format_version != POOL_FORMAT_VERSION)
		problem(&c, "header: format version %u, expected %u", h.format_version,
			POOL_FORMAT_VERSION);
	if (header_checksum(&h) != h.checksum)
		problem(&c, "header: checksum mismatch (the immutable part changed after open)");
	struct layout l = layout_for(p->npages, p->page_size);
	if (h.npages != p->npages || h.page_size != p->page_size || l.file_size != p->file_size)
		problem(&c, "header: layout differs from the one found at open");
	struct stat st;
	if (fstat(p->fd, &st) == 0 && (uint64_t)st.st_size != p->file_size)
		problem(&c, "file: %llu bytes, the header says %llu", (unsigned long long)st.st_size,
			(unsigned long long)p->file_size);

	uint64_t v = *p->ver_d, clean = *p->clean;
	if (v == POOL_SEQ_INVALID)
		problem(&c, "VER_d holds the invalid marker");
	if (clean > 1)
		problem(&c, "clean flag is %llu (expected 0 or 1)", (unsigned long long)clean);
	uint64_t torn = 0;
	for (uint64_t i = 0; i < p->npages; i++) {
		uint64_t s[2] = { p->seq[i][0], p->seq[i][1] };
		bool is_torn[2], invalid[2];
		for (int k = 0; k < 2; k++) {
			invalid[k] = s[k] == POOL_SEQ_INVALID;
			is_torn[k] = !invalid[k] && s[k] > v;
			if (is_torn[k] && s[k] != v + 1)
				problem(&c, "page %llu copy %d: seq %llu is beyond the next epoch %llu",
					(unsigned long long)i, k, (unsigned long long)s[k],
					(unsigned long long)(v + 1));
			torn += is_torn[k];
		}
		/* Each epoch writes one copy of a page, and the next working copy
		 * is always an invalid or torn one: so at most one copy of a page
		 * is ever not valid, and two valid copies never share a seq. */
		if ((invalid[0] || is_torn[0]) && (invalid[1] || is_torn[1]))
			problem(&c, "page %llu: neither copy is valid (seq %llu and %llu, VER_d %llu)",
				(unsigned long long)i, (unsigned long long)s[0],
				(unsigned long long)s[1], (unsigned long long)v);
		else if (s[0] == s[1] && s[0] != 0)
			problem(&c, "page %llu: both copies have seq %llu", (unsigned long long)i,
				(unsigned long long)s[0]);
	}
	if (torn != 0 && clean == 1)
		problem(&c, "the pool is marked cleanly closed but %llu copies are from an "
			"interrupted epoch", (unsigned long long)torn);
	if (c.problems > CHECK_DETAILS && report != NULL) {
		char msg[128];
		snprintf(msg, sizeof(msg), "... and %u more problems", c.problems - CHECK_DETAILS);
		report(msg, arg);
	}
	return c.problems;
}

void pool_summarize(const struct pool *p, struct pool_summary *s)
{
	memset(s, 0, sizeof(*s));
	s->ver_d = *p->ver_d;
	s->clean = *p->clean == 1;
	s->holder_pid = *p->holder_pid;
	for (uint64_t i = 0; i < p->npages; i++) {
		for (int k = 0; k < 2; k++) {
			uint64_t q = p->seq[i][k];
			if (q == POOL_SEQ_INVALID)
				s->invalid_copies++;
			else if (q > s->ver_d)
				s->torn_copies++;
		}
		if (pool_valid_copy(p, i) >= 0)
			s->pages_written++;
	}
}
