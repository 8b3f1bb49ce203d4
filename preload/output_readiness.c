/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * output_readiness -- select, pselect and epoll_ctl forwarded to
 * lib/output/readiness (output commit: a descriptor whose held output is
 * full is not reported writable); sets in the heap waited on through
 * copies (lib/runtime/prefault.h).  epoll_wait, epoll_pwait, epoll_pwait2,
 * poll and ppoll are in syscalls.c (they also pre-fault their arrays).
 *
 * With output commit off each wrapper is one load and the real call.
 */
#include "base/export.h"
#include "real.h"
#include "runtime/interpose.h"

#include <sys/epoll.h>
#include <errno.h>
#include <sys/select.h>

/* Sets in the heap are waited on through copies (prefault.h). */
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
	struct prefault_select_copies c;
	fd_set **sets[3] = { &rd, &wr, &ex };
	prefault_select_copies_in(&c, n, sets, &tv);
	int r = select_as_given(n, rd, wr, ex, tv);
	prefault_select_copies_out(&c);
	return r;
}

static int pselect_as_given(int n, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *t,
			    const sigset_t *mask)
{
	struct prefault_select_copies c;
	fd_set **sets[3] = { &rd, &wr, &ex };
	prefault_select_copies_in(&c, n, sets, NULL);
	int r;
	if (!output_poll_needed() || !output_pselect(n, rd, wr, ex, t, mask, NULL, &r))
		r = REAL(pselect)(n, rd, wr, ex, t, mask);
	prefault_select_copies_out(&c);
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
