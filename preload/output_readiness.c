/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * output_readiness -- select, pselect and epoll_ctl forwarded to
 * lib/output/readiness (output commit: a descriptor whose held output is
 * full is not reported writable); sets in the heap waited on through
 * copies (below).  epoll_wait, epoll_pwait, epoll_pwait2,
 * poll and ppoll are in syscalls.c (they also pre-fault their arrays).
 *
 * With output commit off each wrapper is one load and the real call.
 */
#include "base/export.h"
#include "heap/heap.h"
#include "output/readiness.h"
#include "real.h"
#include "track/fault_signal.h"

#include <sys/epoll.h>
#include <errno.h>
#include <string.h>
#include <sys/select.h>

/* select and pselect write their sets back when they return -- after a
 * timeout or a signal too, select its time left as well -- and an epoch may
 * write-protect them again while they wait (the caller is outside any FASE):
 * the kernel's write then fails with EFAULT after the call consumed its
 * timeout or its signal.  As poll's array (syscalls.c), sets and a time
 * value in the heap are passed as copies on the stack and stored back by
 * ordinary stores.  Sets for more descriptors than the copies hold are
 * passed as they are. */
enum { SELECT_COPY_SETS = 8 };	/* 8192 descriptors, 1 KiB a set */

struct select_copies {
	fd_set *orig[3];
	fd_set copy[3][SELECT_COPY_SETS];
	size_t bytes;
	struct timeval *tv_orig;
	struct timeval tv;
};

static void copies_in(struct select_copies *c, int n, fd_set **sets[3], struct timeval **tv)
{
	c->bytes = n > 0 ? ((size_t)n + 63) / 64 * 8 : 0;
	for (int i = 0; i < 3; i++) {
		c->orig[i] = NULL;
		fd_set *s = *sets[i];
		if (s == NULL || c->bytes == 0 || c->bytes > sizeof(c->copy[i]) || !heap_contains(s))
			continue;
		memcpy(c->copy[i], s, c->bytes);
		c->orig[i] = s;
		*sets[i] = c->copy[i];
	}
	c->tv_orig = NULL;
	if (tv != NULL && *tv != NULL && heap_contains(*tv)) {
		c->tv = **tv;
		c->tv_orig = *tv;
		*tv = &c->tv;
	}
}

static void copies_out(const struct select_copies *c)
{
	int e = errno;
	for (int i = 0; i < 3; i++)
		if (c->orig[i] != NULL)
			memcpy(c->orig[i], c->copy[i], c->bytes);
	if (c->tv_orig != NULL)
		*c->tv_orig = c->tv;
	errno = e;
}

static int select_as_given(int n, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	if (output_poll_needed()) {
		struct timespec t, left;
		if (tv != NULL) {
			t.tv_sec = tv->tv_sec;
			t.tv_nsec = tv->tv_usec * 1000L;
		}
		int r;
		if (output_pselect(n, rd, wr, ex, tv != NULL ? &t : NULL, NULL, &left, &r)) {
			if (tv != NULL && r >= 0) {	/* Linux reports the time left */
				tv->tv_sec = left.tv_sec;
				tv->tv_usec = left.tv_nsec / 1000;
			}
			return r;
		}
	}
	return REAL(select)(n, rd, wr, ex, tv);
}

PMT_EXPORT int select(int n, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	struct select_copies c;
	fd_set **sets[3] = { &rd, &wr, &ex };
	copies_in(&c, n, sets, &tv);
	int r = select_as_given(n, rd, wr, ex, tv);
	copies_out(&c);
	return r;
}

static int pselect_as_given(int n, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *t,
			    const sigset_t *mask)
{
	struct select_copies c;
	fd_set **sets[3] = { &rd, &wr, &ex };
	copies_in(&c, n, sets, NULL);
	int r;
	if (!output_poll_needed() || !output_pselect(n, rd, wr, ex, t, mask, NULL, &r))
		r = REAL(pselect)(n, rd, wr, ex, t, mask);
	copies_out(&c);
	return r;
}

/* SIGSEGV's blocking for the call's duration is emulated (fault_signal.h). */
PMT_EXPORT int pselect(int n, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *t,
		       const sigset_t *mask)
{
	struct fault_signal_call c;
	if (!fault_signal_call_begin(&c, mask)) {
		errno = EINTR;
		return -1;
	}
	int r = pselect_as_given(n, rd, wr, ex, t, c.mask);
	int e = errno;
	fault_signal_call_end(&c);
	errno = e;
	return r;
}

PMT_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (output_active())
		return output_epoll_ctl(epfd, op, fd, ev);
	return REAL(epoll_ctl)(epfd, op, fd, ev);
}
