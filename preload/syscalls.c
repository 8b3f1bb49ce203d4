/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syscalls -- system calls and stdio functions that write user memory,
 * forwarded with the EFAULT policy of lib/runtime/prefault.h (a buffer in
 * the heap pre-faulted, the call retried; poll's array through a copy).
 *
 * Covered: the read and recv families, epoll/poll event arrays (and, under
 * output commit, their writability: lib/output/readiness.h), stdio reads,
 * accept/getsockname/getpeername/getsockopt, readlink, getrandom, the stat
 * family and statx; opendir/fdopendir and getcwd(NULL) keep the buffers they
 * fill themselves in glibc's heap.  A system call made any other way (a raw
 * syscall(2), ioctl, another libc function's internal call) into a clean
 * heap page still fails with EFAULT under the mprotect tracker (never under
 * uffd).
 */
/* pread and pread64 (preadv, preadv64) are separate symbols to interpose;
 * with 64-bit file offsets the header would make both names pread64. */
#undef _FILE_OFFSET_BITS

#include "base/export.h"
#include "preload.h"
#include "real.h"
#include "runtime/interpose.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static ssize_t read_once(int fd, void *buf, size_t n)
{
	PREFAULT_RETURN(ssize_t, prefault_range(buf, n), REAL(read)(fd, buf, n));
}

static ssize_t pread_once(int fd, void *buf, size_t n, off64_t off)
{
	PREFAULT_RETURN(ssize_t, prefault_range(buf, n), REAL(pread64)(fd, buf, n, off));
}

/* The rest of a read cut short by a write-protected page (prefault.h);
 * an error or the end of the file after some bytes is what got says. */
PMT_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	ssize_t got = read_once(fd, buf, n), more;
	while (prefault_read_on(fd, got, n, buf) &&
	       (more = read_once(fd, (char *)buf + got, n - (size_t)got)) > 0)
		got += more;
	return got;
}

PMT_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
	ssize_t got = pread_once(fd, buf, n, off), more;
	while (prefault_read_on(fd, got, n, buf) &&
	       (more = pread_once(fd, (char *)buf + got, n - (size_t)got, off + got)) > 0)
		got += more;
	return got;
}

PMT_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	return pread64(fd, buf, n, (off64_t)off);
}

PMT_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	PREFAULT_RETURN(ssize_t, prefault_iov(iov, n), REAL(readv)(fd, iov, n));
}

PMT_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int n, off_t off)
{
	PREFAULT_RETURN(ssize_t, prefault_iov(iov, n), REAL(preadv)(fd, iov, n, off));
}

PMT_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int n, off64_t off)
{
	PREFAULT_RETURN(ssize_t, prefault_iov(iov, n), REAL(preadv64)(fd, iov, n, off));
}

PMT_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	PREFAULT_RETURN(ssize_t, prefault_range(buf, n), REAL(recv)(fd, buf, n, flags));
}

PMT_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from,
			    socklen_t *fromlen)
{
	PREFAULT_RETURN(ssize_t,
			prefault_range(buf, n) |
				(from != NULL && fromlen != NULL && prefault_range(from, *fromlen)),
			REAL(recvfrom)(fd, buf, n, flags, from, fromlen));
}

PMT_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	PREFAULT_RETURN(ssize_t, prefault_msg(m), REAL(recvmsg)(fd, m, flags));
}

PMT_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *t)
{
	bool any = false;
	for (unsigned i = 0; i < n; i++)
		any |= prefault_msg(&v[i].msg_hdr);
	int r;
	int round = 0;
	for (;;) {
		r = REAL(recvmmsg)(fd, v, n, flags, t);
		if (!prefault_again(r, any, &round))
			return r;
		for (unsigned i = 0; i < n; i++)
			prefault_msg(&v[i].msg_hdr);
	}
}

/* Event loops (libevent: memcached) keep the event arrays that epoll_wait and
 * poll fill in malloc'd memory.  The kernel reports EFAULT before it takes an
 * event off the ready list (epoll re-queues it; poll is level-triggered), so
 * the retry loses nothing.  Under output commit, while a descriptor's held
 * output is full, the wait is lib/output/readiness's (never writable then). */
PMT_EXPORT int epoll_wait(int fd, struct epoll_event *ev, int n, int timeout)
{
	struct timespec t = { timeout / 1000, (timeout % 1000) * 1000000L };
	const struct timespec *tp = timeout < 0 ? NULL : &t;
	PREFAULT_RETURN(int, prefault_range(ev, n > 0 ? (size_t)n * sizeof(*ev) : 0),
			output_epoll_needed() ? output_epoll_wait(fd, ev, n, tp, NULL)
					      : REAL(epoll_wait)(fd, ev, n, timeout));
}

