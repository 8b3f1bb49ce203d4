/* SPDX-License-Identifier: BSD-3-Clause */
/* prim -- Linux implementation.  See prim.h. */
#include "prim/prim.h"
#include "prim/prim_uffd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <limits.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <stddef.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* The kernel's sigset, which the raw signal-mask-taking calls want sized. */
#define KSIGSET_SIZE (_NSIG / 8)

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

uint64_t prim_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void prim_sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

pid_t prim_gettid(void) { return (pid_t)prim_syscall(SYS_gettid); }

pid_t prim_getpid(void) { return getpid(); }

uid_t prim_getuid(void) { return getuid(); }

bool prim_secure_exec(void) { return getauxval(AT_SECURE) != 0; }

uid_t prim_geteuid(void) { return geteuid(); }

pid_t prim_getppid(void) { return getppid(); }

void prim_exit_now(int status) { _exit(status); }

bool prim_process_alive(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

size_t prim_page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);
	return ps > 0 ? (size_t)ps : 4096;
}

/* A thread's state letter from its stat file, "tid (comm) S ...": comm may
 * hold spaces and parentheses, so the state follows the last ')'.  0 when
 * the thread is gone. */
static char task_state(int dir_fd, const char *tid)
{
	char path[48];
	size_t n = 0;
	for (; tid[n] != '\0' && n < 32; n++)
		path[n] = tid[n];
	const char *suffix = "/stat";
	for (size_t k = 0; suffix[k] != '\0'; k++)
		path[n++] = suffix[k];
	path[n] = '\0';
	int fd = (int)prim_syscall(SYS_openat, dir_fd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[512];
	long got = prim_sys_read(fd, buf, sizeof(buf) - 1);
	prim_sys_close(fd);
	if (got <= 0)
		return 0;
	char *close_paren = NULL;
	for (long i = 0; i < got; i++)
		if (buf[i] == ')')
			close_paren = &buf[i];
	if (close_paren == NULL || close_paren + 2 >= buf + got)
		return 0;
	return close_paren[2];
}

int prim_live_threads(void)
{
	int dir_fd = prim_sys_open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		return -1;
	struct dirent64_raw {
		uint64_t ino;
		int64_t off;
		unsigned short reclen;
		unsigned char type;
		char name[];
	};
	char buf[4096] __attribute__((aligned(8)));
	int live = 0;
	for (;;) {
		long n = prim_syscall(SYS_getdents64, dir_fd, buf, sizeof(buf));
		if (n < 0)
			live = -1;
		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			const struct dirent64_raw *d = (const void *)(buf + off);
			off += d->reclen;
			if (d->name[0] < '0' || d->name[0] > '9')
				continue;
			char st = task_state(dir_fd, d->name);
			if (st != 0 && st != 'Z' && st != 'X' && st != 'x')
				live++;
		}
	}
	prim_sys_close(dir_fd);
	return live;
}

/* off < 0: at the file position, through the system call itself: the
 * preload's write wrapper may hold output (lib/output), and the runtime's
 * own messages are never held. */
static int write_fully(int fd, const char *p, size_t len, off_t off)
{
	while (len > 0) {
		ssize_t w = off < 0 ? prim_sys_write(fd, p, len) : pwrite(fd, p, len, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		p += w;
		len -= (size_t)w;
		if (off >= 0)
			off += w;
	}
	return 0;
}

int prim_write_all(int fd, const void *buf, size_t len) { return write_fully(fd, buf, len, -1); }

int prim_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	return write_fully(fd, buf, len, off);
}

