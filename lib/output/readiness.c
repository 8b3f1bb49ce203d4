/* SPDX-License-Identifier: BSD-3-Clause */
/* readiness -- writability that waits for held output.  See readiness.h. */
#include "output/readiness.h"

#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

#define OUT_BITS (EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND)
#define POLL_OUT_BITS (POLLOUT | POLLWRNORM | POLLWRBAND)

/* One epoll_ctl registration of a descriptor, as the program made it. */
struct epreg {
	int epfd;
	bool suppressed;	/* registered without OUT_BITS for now */
	uint32_t events;
	epoll_data_t data;
};

struct fdregs {
	unsigned n;
	struct epreg r[OUTPUT_EPOLL_REGS];
};

atomic_int output_suppressed_count;
static struct fdregs *regs;	/* OUTPUT_MAX_FDS entries, mapped at the first epoll_ctl */
static int regs_top = -1;
static prim_lock_t ep_lock = PRIM_LOCK_INIT;
PRIM_LOCK_NAMED(ep_lock, epoll_regs, "output/readiness: the epoll registrations",
		PRIM_FORK_RESET);
static atomic_bool told_regs_full;

/* ---- time ---- */

/* The deadline for timeout (UINT64_MAX: none). */
static uint64_t deadline_of(const struct timespec *timeout)
{
	if (timeout == NULL)
		return UINT64_MAX;
	if (timeout->tv_sec < 0 || timeout->tv_nsec < 0)
		return prim_now_ns();	/* the kernel says EINVAL at once */
	return prim_now_ns() + (uint64_t)timeout->tv_sec * 1000000000ULL + (uint64_t)timeout->tv_nsec;
}

/* The next wait: to the deadline, or a tick when sliced. */
static struct timespec *slice(uint64_t deadline, bool sliced, const struct timespec *timeout,
			      struct timespec *buf)
{
	if (timeout != NULL && (timeout->tv_sec < 0 || timeout->tv_nsec < 0)) {
		*buf = *timeout;	/* the kernel reports it */
		return buf;
	}
	uint64_t now = prim_now_ns();
	uint64_t left = deadline == UINT64_MAX ? UINT64_MAX : deadline > now ? deadline - now : 0;
	if (sliced && left > OUTPUT_READY_TICK_NS)
		left = OUTPUT_READY_TICK_NS;
	if (left == UINT64_MAX)
		return NULL;
	buf->tv_sec = (time_t)(left / 1000000000ULL);
	buf->tv_nsec = (long)(left % 1000000000ULL);
	return buf;
}

static bool expired(uint64_t deadline)
{
	return deadline != UINT64_MAX && prim_now_ns() >= deadline;
}

/* fd's queue is over the mark, after sending what is durable of it. */
static bool full_now(int fd)
{
	if (!output_fd_full(fd))
		return false;
	output_push(fd);
	return output_fd_full(fd);
}

/* ---- poll and select ---- */

int output_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
		 const sigset_t *mask)
{
	struct pollfd small[64];
	struct pollfd *work = small;
	if (n > sizeof(small) / sizeof(small[0])) {
		work = n <= SIZE_MAX / sizeof(*work) ? __libc_malloc(n * sizeof(*work)) : NULL;
		if (work == NULL)
			return prim_sys_ppoll(fds, n, timeout, mask);
	}
	uint64_t deadline = deadline_of(timeout);
	long r;
	for (;;) {
		bool sliced = false;
		for (nfds_t i = 0; i < n; i++) {
			work[i] = fds[i];
			if (fds[i].fd >= 0 && (fds[i].events & POLL_OUT_BITS) &&
			    full_now(fds[i].fd)) {
				work[i].events &= (short)~POLL_OUT_BITS;
				sliced = true;
			}
		}
		struct timespec ts;
		r = prim_sys_ppoll(work, n, slice(deadline, sliced, timeout, &ts), mask);
		if (r != 0 || !sliced || expired(deadline))
			break;
	}
	if (r >= 0)
		for (nfds_t i = 0; i < n; i++)
			fds[i].revents = work[i].revents;
	int e = errno;
	if (work != small)
		__libc_free(work);
	errno = e;
	return (int)r;
}

bool output_pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *timeout,
		    const sigset_t *mask, struct timespec *left, int *ret)
{
	if (nfds < 0 || nfds > FD_SETSIZE)
		return false;
	uint64_t deadline = deadline_of(timeout);
	fd_set r_, w_, e_;
	long r;
	for (;;) {
		bool sliced = false;
		if (rd != NULL)
			r_ = *rd;
		if (ex != NULL)
			e_ = *ex;
		if (wr != NULL) {
			w_ = *wr;
			for (int fd = 0; fd < nfds; fd++)
				if (FD_ISSET(fd, wr) && full_now(fd)) {
					FD_CLR(fd, &w_);
					sliced = true;
				}
		}
		struct timespec ts;
		r = prim_sys_pselect(nfds, rd != NULL ? &r_ : NULL, wr != NULL ? &w_ : NULL,
				     ex != NULL ? &e_ : NULL, slice(deadline, sliced, timeout, &ts),
				     mask);
		if (r != 0 || !sliced || expired(deadline))
			break;
	}
	if (r >= 0) {
		if (rd != NULL)
			*rd = r_;
		if (wr != NULL)
			*wr = w_;
		if (ex != NULL)
			*ex = e_;
	}
	if (left != NULL && timeout != NULL) {
		uint64_t now = prim_now_ns();
		uint64_t l = deadline > now ? deadline - now : 0;
		left->tv_sec = (time_t)(l / 1000000000ULL);
		left->tv_nsec = (long)(l % 1000000000ULL);
	}
	*ret = (int)r;
	return true;
}

