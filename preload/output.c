/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * output -- the calls that write to sockets and pipes, and those that end a
 * descriptor, forwarded to lib/output (output commit, PMTHREADS_OUTPUT).
 *
 * With output commit off each wrapper is one load and the real call.  On,
 * lib/output decides per call whether the descriptor is held (sockets and
 * pipes) and, when it is, owns the bytes from then on; otherwise the real
 * call runs.  shutdown, close, dup2 and dup3 first release what the descriptor being
 * ended holds; dup, dup2, dup3 and fcntl F_DUPFD make the copy share the original's
 * queue.  Ancillary data is held with its message (output.h).
 *
 * close, dup, dup2, dup3 and fcntl F_DUPFD* treat the runtime's own
 * descriptors as never opened, and dup2/dup3 onto one first move it away
 * (lib/base/own_fds.h).
 */
/* sendfile and sendfile64 are separate symbols to interpose; with 64-bit
 * file offsets the header would make both names sendfile64. */
#undef _FILE_OFFSET_BITS

#include "base/export.h"
#include "real.h"
#include "runtime/interpose.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

PMT_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	if (output_active()) {
		struct iovec v = { (void *)buf, n };
		ssize_t r;
		if (output_hold(fd, &v, 1, 0, NULL, 0, &r))
			return r;
	}
	return REAL(write)(fd, buf, n);
}

PMT_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	ssize_t r;
	if (output_active() && output_hold(fd, iov, n, 0, NULL, 0, &r))
		return r;
	return REAL(writev)(fd, iov, n);
}

PMT_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	if (output_active()) {
		struct iovec v = { (void *)buf, n };
		ssize_t r;
		if (output_hold(fd, &v, 1, flags, NULL, 0, &r))
			return r;
	}
	return REAL(send)(fd, buf, n, flags);
}

PMT_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			  const struct sockaddr *to, socklen_t tolen)
{
	if (output_active()) {
		struct iovec v = { (void *)buf, n };
		ssize_t r;
		if (output_hold(fd, &v, 1, flags, to, tolen, &r))
			return r;
	}
	return REAL(sendto)(fd, buf, n, flags, to, tolen);
}

PMT_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	ssize_t r;
	if (output_active() && m != NULL && output_hold_msg(fd, m, flags, &r))
		return r;
	return REAL(sendmsg)(fd, m, flags);
}

/* The kernel writes each message's msg_len (lib/runtime/syscall_outputs.tab). */
static int sendmmsg_pinned(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	int r;
	PREFAULT_SYSCALL(r, SYS_sendmmsg, REAL(sendmmsg)(fd, v, n, flags), (unsigned long)fd,
			 (unsigned long)v, n, (unsigned long)flags);
	return r;
}

PMT_EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	if (!output_active() || v == NULL || n == 0)
		return sendmmsg_pinned(fd, v, n, flags);
	unsigned sent = 0;
	for (; sent < n; sent++) {
		ssize_t r;
		if (!output_hold_msg(fd, &v[sent].msg_hdr, flags, &r)) {
			if (sent != 0)
				break;	/* the caller sends the rest again */
			return sendmmsg_pinned(fd, v, n, flags);
		}
		if (r < 0) {
			if (sent != 0)
				break;
			return -1;
		}
		v[sent].msg_len = (unsigned)r;
	}
	return (int)sent;
}

PMT_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	ssize_t r;
	if (output_active() && output_hold_sendfile(out_fd, in_fd, offset, count, &r))
		return r;
	PREFAULT_SYSCALL(r, SYS_sendfile, REAL(sendfile)(out_fd, in_fd, offset, count),
			 (unsigned long)out_fd, (unsigned long)in_fd, (unsigned long)offset, count);
	return r;
}

PMT_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	ssize_t r;
	if (output_active() &&
	    output_hold_sendfile(out_fd, in_fd, (off_t *)offset, count, &r))
		return r;
	PREFAULT_SYSCALL(r, SYS_sendfile, REAL(sendfile64)(out_fd, in_fd, offset, count),
			 (unsigned long)out_fd, (unsigned long)in_fd, (unsigned long)offset, count);
	return r;
}

PMT_EXPORT int shutdown(int fd, int how)
{
	if (output_active() && output_before_shutdown(fd, how))
		return 0;
	return REAL(shutdown)(fd, how);
}

/* The runtime's descriptor fd, to a call that must not see it: EBADF. */
static bool refuse_ours(int fd)
{
	if (!runtime_fd_is_own(fd))
		return false;
	errno = EBADF;
	return true;
}

PMT_EXPORT int close(int fd)
{
	if (refuse_ours(fd))
		return -1;
	if (output_active()) {
		output_before_close(fd);
		output_readiness_forget(fd);
	}
	return REAL(close)(fd);
}

PMT_EXPORT int dup(int old)
{
	if (refuse_ours(old))
		return -1;
	int r = REAL(dup)(old);
	if (output_active() && r >= 0)
		output_after_dup(old, r);
	return r;
}

/* fcntl's third argument is an int, a pointer or absent: passed on as the
 * long it occupies (what glibc's own fcntl reads). */
static int dup_by_fcntl(int (*real)(int, int, ...), int fd, int cmd, long arg)
{
	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && refuse_ours(fd))
		return -1;
	int r;
	PREFAULT_SYSCALL(r, SYS_fcntl, real(fd, cmd, arg), (unsigned long)fd, (unsigned long)cmd,
			 (unsigned long)arg);
	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && r >= 0 && output_active())
		output_after_dup(fd, r);
	return r;
}

PMT_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	long arg = va_arg(ap, long);
	va_end(ap);
	return dup_by_fcntl(REAL(fcntl), fd, cmd, arg);
}

PMT_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	long arg = va_arg(ap, long);
	va_end(ap);
	return dup_by_fcntl(REAL(fcntl64), fd, cmd, arg);
}

PMT_EXPORT int dup2(int old, int new_)
{
	if (refuse_ours(old))
		return -1;
	if (old != new_ && runtime_fd_vacate(new_) != 0)
		return -1;
	if (output_active() && old != new_)
		output_before_close(new_);
	int r = REAL(dup2)(old, new_);
	if (output_active() && r >= 0)
		output_after_dup(old, r);
	return r;
}

PMT_EXPORT int dup3(int old, int new_, int flags)
{
	if (refuse_ours(old))
		return -1;
	if (old != new_ && runtime_fd_vacate(new_) != 0)
		return -1;
	if (output_active() && old != new_)
		output_before_close(new_);
	int r = REAL(dup3)(old, new_, flags);
	if (output_active() && r >= 0)
		output_after_dup(old, r);
	return r;
}