static int epoll_pwait_as_given(int fd, struct epoll_event *ev, int n, int timeout,
				const sigset_t *mask)
{
	struct timespec t = { timeout / 1000, (timeout % 1000) * 1000000L };
	const struct timespec *tp = timeout < 0 ? NULL : &t;
	PREFAULT_RETURN(int, prefault_range(ev, n > 0 ? (size_t)n * sizeof(*ev) : 0),
			output_epoll_needed() ? output_epoll_wait(fd, ev, n, tp, mask)
					      : REAL(epoll_pwait)(fd, ev, n, timeout, mask));
}

static int epoll_pwait2_as_given(int fd, struct epoll_event *ev, int n, const struct timespec *t,
				 const sigset_t *mask)
{
	PREFAULT_RETURN(int, prefault_range(ev, n > 0 ? (size_t)n * sizeof(*ev) : 0),
			output_epoll_needed() ? output_epoll_wait(fd, ev, n, t, mask)
					      : REAL(epoll_pwait2)(fd, ev, n, t, mask));
}

/* CALL with the mask the kernel gets in place of mask: SIGSEGV's blocking
 * for the call's duration is emulated (fault_signal.h). */
#define WITH_CALL_MASK(mask, CALL)                      \
	do {                                            \
		struct fault_signal_call c_;            \
		if (!fault_signal_call_begin(&c_, mask)) { \
			errno = EINTR;                  \
			return -1;                      \
		}                                       \
		const sigset_t *kmask_ = c_.mask;       \
		int r_ = (CALL);                        \
		int e_ = errno;                         \
		fault_signal_call_end(&c_);             \
		errno = e_;                             \
		return r_;                              \
	} while (0)

PMT_EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int n, int timeout,
			   const sigset_t *mask)
{
	WITH_CALL_MASK(mask, epoll_pwait_as_given(fd, ev, n, timeout, kmask_));
}

PMT_EXPORT int epoll_pwait2(int fd, struct epoll_event *ev, int n, const struct timespec *t,
			    const sigset_t *mask)
{
	WITH_CALL_MASK(mask, epoll_pwait2_as_given(fd, ev, n, t, kmask_));
}

/* Heap arrays through a copy (prefault.h). */
PMT_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	struct timespec t = { timeout / 1000, (timeout % 1000) * 1000000L };
	if (prefault_poll_through_copy(fds, n)) {
		struct pollfd copy[PREFAULT_POLL_COPY_MAX];
		memcpy(copy, fds, n * sizeof(*fds));
		int r = output_poll_needed() ? output_ppoll(copy, n, timeout < 0 ? NULL : &t, NULL)
					     : REAL(poll)(copy, n, timeout);
		prefault_poll_copy_back(fds, copy, n);
		return r;
	}
	PREFAULT_RETURN(int, prefault_range(fds, n * sizeof(*fds)),
			output_poll_needed() ? output_ppoll(fds, n, timeout < 0 ? NULL : &t, NULL)
					     : REAL(poll)(fds, n, timeout));
}

static int ppoll_as_given(struct pollfd *fds, nfds_t n, const struct timespec *t,
			  const sigset_t *mask)
{
	if (prefault_poll_through_copy(fds, n)) {
		struct pollfd copy[PREFAULT_POLL_COPY_MAX];
		memcpy(copy, fds, n * sizeof(*fds));
		int r = output_poll_needed() ? output_ppoll(copy, n, t, mask)
					     : REAL(ppoll)(copy, n, t, mask);
		prefault_poll_copy_back(fds, copy, n);
		return r;
	}
	PREFAULT_RETURN(int, prefault_range(fds, n * sizeof(*fds)),
			output_poll_needed() ? output_ppoll(fds, n, t, mask)
					     : REAL(ppoll)(fds, n, t, mask));
}

PMT_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t,
		     const sigset_t *mask)
{
	WITH_CALL_MASK(mask, ppoll_as_given(fds, n, t, kmask_));
}

/* stdio reads into the buffer with a read(2) of its own (prefault.h). */
PMT_EXPORT size_t fread(void *buf, size_t size, size_t n, FILE *f)
{
	return prefault_fread(REAL(fread), REAL(fread_unlocked), buf, size, n, f, false);
}

#undef fread_unlocked
PMT_EXPORT size_t fread_unlocked(void *buf, size_t size, size_t n, FILE *f)
{
	return prefault_fread(REAL(fread), REAL(fread_unlocked), buf, size, n, f, true);
}

/* glibc declares fgets's buffer write-only, so GCC takes heap_contains (a
 * const void * parameter) for a read of it; only its address is used. */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
PMT_EXPORT char *fgets(char *buf, int n, FILE *f)
{
	if (n > 0)
		prefault_range(buf, (size_t)n);
	return REAL(fgets)(buf, n, f);
}

/* ---- socket addresses, links, random bytes, file status ---- */

static int accept_prefaulted(int fd, struct sockaddr *addr, socklen_t *len)
{
	PREFAULT_RETURN(int, prefault_addr(addr, len), REAL(accept)(fd, addr, len));
}