/* ---- epoll ---- */

static bool suppressible(uint32_t events)
{
	return (events & OUT_BITS) && !(events & (EPOLLONESHOT | EPOLLEXCLUSIVE));
}

/* Make reg's registration in the kernel match whether fd is full now
 * (ep_lock held).  Returns whether it is suppressed. */
static bool align(int fd, struct epreg *e)
{
	bool want = suppressible(e->events) && output_active() &&
		    (e->suppressed ? full_now(fd) : output_fd_full(fd));
	if (want != e->suppressed) {
		struct epoll_event ev = { want ? e->events & ~(uint32_t)OUT_BITS : e->events, e->data };
		long r = prim_sys_epoll_ctl(e->epfd, EPOLL_CTL_MOD, fd, &ev);
		/* A failed put-back: the registration is gone (the program
		 * closed the descriptor or the instance); nothing to restore. */
		if (r == 0 || !want) {
			e->suppressed = want;
			atomic_fetch_add(&output_suppressed_count, want ? 1 : -1);
		}
	}
	return e->suppressed;
}

/* Align every registration on epfd (epfd -1: all); returns whether one on
 * epfd stays suppressed. */
static bool align_instance(int epfd)
{
	bool any = false;
	prim_lock(&ep_lock);
	for (int fd = 0; fd <= regs_top; fd++)
		for (unsigned i = 0; i < regs[fd].n; i++)
			if (epfd < 0 || regs[fd].r[i].epfd == epfd)
				any |= align(fd, &regs[fd].r[i]);
	prim_unlock(&ep_lock);
	return any;
}

int output_epoll_wait(int epfd, struct epoll_event *ev, int n, const struct timespec *timeout,
		      const sigset_t *mask)
{
	uint64_t deadline = deadline_of(timeout);
	for (;;) {
		bool sliced = align_instance(epfd);
		struct timespec ts;
		const struct timespec *t = slice(deadline, sliced, timeout, &ts);
		/* epoll_pwait takes milliseconds: round up, never spin. */
		long ms = -1;
		if (t != NULL)
			ms = t->tv_sec < 0 || t->tv_nsec < 0 ? -1 :
			     (long)t->tv_sec * 1000 + (t->tv_nsec + 999999) / 1000000;
		long r = prim_sys_epoll_pwait(epfd, ev, n, (int)ms, mask);
		if (r != 0 || !sliced || expired(deadline))
			return (int)r;
	}
}

static struct epreg *find(int epfd, int fd)
{
	if (regs == NULL || fd > regs_top)
		return NULL;
	for (unsigned i = 0; i < regs[fd].n; i++)
		if (regs[fd].r[i].epfd == epfd)
			return &regs[fd].r[i];
	return NULL;
}

static void drop(int fd, struct epreg *e)
{
	if (e->suppressed)
		atomic_fetch_sub(&output_suppressed_count, 1);
	*e = regs[fd].r[--regs[fd].n];
}

int output_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (fd < 0 || fd >= OUTPUT_MAX_FDS || (op != EPOLL_CTL_DEL && ev == NULL))
		return prim_sys_epoll_ctl(epfd, op, fd, ev);
	prim_lock(&ep_lock);
	if (regs == NULL) {
		regs = prim_map_any((size_t)OUTPUT_MAX_FDS * sizeof(*regs));
		if (regs == NULL)
			log_fatal("output commit: cannot map the epoll registration table");
	}
	struct epreg *e = find(epfd, fd);
	long r;
	if (op == EPOLL_CTL_DEL) {
		r = prim_sys_epoll_ctl(epfd, op, fd, ev);
		if (r == 0 && e != NULL)
			drop(fd, e);
		prim_unlock(&ep_lock);
		return (int)r;
	}
	bool want = suppressible(ev->events) && output_fd_full(fd);
	struct epoll_event pass = *ev;
	if (want)
		pass.events &= ~(uint32_t)OUT_BITS;
	r = prim_sys_epoll_ctl(epfd, op, fd, &pass);
	if (r == 0 && (op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD)) {
		if (e == NULL && regs[fd].n < OUTPUT_EPOLL_REGS) {
			e = &regs[fd].r[regs[fd].n++];
			e->epfd = epfd;
			e->suppressed = false;
			if (fd > regs_top)
				regs_top = fd;
		} else if (e == NULL && !atomic_exchange(&told_regs_full, true)) {
			log_msg(LOG_WARN, "output commit: descriptor %d is watched by more than %d "
				"epoll instances; epoll may report it writable while its held "
				"output is full", fd, OUTPUT_EPOLL_REGS);
		}
		if (e != NULL) {
			e->events = ev->events;
			e->data = ev->data;
			if (e->suppressed != want)
				atomic_fetch_add(&output_suppressed_count, want ? 1 : -1);
			e->suppressed = want;
		}
	}
	prim_unlock(&ep_lock);
	return (int)r;
}

void output_readiness_forget(int fd)
{
	if (fd < 0 || fd >= OUTPUT_MAX_FDS)
		return;
	prim_lock(&ep_lock);
	while (regs != NULL && fd <= regs_top && regs[fd].n != 0)
		drop(fd, &regs[fd].r[regs[fd].n - 1]);
	prim_unlock(&ep_lock);
}

void output_readiness_restore_all(void)
{
	if (atomic_load(&output_suppressed_count) != 0)
		align_instance(-1);
}

void output_readiness_atfork_child(void)
{
	regs = NULL;
	regs_top = -1;
	atomic_store(&output_suppressed_count, 0);
}