int prim_reopen_direct(int fd)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	int d = open(proc, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (d < 0)
		return -1;
	struct stat a, b;
	if (fstat(fd, &a) != 0 || fstat(d, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		close(d);
		errno = ESTALE;
		return -1;
	}
	return d;
}

ssize_t prim_pread_all(int fd, void *buf, size_t len, off_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t r = prim_pread(fd, (char *)buf + got, len - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

int prim_fallocate(int fd, uint64_t off, uint64_t len)
{
	if (len == 0)
		return 0;
	int r;
	do
		r = fallocate(fd, 0, (off_t)off, (off_t)len);
	while (r != 0 && errno == EINTR);
	return r;
}

unsigned prim_idle_cpus(void)
{
	char buf[128];
	long n = prim_read_file("/proc/loadavg", buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	unsigned running;
	if (sscanf(buf, "%*s %*s %*s %u/", &running) != 1 || running == 0)
		return 0;
	unsigned cpus = prim_cpu_count();
	return running < cpus ? cpus - running : 0;
}

void prim_drop_cache(int fd, uint64_t off, uint64_t len)
{
	(void)posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
}

unsigned prim_cpu_count(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 1;
	int c = CPU_COUNT(&set);
	return c > 0 ? (unsigned)c : 1;
}

int prim_fdatasync(int fd)
{
	int r;
	do
		r = fdatasync(fd);
	while (r != 0 && errno == EINTR);
	return r;
}

int prim_fsync(int fd)
{
	int r;
	do
		r = fsync(fd);
	while (r != 0 && errno == EINTR);
	return r;
}

int prim_sync_dir(const char *dir)
{
	int d = prim_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (d < 0)
		return -1;
	int rc = prim_fsync(d);
	int e = errno;
	prim_close(d);
	errno = e;
	return rc;
}

int prim_open(const char *path, int flags, mode_t mode) { return open(path, flags, mode); }

int prim_close(int fd) { return close(fd); }

ssize_t prim_read(int fd, void *buf, size_t len) { return read(fd, buf, len); }

ssize_t prim_write(int fd, const void *buf, size_t len) { return write(fd, buf, len); }

ssize_t prim_pread(int fd, void *buf, size_t len, off_t off) { return pread(fd, buf, len, off); }

off_t prim_lseek(int fd, off_t off, int whence) { return lseek(fd, off, whence); }

int prim_poll(struct pollfd *fds, nfds_t n, int timeout_ms) { return poll(fds, n, timeout_ms); }

int prim_fstat(int fd, struct stat *st) { return fstat(fd, st); }

int prim_stat(const char *path, struct stat *st) { return stat(path, st); }

int prim_lstat(const char *path, struct stat *st) { return lstat(path, st); }

int prim_ftruncate(int fd, off_t size) { return ftruncate(fd, size); }

int prim_fchmod(int fd, mode_t mode) { return fchmod(fd, mode); }

int prim_fchown(int fd, uid_t uid, gid_t gid) { return fchown(fd, uid, gid); }

int prim_unlink(const char *path) { return unlink(path); }

int prim_rename(const char *from, const char *to) { return rename(from, to); }

int prim_mkdir(const char *path, mode_t mode) { return mkdir(path, mode); }

int prim_openat(int dirfd, const char *name, int flags, mode_t mode)
{
	return openat(dirfd, name, flags, mode);
}

int prim_fstatat(int dirfd, const char *name, struct stat *st, int flags)
{
	return fstatat(dirfd, name, st, flags);
}

int prim_mkdirat(int dirfd, const char *name, mode_t mode) { return mkdirat(dirfd, name, mode); }

/* Who holds the abstract name addr: connect to it (it listens) and ask the
 * kernel for the peer's credentials.  The connection is never accepted;
 * it stays in the holder's backlog until the holder closes. */
static void name_holder(const struct sockaddr_un *addr, socklen_t len, pid_t *pid, uid_t *uid)
{
	*pid = 0;
	*uid = (uid_t)-1;
	/* The system call itself: the preload's socket wrapper (output
	 * commit's) has nothing to do with the runtime's own. */
	int fd = (int)prim_syscall(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return;
	if (connect(fd, (const struct sockaddr *)addr, len) == 0) {
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0) {
			*pid = cred.pid;
			*uid = cred.uid;
		}
	}
	close(fd);
}

int prim_name_lock(const char *key, pid_t *holder, uid_t *holder_uid)
{
	*holder = 0;
	*holder_uid = (uid_t)-1;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	size_t n = strlen(key);
	if (n + 1 > sizeof(addr.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(addr.sun_path + 1, key, n);	/* sun_path[0] = 0: abstract */
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	int fd = (int)prim_syscall(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&addr, len) != 0 || listen(fd, 128) != 0) {
		int e = errno;
		close(fd);
		if (e == EADDRINUSE)
			name_holder(&addr, len, holder, holder_uid);
		errno = e;
		return -1;
	}
	return fd;
}

int prim_dup_cloexec(int fd, int lowest) { return fcntl(fd, F_DUPFD_CLOEXEC, lowest); }

static int create_exclusive(const char *path)
{
	return open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* Remove path, keeping errno. */
static void remove_keeping_errno(const char *path)
{
	int e = errno;
	unlink(path);
	errno = e;
}

int prim_replace_file(const char *path, const void *buf, size_t len, char *tmp, size_t tmp_len,
		      enum prim_replace_step *failed)
{
	int n = snprintf(tmp, tmp_len, "%s.%d.tmp", path, (int)getpid());
	if (n < 0 || (size_t)n >= tmp_len) {
		*failed = PRIM_REPLACE_NAME;
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = create_exclusive(tmp);
	if (fd < 0 && errno == EEXIST) {
		struct stat st;
		if (lstat(tmp, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid())
			unlink(tmp);
		fd = create_exclusive(tmp);
	}
	if (fd < 0) {
		*failed = PRIM_REPLACE_CREATE;
		return -1;
	}
	if (prim_write_all(fd, buf, len) != 0) {
		*failed = PRIM_REPLACE_WRITE;
		int e = errno;
		close(fd);
		errno = e;
		remove_keeping_errno(tmp);
		return -1;
	}
	close(fd);
	if (rename(tmp, path) != 0) {
		*failed = PRIM_REPLACE_RENAME;
		remove_keeping_errno(tmp);
		return -1;
	}
	return 0;
}

int prim_rename_noreplace(const char *from, const char *to)
{
	return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

int prim_link(const char *from, const char *to) { return link(from, to); }

int prim_link_fd(int fd, const char *path)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}

unsigned long prim_fs_type(int fd)
{
	struct statfs fs;
	return fstatfs(fd, &fs) == 0 ? (unsigned long)fs.f_type : 0;
}

bool prim_fs_full(int fd)
{
	struct statfs fs;
	return fstatfs(fd, &fs) == 0 && fs.f_bavail == 0;
}

int prim_fs_avail(int fd, uint64_t *bytes)
{
	struct statfs fs;
	if (fstatfs(fd, &fs) != 0)
		return -1;
	uint64_t unit = fs.f_frsize != 0 ? (uint64_t)fs.f_frsize : (uint64_t)fs.f_bsize;
	*bytes = (uint64_t)fs.f_bavail * unit;
	return 0;
}

void prim_set_blocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

int prim_lock_file(int fd, bool shared)
{
	struct flock fl = { .l_type = shared ? F_RDLCK : F_WRLCK, .l_whence = SEEK_SET };
	return fcntl(fd, F_OFD_SETLK, &fl);
}

bool prim_file_read_locked(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_RDLCK;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

bool prim_file_open_here(int except_fd, const struct stat *st)
{
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		return false;
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d)) != NULL) {
		char *end;
		long n = strtol(e->d_name, &end, 10);
		struct stat fst;
		if (*end == '\0' && e->d_name[0] != '\0' && n != except_fd && n != dirfd(d) &&
		    fstat((int)n, &fst) == 0 && same_file(&fst, st))
			found = true;
	}
	closedir(d);
	return found;
}

/* The first process but this one and except that has a descriptor for
 * which match(its /proc/PID/fd/N link, ctx) holds; 0 if none (or /proc is
 * not there).  Processes whose descriptors cannot be read are passed over. */
static pid_t first_process_with(pid_t except, bool (*match)(const char *link, void *ctx), void *ctx)
{
	DIR *d = opendir("/proc");
	if (d == NULL)
		return 0;
	pid_t self = getpid(), found = 0;
	struct dirent *e;
	while (found == 0 && (e = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end != '\0' || pid <= 0 || pid == self || pid == except)
			continue;
		char dir[64];
		snprintf(dir, sizeof(dir), "/proc/%ld/fd", pid);
		DIR *fds = opendir(dir);
		if (fds == NULL)
			continue;
		struct dirent *f;
		while (found == 0 && (f = readdir(fds)) != NULL) {
			char link[sizeof(dir) + sizeof(f->d_name)];
			snprintf(link, sizeof(link), "%s/%s", dir, f->d_name);
			if (f->d_name[0] != '.' && match(link, ctx))
				found = (pid_t)pid;
		}
		closedir(fds);
	}
	closedir(d);
	return found;
}

static bool link_is_file(const char *link, void *ctx)
{
	struct stat fst;
	return stat(link, &fst) == 0 && same_file(&fst, ctx);
}

pid_t prim_process_with_file(const struct stat *st)
{
	return first_process_with(0, link_is_file, (void *)st);
}

int prim_process_holds(pid_t pid, const struct stat *files, size_t n, const char *deleted_path,
		       char *what, size_t what_len)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	DIR *fds = opendir(dir);
	if (fds == NULL)
		return -1;
	static const char deleted[] = " (deleted)";
	size_t dl = deleted_path != NULL ? strlen(deleted_path) : 0;
	int found = 0;
	struct dirent *f;
	while (found == 0 && (f = readdir(fds)) != NULL) {
		if (f->d_name[0] == '.')
			continue;
		char link[sizeof(dir) + sizeof(f->d_name)], target[PATH_MAX];
		snprintf(link, sizeof(link), "%s/%s", dir, f->d_name);
		ssize_t t = readlink(link, target, sizeof(target) - 1);
		if (t < 0) {
			if (errno == ENOENT)
				continue;	/* closed meanwhile */
			found = -1;
			break;
		}
		target[t] = '\0';
		struct stat fst;
		bool hit = false;
		if (stat(link, &fst) == 0)
			for (size_t i = 0; i < n && !hit; i++)
				hit = same_file(&fst, &files[i]);
		if (!hit && deleted_path != NULL && (size_t)t == dl + sizeof(deleted) - 1 &&
		    memcmp(target, deleted_path, dl) == 0 && strcmp(target + dl, deleted) == 0)
			hit = true;
		if (hit) {
			snprintf(what, what_len, "its descriptor %s: %s", f->d_name, target);
			found = 1;
		}
	}
	int e = errno;
	closedir(fds);
	errno = e;
	return found;
}

/* The inodes of the sockets bound to the abstract name key (at most max),
 * from /proc/net/unix: "Num: RefCount Protocol Flags Type St Inode @key". */
static size_t name_inodes(const char *key, unsigned long *inodes, size_t max)
{
	int fd = open("/proc/net/unix", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[8192];
	size_t have = 0, n = 0;
	for (;;) {
		ssize_t got = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (got <= 0)
			break;
		have += (size_t)got;
		buf[have] = '\0';
		char *line = buf, *nl;
		while ((nl = strchr(line, '\n')) != NULL) {
			*nl = '\0';
			char *path = strrchr(line, ' ');
			unsigned long ino;
			if (path != NULL && path[1] == '@' && strcmp(path + 2, key) == 0 && n < max &&
			    sscanf(line, "%*s %*s %*s %*s %*s %*s %lu", &ino) == 1)
				inodes[n++] = ino;
			line = nl + 1;
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1)
			have = 0;	/* a line longer than the buffer: no name of ours */
	}
	close(fd);
	return n;
}

struct socket_inodes {
	unsigned long ino[8];
	size_t n;
};

static bool link_is_socket(const char *link, void *ctx)
{
	const struct socket_inodes *s = ctx;
	char target[64];
	ssize_t t = readlink(link, target, sizeof(target) - 1);
	unsigned long ino;
	if (t <= 0)
		return false;
	target[t] = '\0';
	if (sscanf(target, "socket:[%lu]", &ino) != 1)
		return false;
	for (size_t i = 0; i < s->n; i++)
		if (s->ino[i] == ino)
			return true;
	return false;
}

pid_t prim_name_lock_holder(const char *key, pid_t except)
{
	struct socket_inodes s;
	s.n = name_inodes(key, s.ino, sizeof(s.ino) / sizeof(s.ino[0]));
	return s.n == 0 ? 0 : first_process_with(except, link_is_socket, &s);
}

void prim_process_name(pid_t pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got = fd >= 0 ? read(fd, buf, len - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (got <= 0) {
		snprintf(buf, len, "?");
		return;
	}
	buf[got] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl != NULL)
		*nl = '\0';
}

int prim_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

long prim_sys_read(int fd, void *buf, size_t len) { return prim_syscall(SYS_read, fd, buf, len); }

long prim_sys_pread(int fd, void *buf, size_t len, off_t off)
{
	return prim_syscall(SYS_pread64, fd, buf, len, off);
}

long prim_sys_write(int fd, const void *buf, size_t len) { return prim_syscall(SYS_write, fd, buf, len); }

long prim_sys_sendmsg(int fd, const struct msghdr *m, int flags)
{
	return prim_syscall(SYS_sendmsg, fd, m, flags);
}

long prim_sys_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
		     socklen_t to_len)
{
	return prim_syscall(SYS_sendto, fd, buf, len, flags, to, to_len);
}

int prim_sys_open(const char *path, int flags)
{
	return (int)prim_syscall(SYS_openat, AT_FDCWD, path, flags);
}

int prim_sys_close(int fd) { return (int)prim_syscall(SYS_close, fd); }

int prim_sys_shutdown(int fd, int how) { return (int)prim_syscall(SYS_shutdown, fd, how); }

int prim_sys_fstat(int fd, struct stat *st) { return (int)prim_syscall(SYS_fstat, fd, st); }

long prim_sys_fcntl(int fd, int cmd, long arg) { return prim_syscall(SYS_fcntl, fd, cmd, arg); }

int prim_sys_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	return (int)prim_syscall(SYS_getsockopt, fd, level, name, val, len);
}

int prim_sys_prlimit(int resource, const struct rlimit *set, struct rlimit *old)
{
	return (int)prim_syscall(SYS_prlimit64, 0, resource, set, old);
}

int prim_sys_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
		   const sigset_t *mask)
{
	return (int)prim_syscall(SYS_ppoll, fds, n, timeout, mask, KSIGSET_SIZE);
}

int prim_sys_pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
		     const struct timespec *timeout, const sigset_t *mask)
{
	struct {
		const sigset_t *set;
		size_t size;
	} kmask = { mask, KSIGSET_SIZE };
	return (int)prim_syscall(SYS_pselect6, nfds, rd, wr, ex, timeout, mask != NULL ? &kmask : NULL);
}

int prim_sys_epoll_pwait(int epfd, struct epoll_event *ev, int n, int timeout_ms,
			 const sigset_t *mask)
{
	return (int)prim_syscall(SYS_epoll_pwait, epfd, ev, n, timeout_ms, mask, KSIGSET_SIZE);
}

int prim_sys_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	return (int)prim_syscall(SYS_epoll_ctl, epfd, op, fd, ev);
}

/* glibc's other public name for sigaction(2): preload/ interposes
 * "sigaction" itself and forwards to fault_signal_sigaction, so the
 * runtime's own calls must not go through that symbol. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

int prim_sys_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return __sigaction(sig, act, old);
}

void prim_sys_signal_thread(int sig) { prim_syscall(SYS_tgkill, getpid(), prim_gettid(), sig); }

void prim_sys_queue_signal_thread(int sig, siginfo_t *info)
{
	prim_syscall(SYS_rt_tgsigqueueinfo, getpid(), prim_gettid(), sig, info);
}

int prim_next_data(int fd, off_t from, off_t end, off_t *start, off_t *stop)
{
	if (from >= end)
		return 0;
	off_t d = lseek(fd, from, SEEK_DATA);
	if (d < 0)
		return errno == ENXIO ? 0 : -1;
	if (d >= end)
		return 0;
	off_t h = lseek(fd, d, SEEK_HOLE);
	*start = d;
	/* No hole found: data up to end, which over-counts and never loses
	 * data. */
	*stop = h < 0 || h > end ? end : h;
	return 1;
}

