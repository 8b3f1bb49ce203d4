/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * output_fds -- the calls that make or end descriptors, forwarded to
 * lib/output so output commit may keep a descriptor's kind (socket, pipe) in
 * its queue instead of asking the kernel at every held call (output.h,
 * "Which descriptors").  accept and accept4 are in syscalls.c (they prefault
 * their arguments).
 *
 * socket, socketpair, pipe and pipe2 report the descriptors they made;
 * fdopen hands one to stdio, which may close it without close(2);
 * close_range and closefrom end many at once, each released like close,
 * and close only the numbers around the runtime's own (lib/base/own_fds.h).
 */
#include "base/export.h"
#include "real.h"
#include "runtime/interpose.h"

#include <linux/close_range.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

PMT_EXPORT int socket(int domain, int type, int protocol)
{
	int r = REAL(socket)(domain, type, protocol);
	if (r >= 0 && output_active())
		output_fd_created(r);
	return r;
}

PMT_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	int r;
	PREFAULT_SYSCALL(r, SYS_socketpair, REAL(socketpair)(domain, type, protocol, sv),
			 (unsigned long)domain, (unsigned long)type, (unsigned long)protocol,
			 (unsigned long)sv);
	if (r == 0 && output_active()) {
		output_fd_created(sv[0]);
		output_fd_created(sv[1]);
	}
	return r;
}

PMT_EXPORT int pipe(int fds[2])
{
	int r;
	PREFAULT_SYSCALL(r, SYS_pipe2, REAL(pipe)(fds), (unsigned long)fds, 0);
	if (r == 0 && output_active()) {
		output_fd_created(fds[0]);
		output_fd_created(fds[1]);
	}
	return r;
}

PMT_EXPORT int pipe2(int fds[2], int flags)
{
	int r;
	PREFAULT_SYSCALL(r, SYS_pipe2, REAL(pipe2)(fds, flags), (unsigned long)fds,
			 (unsigned long)flags);
	if (r == 0 && output_active()) {
		output_fd_created(fds[0]);
		output_fd_created(fds[1]);
	}
	return r;
}

PMT_EXPORT FILE *fdopen(int fd, const char *mode)
{
	if (output_active())
		output_fd_handed_off(fd);
	return REAL(fdopen)(fd, mode);
}

static void before_range(unsigned first, unsigned last)
{
	output_before_close_range(first, last);
	int top = last < OUTPUT_MAX_FDS ? (int)last : OUTPUT_MAX_FDS - 1;
	for (long fd = first; fd <= top; fd++)
		output_readiness_forget((int)fd);
}

static int close_gap(unsigned first, unsigned last, int flags)
{
	return REAL(close_range)(first, last, flags);
}

PMT_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	if (output_active() && !(flags & CLOSE_RANGE_CLOEXEC) && first <= last)
		before_range(first, last);
	return runtime_fd_close_range(first, last, flags, close_gap);
}

/* The part above the runtime's highest descriptor is glibc's closefrom,
 * which works without close_range too (/proc/self/fd). */
static int closefrom_gap(unsigned first, unsigned last, int flags)
{
	if (last != ~0u)
		return REAL(close_range)(first, last, flags);
	REAL(closefrom)((int)first);
	return 0;
}

PMT_EXPORT void closefrom(int low)
{
	if (low < 0) {
		REAL(closefrom)(low);
		return;
	}
	if (output_active())
		before_range((unsigned)low, ~0u);
	(void)runtime_fd_close_range((unsigned)low, ~0u, 0, closefrom_gap);
}
