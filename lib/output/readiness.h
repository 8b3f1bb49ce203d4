/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * readiness -- poll, select and epoll do not report writable a descriptor
 * whose held output (output/output.h) is over OUTPUT_ROOM_MARK, and report
 * it again once the release has made room.
 *
 * Owns: the waits made while some descriptor is that full, and what the
 * program registered with epoll_ctl (to suppress and restore EPOLLOUT).
 *
 * Cost: with output commit off, the preload wrappers load one flag.  On,
 * while no queue is over the mark and no registration is suppressed, one
 * more load; epoll_ctl takes a lock and records the registration.  Only
 * while a queue is over the mark do waits come here, and they cost a look at
 * each descriptor asked about (poll, select) or at every recorded
 * registration (epoll).
 *
 * poll/ppoll and select/pselect: POLLOUT (POLLWRNORM, POLLWRBAND) and the
 * write set are taken out for full descriptors, and the wait is made in
 * slices of OUTPUT_READY_TICK_NS; after each the queues are looked at again,
 * so a waiter sees room at most a tick after the release made it.
 *
 * epoll: a registration with EPOLLOUT on a full descriptor is changed
 * (EPOLL_CTL_MOD) to one without it, by the epoll_wait on that instance (or
 * by epoll_ctl, when the program registers a full descriptor), which then
 * waits in ticks; once the queue is under the mark the registration is put
 * back as the program made it.  That EPOLL_CTL_MOD makes the kernel look at
 * the descriptor again, so level- and edge-triggered waiters both get an
 * EPOLLOUT event once there is room.  Not covered: EPOLLONESHOT and
 * EPOLLEXCLUSIVE registrations (left as they are), more than
 * OUTPUT_EPOLL_REGS instances watching one descriptor (reported once), a
 * registration made before output commit was on, and a descriptor that
 * stays registered through a duplicate after close.
 */
#ifndef PMT_OUTPUT_READINESS_H
#define PMT_OUTPUT_READINESS_H

#include "output/output.h"

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#define OUTPUT_READY_TICK_NS 5000000ULL
#define OUTPUT_EPOLL_REGS 4

#ifndef __cplusplus
#include <stdatomic.h>
/* Registrations currently changed to leave EPOLLOUT out. */
extern atomic_int output_suppressed_count __attribute__((visibility("hidden")));

/* poll and select must come here (output_ppoll, output_pselect). */
static inline bool output_poll_needed(void)
{
	return output_active() &&
	       atomic_load_explicit(&output_full_count, memory_order_relaxed) != 0;
}

/* epoll_wait must come here (output_epoll_wait). */
static inline bool output_epoll_needed(void)
{
	return output_active() &&
	       (atomic_load_explicit(&output_full_count, memory_order_relaxed) != 0 ||
		atomic_load_explicit(&output_suppressed_count, memory_order_relaxed) != 0);
}
#endif

/* ppoll(2) with full descriptors not writable.  timeout NULL: none. */
int output_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
		 const sigset_t *mask);

/* pselect(2) with full descriptors not writable.  When left is not NULL it
 * gets the time that was left (select(2) reports it).  Returns false, doing
 * nothing, for nfds above FD_SETSIZE (the caller makes the real call). */
bool output_pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *timeout,
		    const sigset_t *mask, struct timespec *left, int *ret);

/* epoll_pwait2(2) with EPOLLOUT suppressed for full descriptors.  timeout
 * NULL: none. */
int output_epoll_wait(int epfd, struct epoll_event *ev, int n, const struct timespec *timeout,
		      const sigset_t *mask);

/* epoll_ctl(2), recording the registration (output commit on). */
int output_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);

/* fd is being closed: its registrations are the kernel's to drop. */
void output_readiness_forget(int fd);

/* Output commit is being turned off: every suppressed registration is put
 * back as the program made it. */
void output_readiness_restore_all(void);

/* After fork in the child (the epoll instances are shared with the parent,
 * whose runtime keeps managing them). */
void output_readiness_atfork_child(void);

#endif