int prim_futex_wait(atomic_uint *addr, unsigned expected, uint64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;
	if (timeout_ns != 0) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000ULL);
		ts.tv_nsec = (long)(timeout_ns % 1000000000ULL);
		tsp = &ts;
	}
	long r = prim_syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, tsp, NULL, 0);
	if (r != 0 && errno == ETIMEDOUT)
		return -1;
	return 0;
}

void prim_futex_wake(atomic_uint *addr, int count)
{
	prim_syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

static _Atomic uint64_t mapped_bytes;

uint64_t prim_mapped_bytes(void) { return atomic_load_explicit(&mapped_bytes, memory_order_relaxed); }

/* The ranges themselves, for prim_mappings: slots claimed and freed with
 * atomics, no lock (a fork child inherits no held lock).  The runtime keeps
 * a few dozen mappings; beyond the table's size a range goes unrecorded.  A
 * slot is free while lo is 0, and read as empty while hi <= lo. */
#define MAPPINGS_MAX 512
static struct {
	_Atomic uintptr_t lo, hi;
} mappings[MAPPINGS_MAX];

static void mapped(void *addr, size_t len)
{
	atomic_fetch_add_explicit(&mapped_bytes, len, memory_order_relaxed);
	for (size_t i = 0; i < MAPPINGS_MAX; i++) {
		uintptr_t free_lo = 0;
		if (atomic_compare_exchange_strong(&mappings[i].lo, &free_lo, (uintptr_t)addr)) {
			atomic_store(&mappings[i].hi, (uintptr_t)addr + len);
			return;
		}
	}
}

static void unmapped(void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	atomic_fetch_sub_explicit(&mapped_bytes, len, memory_order_relaxed);
	for (size_t i = 0; i < MAPPINGS_MAX; i++) {
		uintptr_t mlo = atomic_load(&mappings[i].lo), mhi = atomic_load(&mappings[i].hi);
		if (mlo == 0 || mhi <= mlo || mhi <= lo || mlo >= hi)
			continue;
		if (mlo >= lo && mhi <= hi) {
			atomic_store(&mappings[i].hi, 0);
			atomic_store(&mappings[i].lo, 0);
		} else if (mlo >= lo) {
			atomic_store(&mappings[i].lo, hi);	/* its start unmapped */
		} else if (mhi <= hi) {
			atomic_store(&mappings[i].hi, lo);	/* its end unmapped */
		}
	}
}

size_t prim_mappings(uintptr_t *lo, uintptr_t *hi, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < MAPPINGS_MAX && n < max; i++) {
		uintptr_t mlo = atomic_load(&mappings[i].lo), mhi = atomic_load(&mappings[i].hi);
		if (mlo != 0 && mhi > mlo) {
			lo[n] = mlo;
			hi[n++] = mhi;
		}
	}
	return n;
}

