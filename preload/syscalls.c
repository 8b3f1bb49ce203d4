/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syscalls -- the system calls and stdio functions that write user memory
 * and need more than forwarding.  The plain ones are generated from
 * lib/runtime/syscall_outputs.tab (syscall_wrappers.c in the build
 * directory: the read and recv families, the stat family, wait, uname,
 * ioctl, syscall(2), ...); the table names every one, and the file of each
 * hand-written wrapper.
 *
 * Here: accept and accept4 (the new descriptor is output commit's), the
 * epoll/poll event arrays (and, under output commit, their writability:
 * lib/output/readiness.h), stdio reads, and the libc functions that fill a
 * buffer of their own (opendir/fdopendir, getcwd(NULL)).
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
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

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

/* ---- accepted connections ---- */

/* The new connection is a descriptor output commit has seen made
 * (output/output.h, "Which descriptors"). */
PMT_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	int r;
	PREFAULT_SYSCALL(r, SYS_accept, REAL(accept)(fd, addr, len), (unsigned long)fd,
			 (unsigned long)addr, (unsigned long)len);
	if (r >= 0 && output_active())
		output_fd_created(r);
	return r;
}

PMT_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	int r;
	PREFAULT_SYSCALL(r, SYS_accept4, REAL(accept4)(fd, addr, len, flags), (unsigned long)fd,
			 (unsigned long)addr, (unsigned long)len, (unsigned long)flags);
	if (r >= 0 && output_active())
		output_fd_created(r);
	return r;
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