static int accept4_prefaulted(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	PREFAULT_RETURN(int, prefault_addr(addr, len), REAL(accept4)(fd, addr, len, flags));
}

/* The new connection is a descriptor output commit has seen made
 * (output/output.h, "Which descriptors"). */
PMT_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	int r = accept_prefaulted(fd, addr, len);
	if (r >= 0 && output_active())
		output_fd_created(r);
	return r;
}

PMT_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	int r = accept4_prefaulted(fd, addr, len, flags);
	if (r >= 0 && output_active())
		output_fd_created(r);
	return r;
}

PMT_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	PREFAULT_RETURN(int, prefault_addr(addr, len), REAL(getsockname)(fd, addr, len));
}

PMT_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	PREFAULT_RETURN(int, prefault_addr(addr, len), REAL(getpeername)(fd, addr, len));
}

PMT_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	PREFAULT_RETURN(int, prefault_addr(val, len), REAL(getsockopt)(fd, level, name, val, len));
}

PMT_EXPORT ssize_t readlink(const char *path, char *buf, size_t n)
{
	PREFAULT_RETURN(ssize_t, prefault_range(buf, n), REAL(readlink)(path, buf, n));
}

PMT_EXPORT ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t n)
{
	PREFAULT_RETURN(ssize_t, prefault_range(buf, n), REAL(readlinkat)(dirfd, path, buf, n));
}

PMT_EXPORT ssize_t getrandom(void *buf, size_t n, unsigned flags)
{
	PREFAULT_RETURN(ssize_t, prefault_range(buf, n), REAL(getrandom)(buf, n, flags));
}

/* Since glibc 2.33 stat & co. are exported functions (older binaries call
 * __xstat, which goes through the same system call from glibc: those are not
 * covered).  A program built with _FILE_OFFSET_BITS=64 calls the *64 names,
 * which are wrapped on their own: on 64-bit ABIs glibc makes them aliases of
 * the same functions, on 32-bit ones struct stat64 is a different struct. */
PMT_EXPORT int stat(const char *path, struct stat *st)
{
	PREFAULT_RETURN(int, prefault_range(st, sizeof(*st)), REAL(stat)(path, st));
}

PMT_EXPORT int fstat(int fd, struct stat *st)
{
	PREFAULT_RETURN(int, prefault_range(st, sizeof(*st)), REAL(fstat)(fd, st));
}

PMT_EXPORT int lstat(const char *path, struct stat *st)
{
	PREFAULT_RETURN(int, prefault_range(st, sizeof(*st)), REAL(lstat)(path, st));
}

PMT_EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	PREFAULT_RETURN(int, prefault_range(st, sizeof(*st)),
			REAL(fstatat)(dirfd, path, st, flags));
}

PMT_EXPORT int stat64(const char *path, struct stat64 *st)
{
	PREFAULT_RETURN(int, prefault_range(st, sizeof(*st)), REAL(stat64)(path, st));
}

PMT_EXPORT int fstat64(int fd, struct stat64 *st)
{
	PREFAULT_RETURN(int, prefault_range(st, sizeof(*st)), REAL(fstat64)(fd, st));
}

PMT_EXPORT int lstat64(const char *path, struct stat64 *st)
{
	PREFAULT_RETURN(int, prefault_range(st, sizeof(*st)), REAL(lstat64)(path, st));
}

PMT_EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	PREFAULT_RETURN(int, prefault_range(st, sizeof(*st)),
			REAL(fstatat64)(dirfd, path, st, flags));
}

PMT_EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *st)
{
	PREFAULT_RETURN(int, prefault_range(st, sizeof(*st)),
			REAL(statx)(dirfd, path, flags, mask, st));
}

/* ---- libc functions that allocate a buffer and fill it themselves ---- */

/* getcwd(NULL, n) mallocs the result and has the kernel write into it; a
 * current directory is no program state, so that buffer comes from glibc
 * (free() routes it back by address). */
PMT_EXPORT char *getcwd(char *buf, size_t n)
{
	if (buf == NULL) {
		preload_libc_alloc_begin();
		char *r = REAL(getcwd)(NULL, n);
		preload_libc_alloc_end();
		return r;
	}
	return prefault_getcwd(REAL(getcwd), buf, n);
}

/* A DIR and its entry buffer are filled by glibc's own getdents64, and
 * meaningless after a restart: glibc's heap (closedir frees by address). */
PMT_EXPORT DIR *opendir(const char *path)
{
	preload_libc_alloc_begin();
	DIR *d = REAL(opendir)(path);
	preload_libc_alloc_end();
	return d;
}

PMT_EXPORT DIR *fdopendir(int fd)
{
	preload_libc_alloc_begin();
	DIR *d = REAL(fdopendir)(fd);
	preload_libc_alloc_end();
	return d;
}