void *prim_map_fixed(void *addr, size_t len)
{
	void *p = mmap(addr, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (p != addr) {
		/* Kernels before 4.17 ignore the flag and treat addr as a hint. */
		munmap(p, len);
		errno = EEXIST;
		return NULL;
	}
	mapped(p, len);
	return p;
}

void *prim_map_any(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	mapped(p, len);
	return p;
}

bool prim_array_grow(void **items, size_t *cap, size_t n, size_t item, size_t first_cap)
{
	size_t c = *cap == 0 ? first_cap : *cap * 2;
	void *e = prim_map_any(c * item);
	if (e == NULL)
		return false;
	if (*items != NULL) {
		memcpy(e, *items, n * item);
		prim_unmap(*items, *cap * item);
	}
	*items = e;
	*cap = c;
	return true;
}

void prim_unmap(void *addr, size_t len)
{
	if (munmap(addr, len) == 0)
		unmapped(addr, len);
}

void *prim_map_device(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void prim_unmap_device(void *addr, size_t len) { munmap(addr, len); }

void *prim_map_file(int fd, size_t len, bool writable, enum prim_file_map how)
{
	int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
	int flags = how == PRIM_MAP_SYNC ? MAP_SHARED_VALIDATE | MAP_SYNC
		    : how == PRIM_MAP_PRIVATE ? MAP_PRIVATE | MAP_NORESERVE
		    : MAP_SHARED;
	void *p = mmap(NULL, len, prot, flags, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

void prim_unmap_file(void *addr, size_t len) { munmap(addr, len); }

int prim_make_private(void *addr, size_t len, bool keep)
{
	void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (tmp == MAP_FAILED)
		return -1;
	if (keep)
		memcpy(tmp, addr, len);
	if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, addr) == MAP_FAILED) {
		int e = errno;
		munmap(tmp, len);
		errno = e;
		return -1;
	}
	return 0;
}

int prim_move_mapping(void *from, size_t len, void *to)
{
	return mremap(from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to) == MAP_FAILED ? -1 : 0;
}

void prim_discard(void *addr, size_t len) { (void)madvise(addr, len, MADV_DONTNEED); }

int prim_protect(void *addr, size_t len, bool writable)
{
	return mprotect(addr, len, writable ? PROT_READ | PROT_WRITE : PROT_READ);
}

void prim_no_huge_pages(void *addr, size_t len) { (void)madvise(addr, len, MADV_NOHUGEPAGE); }

int prim_msync(void *addr, size_t len)
{
	int r;
	do
		r = msync(addr, len, MS_SYNC);
	while (r != 0 && errno == EINTR);
	return r;
}

int prim_uffd_open(bool user_mode_only)
{
	return (int)prim_syscall(SYS_userfaultfd,
			    O_CLOEXEC | O_NONBLOCK | (user_mode_only ? UFFD_USER_MODE_ONLY : 0));
}

int prim_uffd_ioctl(int uffd, unsigned long request, void *arg) { return ioctl(uffd, request, arg); }

long prim_pagemap_scan(int pagemap_fd, struct pm_scan_arg *arg)
{
	return ioctl(pagemap_fd, PAGEMAP_SCAN, arg);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23	/* Linux 5.14 uapi value, for older headers */
#endif

int prim_populate_write(void *addr, size_t len)
{
	/* EINTR: a signal arrived part-way; what is populated stays so. */
	for (;;) {
		int r = madvise(addr, len, MADV_POPULATE_WRITE);
		if (r == 0 || errno != EINTR)
			return r;
	}
}

void prim_yield(void) { sched_yield(); }

bool prim_membarrier_register(void)
{
	long cmds = prim_syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
		return false;
	return prim_syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

int prim_membarrier(void)
{
	return (int)prim_syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

/* Drepper's three-state futex mutex: 0 free, 1 locked, 2 locked with
 * waiters. */
void prim_lock(prim_lock_t *l)
{
	unsigned c = 0;
	if (atomic_compare_exchange_strong_explicit(&l->state, &c, 1, memory_order_acquire,
						    memory_order_relaxed))
		return;
	if (c != 2)
		c = atomic_exchange_explicit(&l->state, 2, memory_order_acquire);
	while (c != 0) {
		prim_futex_wait(&l->state, 2, 0);
		c = atomic_exchange_explicit(&l->state, 2, memory_order_acquire);
	}
}

bool prim_trylock(prim_lock_t *l)
{
	unsigned c = 0;
	return atomic_compare_exchange_strong_explicit(&l->state, &c, 1, memory_order_acquire,
						       memory_order_relaxed);
}

void prim_unlock(prim_lock_t *l)
{
	if (atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2)
		prim_futex_wake(&l->state, 1);
}

void prim_interrupted_sigmask(const void *ucontext, sigset_t *mask)
{
	*mask = ((const ucontext_t *)ucontext)->uc_sigmask;
}

void prim_set_interrupted_sigmask(void *ucontext, const sigset_t *mask)
{
	((ucontext_t *)ucontext)->uc_sigmask = *mask;
}

ssize_t prim_read_file(const char *path, char *buf, size_t len)
{
	int fd = (int)prim_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	long n = prim_syscall(SYS_read, fd, buf, len - 1);
	int e = errno;
	prim_syscall(SYS_close, fd);
	if (n < 0) {
		errno = e;
		return -1;
	}
	buf[n] = '\0';
	return n;
}

ssize_t prim_readlink(const char *path, char *buf, size_t len)
{
	ssize_t n = readlink(path, buf, len - 1);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

bool prim_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
		return false;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 0x01
#endif

int prim_sys_mlock(void *addr, size_t len, bool on_fault)
{
	return (int)prim_syscall(SYS_mlock2, addr, len, on_fault ? MLOCK_ONFAULT : 0);
}

int prim_sys_mlockall(int flags) { return (int)prim_syscall(SYS_mlockall, flags); }

int prim_sys_munlockall(void) { return (int)prim_syscall(SYS_munlockall); }

bool prim_capable_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	if (prim_syscall(SYS_capget, &h, d) != 0)
		return false;
	return (d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) != 0;
}

int prim_get_rlimit(int resource, struct rlimit *rl)
{
	return prim_syscall(SYS_prlimit64, 0, resource, NULL, rl) == 0 ? 0 : -1;
}

/* /proc/self/task/TID/<what> into buf (NUL-terminated, trailing newline
 * cut); its length, or -1. */
static long read_task_file(pid_t tid, const char *what, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, what);
	long n = prim_read_file(path, buf, len);
	if (n < 0)
		return -1;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return n;
}

/* The system calls a thread holding a lock is most often found blocked in.
 * Which exist differs by architecture: the headers say. */
static const struct {
	long nr;
	const char *name;
} blocking_calls[] = {
#define CALL(x) { SYS_##x, #x },
#ifdef SYS_epoll_wait
	CALL(epoll_wait)
#endif
#ifdef SYS_epoll_pwait
	CALL(epoll_pwait)
#endif
#ifdef SYS_epoll_pwait2
	CALL(epoll_pwait2)
#endif
#ifdef SYS_poll
	CALL(poll)
#endif
#ifdef SYS_ppoll
	CALL(ppoll)
#endif
#ifdef SYS_select
	CALL(select)
#endif
#ifdef SYS_pselect6
	CALL(pselect6)
#endif
#ifdef SYS_futex
	CALL(futex)
#endif
#ifdef SYS_read
	CALL(read)
#endif
#ifdef SYS_readv
	CALL(readv)
#endif
#ifdef SYS_recvfrom
	CALL(recvfrom)
#endif
#ifdef SYS_recvmsg
	CALL(recvmsg)
#endif
#ifdef SYS_accept
	CALL(accept)
#endif
#ifdef SYS_accept4
	CALL(accept4)
#endif
#ifdef SYS_connect
	CALL(connect)
#endif
#ifdef SYS_write
	CALL(write)
#endif
#ifdef SYS_nanosleep
	CALL(nanosleep)
#endif
#ifdef SYS_clock_nanosleep
	CALL(clock_nanosleep)
#endif
#ifdef SYS_wait4
	CALL(wait4)
#endif
#ifdef SYS_waitid
	CALL(waitid)
#endif
#ifdef SYS_pause
	CALL(pause)
#endif
#ifdef SYS_rt_sigsuspend
	CALL(rt_sigsuspend)
#endif
#ifdef SYS_rt_sigtimedwait
	CALL(rt_sigtimedwait)
#endif
#ifdef SYS_io_getevents
	CALL(io_getevents)
#endif
#ifdef SYS_io_uring_enter
	CALL(io_uring_enter)
#endif
#ifdef SYS_fsync
	CALL(fsync)
#endif
#ifdef SYS_fdatasync
	CALL(fdatasync)
#endif
#ifdef SYS_flock
	CALL(flock)
#endif
#ifdef SYS_fcntl
	CALL(fcntl)
#endif
#ifdef SYS_msgrcv
	CALL(msgrcv)
#endif
#ifdef SYS_semop
	CALL(semop)
#endif
#ifdef SYS_semtimedop
	CALL(semtimedop)
#endif
#undef CALL
};

void prim_thread_wait_state(pid_t tid, char *buf, size_t len)
{
	char sc[256], wchan[128];
	buf[0] = '\0';
	if (len == 0 || read_task_file(tid, "syscall", sc, sizeof(sc)) <= 0)
		return;
	/* "running", or the number and arguments ("-1 sp pc": in the
	 * kernel, not in a system call). */
	char what[64];
	if (sc[0] < '0' || sc[0] > '9') {
		snprintf(what, sizeof(what), "%s", sc[0] == '-' ? "the kernel" : "running");
	} else {
		long nr = strtol(sc, NULL, 10);
		snprintf(what, sizeof(what), "system call %ld", nr);
		for (size_t i = 0; i < sizeof(blocking_calls) / sizeof(blocking_calls[0]); i++)
			if (blocking_calls[i].nr == nr)
				snprintf(what, sizeof(what), "%s", blocking_calls[i].name);
	}
	if (read_task_file(tid, "wchan", wchan, sizeof(wchan)) > 0 && strcmp(wchan, "0") != 0)
		snprintf(buf, len, "%s (kernel: %s)", what, wchan);
	else
		snprintf(buf, len, "%s", what);
}
