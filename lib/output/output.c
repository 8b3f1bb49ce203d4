/* SPDX-License-Identifier: BSD-3-Clause */
/* output -- output commit's queues, stamps and release.  See output.h. */
#include "output/output.h"
#include "output/readiness.h"

#include "base/histogram.h"
#include "base/log.h"
#include "base/own_fds.h"
#include "prim/prim.h"
#include "quiesce/quiesce.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The runtime's own allocator is the program's in malloc mode (and lives in
 * the persistent heap): held bytes come from glibc's. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void __libc_free(void *);

/* One held call's bytes (one datagram on a datagram socket). */
struct chunk {
	struct chunk *next;
	uint64_t stamp;		/* released once durable.mark >= stamp */
	uint64_t t_ns;		/* when the program handed it over */
	size_t len, off;	/* off: already taken by the kernel */
	socklen_t destlen;	/* sendto's address, 0: none */
	struct sockaddr_storage dest;
	void *ctl;		/* sendmsg's ancillary data, its SCM_RIGHTS
				 * descriptors duplicated (ours to close), or
				 * NULL; sent with the chunk's first bytes */
	size_t ctl_len;
	unsigned char data[];
};

enum { KIND_NONE, KIND_SOCK, KIND_FIFO };

struct fdq {
	prim_lock_t lock;
	dev_t dev;		/* the file the queued bytes are for */
	ino_t ino;
	bool is_sock;
	/* The descriptor was made by a call the preload sees (accept, socket,
	 * pipe, ...) and has not been closed or handed to stdio since: every
	 * way it can now name another file passes through output_before_close
	 * (close, dup2, dup3, close_range, closefrom), so its kind is read once
	 * (kept_kind) and not by an fstat per call.  Cleared by forget and
	 * output_fd_handed_off. */
	bool created_seen;
	/* KIND_SOCK / KIND_FIFO once dev, ino, is_sock and is_stream are
	 * known to be the descriptor's file; written under lock, read without
	 * it by a held call (which checks it again under the lock). */
	atomic_uchar kept_kind;
	bool is_stream;		/* a stream socket or a pipe: a non-blocking
				 * call may take part of its bytes */
	atomic_bool full;	/* more than OUTPUT_ROOM_MARK queued: not
				 * reported writable (output/readiness.h) */
	bool close_when_empty;	/* a duplicate made by a close inside a FASE */
	int shutdown_how;	/* a shutdown(2) made inside a FASE, done once
				 * the queue is empty; -1 none */
	int nb_fd;		/* pipe: a non-blocking open of it, or -1 */
	int delayed_err;	/* from a release, for the next call */
	struct chunk *head, *tail;
	atomic_size_t queued;	/* bytes in the queue */
	atomic_uint space;	/* bumped when bytes leave (futex) */
	atomic_int space_waiters;	/* threads in make_room's wait: the
					 * release wakes only when there are
					 * any (a system call per released
					 * chunk otherwise) */
	atomic_int slots;	/* table entries naming this queue beyond the
				 * first: descriptors made by dup, dup2, dup3
				 * share their file's queue, so bytes written
				 * through either leave in the order of the
				 * calls */
};

atomic_bool output_on;
atomic_int output_full_count;
/* The queues by descriptor.  Read without the lock (acquire loads);
 * created, shared by a dup and detached under lock. */
static struct fd_table {
	prim_lock_t lock;
	struct fdq *_Atomic *_Atomic entries;	/* OUTPUT_MAX_FDS of them, mapped
						 * once, under lock */
	atomic_int max_fd;		/* the highest with a queue: only grows
					 * (CAS, under lock) until a fork child */
} fds = { .lock = PRIM_LOCK_INIT, .max_fd = -1 };
PRIM_LOCK_NAMED(fds.lock, fd_table, "output: the table of queues by descriptor", PRIM_FORK_RESET);

/* The queues' own locks, in descriptor order (a queue shared by dup'd
 * descriptors comes once per descriptor).  A fork child forgets the
 * parent's queues (output_atfork_child) and never takes them. */
static prim_lock_t *queue_lock(size_t i)
{
	struct fdq *_Atomic *t = atomic_load_explicit(&fds.entries, memory_order_acquire);
	int top = atomic_load(&fds.max_fd);
	for (int fd = 0; t != NULL && fd <= top; fd++) {
		struct fdq *q = atomic_load_explicit(&t[fd], memory_order_acquire);
		if (q != NULL && i-- == 0)
			return &q->lock;
	}
	return NULL;
}
PRIM_LOCK_KIND(queues, "output: a descriptor's queue of held bytes", PRIM_FORK_RESET, queue_lock);
/* Where the durable image stands, for the held bytes waiting on it: every
 * field atomic, no lock. */
static struct durable {
	_Atomic uint64_t mark;		/* the last pause whose image is durable:
					 * only grows (output_on_durable's CAS) */
	atomic_uint word;		/* bumped with mark and by output_disable
					 * (the futex waiters sleep on) */
	atomic_int waiters;		/* threads in wait_durable: the epoch's
					 * wake-up is made only for them */
	_Atomic uint64_t demanded_for;	/* the latest stamp an epoch was asked
					 * for: only grows (demand's CAS) */
} durable;
/* The thread that sends what a durable epoch covers (release_all), so that
 * the epoch thread goes on to the next quiescent point at once: a send on
 * loopback runs the receiver's side too, and the next epoch's requests
 * would wait for every reply of this one to be sent. */
static struct releaser {
	atomic_uint word;		/* bumped by output_on_durable */
	atomic_int state;		/* RELEASER_NONE, _RUNNING, _FAILED */
	pthread_t thread;
} releaser;
enum { RELEASER_NONE, RELEASER_RUNNING, RELEASER_FAILED };

/* Statistics, under lock: the counters the report shows kept in the
 * report's own struct (the percentiles are filled in by output_get_stats),
 * and the hold-time histogram (base/histogram.h's) with its samples. */
static struct output_counters {
	prim_lock_t lock;
	struct output_stats counts;
	uint64_t holds;
	uint64_t hist[HIST_BUCKETS];
} stats = { .lock = PRIM_LOCK_INIT };
PRIM_LOCK_NAMED(stats.lock, counters, "output: the counters", PRIM_FORK_RESET);
/* Set while this thread is inside output_hold: a signal handler that writes
 * to a pipe (the self-pipe wake-up) while its thread is in here would
 * deadlock on the queue's lock, so such a nested call is not held. */
static __thread bool in_hold __attribute__((tls_model("initial-exec")));
/* Warnings given once per process: each set by the atomic exchange that
 * decides who prints it. */
static struct told {
	atomic_bool over_bound, ancillary, high_fd, stale;
} told;

static void count(uint64_t *field, uint64_t n)
{
	prim_lock(&stats.lock);
	*field += n;
	prim_unlock(&stats.lock);
}

/* ---- descriptors ---- */

static struct fdq *lookup(int fd, bool create)
{
	if (fd < 0 || fd >= OUTPUT_MAX_FDS)
		return NULL;
	struct fdq *_Atomic *t = atomic_load_explicit(&fds.entries, memory_order_acquire);
	if (t == NULL) {
		if (!create)
			return NULL;
		prim_lock(&fds.lock);
		t = atomic_load(&fds.entries);
		if (t == NULL) {
			t = prim_map_any(OUTPUT_MAX_FDS * sizeof(*t));
			if (t == NULL)
				log_fatal("output commit: cannot map the descriptor table");
			atomic_store_explicit(&fds.entries, t, memory_order_release);
		}
		prim_unlock(&fds.lock);
	}
	struct fdq *q = atomic_load_explicit(&t[fd], memory_order_acquire);
	if (q != NULL || !create)
		return q;
	prim_lock(&fds.lock);
	q = atomic_load(&t[fd]);
	if (q == NULL) {
		q = __libc_calloc(1, sizeof(*q));
		if (q == NULL)
			log_fatal("output commit: out of memory for a descriptor's queue");
		q->nb_fd = -1;
		q->shutdown_how = -1;
		atomic_store_explicit(&t[fd], q, memory_order_release);
		int m = atomic_load(&fds.max_fd);
		while (fd > m && !atomic_compare_exchange_weak(&fds.max_fd, &m, fd)) {
		}
	}
	prim_unlock(&fds.lock);
	return q;
}

/* Keep q->full and output_full_count in step with q->queued (q->lock held). */
static void update_full(struct fdq *q)
{
	bool full = atomic_load(&q->queued) > OUTPUT_ROOM_MARK;
	if (full == atomic_load(&q->full))
		return;
	atomic_store(&q->full, full);
	atomic_fetch_add(&output_full_count, full ? 1 : -1);
}

/* The descriptor slots of the SCM_RIGHTS records in ancillary data, one
 * after another: passed_fds_of starts the walk, each next_passed_fd returns
 * the next slot, NULL after the last. */
struct passed_fds {
	struct msghdr m;
	struct cmsghdr *h;
	size_t i, k;
};

static int *next_passed_fd(struct passed_fds *p)
{
	for (;;) {
		if (p->h != NULL && p->i < p->k)
			return (int *)(void *)CMSG_DATA(p->h) + p->i++;
		p->h = p->h == NULL ? CMSG_FIRSTHDR(&p->m) : CMSG_NXTHDR(&p->m, p->h);
		if (p->h == NULL)
			return NULL;
		p->i = 0;
		p->k = p->h->cmsg_level == SOL_SOCKET && p->h->cmsg_type == SCM_RIGHTS
			       ? (p->h->cmsg_len - CMSG_LEN(0)) / sizeof(int)
			       : 0;
	}
}

static struct passed_fds passed_fds_of(void *ctl, size_t len)
{
	return (struct passed_fds){ .m = { .msg_control = ctl, .msg_controllen = len } };
}

/* Close the descriptors an ancillary-data copy holds, and free it. */
static void free_control(void *ctl, size_t len)
{
	if (ctl == NULL)
		return;
	struct passed_fds p = passed_fds_of(ctl, len);
	for (int *fd = next_passed_fd(&p); fd != NULL; fd = next_passed_fd(&p))
		if (*fd >= 0)
			prim_sys_close(*fd);
	__libc_free(ctl);
}

static void free_chunk(struct chunk *c)
{
	free_control(c->ctl, c->ctl_len);
	__libc_free(c);
}

static void note_bytes_left(struct fdq *q)
{
	update_full(q);
	/* Sequentially consistent with make_room's increment of
	 * space_waiters and its read of space: either the waiter reads the
	 * new space (its wait returns at once) or this sees the waiter. */
	atomic_fetch_add(&q->space, 1);
	if (atomic_load(&q->space_waiters) != 0)
		prim_futex_wake(&q->space, INT_MAX);
}

/* Drop every queued chunk (q->lock held). */
static void drop_queue(struct fdq *q)
{
	uint64_t dropped = 0;
	for (struct chunk *c = q->head, *n; c != NULL; c = n) {
		n = c->next;
		dropped += c->len - c->off;
		free_chunk(c);
	}
	q->head = q->tail = NULL;
	atomic_store(&q->queued, 0);
	if (dropped != 0)
		count(&stats.counts.bytes_dropped, dropped);
	note_bytes_left(q);
}

/* Forget the descriptor (q->lock held, queue empty or dropped). */
static void forget(struct fdq *q)
{
	own_fd_close(&q->nb_fd);
	q->dev = 0;
	q->ino = 0;
	q->created_seen = false;
	atomic_store(&q->kept_kind, KIND_NONE);
	q->delayed_err = 0;
	q->close_when_empty = false;
	q->shutdown_how = -1;
}

/* ---- release ---- */

/* One non-blocking send of c's remaining bytes to fd. */
static ssize_t send_chunk(struct fdq *q, int fd, struct chunk *c)
{
	const unsigned char *p = c->data + c->off;
	size_t n = c->len - c->off;
	if (q->is_sock && c->ctl != NULL) {
		struct iovec v = { (void *)p, n };
		struct msghdr m = { .msg_name = c->destlen != 0 ? &c->dest : NULL,
				    .msg_namelen = c->destlen, .msg_iov = &v, .msg_iovlen = 1,
				    .msg_control = c->ctl, .msg_controllen = c->ctl_len };
		long w = prim_sys_sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w >= 0) {
			/* The kernel has its own references to the passed
			 * files now; the rest of the bytes go without. */
			free_control(c->ctl, c->ctl_len);
			c->ctl = NULL;
			c->ctl_len = 0;
		}
		return w;
	}
	if (q->is_sock)
		return prim_sys_sendto(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL,
				       c->destlen != 0 ? (struct sockaddr *)&c->dest : NULL,
				       c->destlen);
	if (q->nb_fd < 0) {
		/* A pipe has no per-call non-blocking flag, and the program's
		 * descriptor's O_NONBLOCK is the program's: open the same pipe
		 * again, non-blocking, for our own writes. */
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		long nb = prim_sys_open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (nb >= 0) {
			q->nb_fd = (int)nb;
			own_fd_keep(&q->nb_fd, "non-blocking open of a pipe for output commit");
		}
	}
	if (q->nb_fd >= 0)
		return prim_sys_write(q->nb_fd, p, n);
	/* No /proc: write no more than the pipe is known to take now. */
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	struct timespec zero = { 0, 0 };
	long r = prim_sys_ppoll(&pfd, 1, &zero, NULL);
	if (r <= 0 || !(pfd.revents & POLLOUT)) {
		if (r >= 0 && (pfd.revents & (POLLERR | POLLHUP))) {
			errno = EPIPE;
			return -1;
		}
		errno = EAGAIN;
		return -1;
	}
	return prim_sys_write(fd, p, n < PIPE_BUF ? n : PIPE_BUF);
}

/* Send what the durable image covers, without blocking (q->lock held).
 * Returns true when nothing releasable is left queued. */
static bool release_fd(struct fdq *q, int fd)
{
	uint64_t mark = atomic_load(&durable.mark);
	bool progressed = false, done = true;
	while (q->head != NULL && q->head->stamp <= mark) {
		struct chunk *c = q->head;
		ssize_t w = send_chunk(q, fd, c);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				done = false;
				break;
			}
			/* The program learns of it on its next call; what it
			 * wrote after can no longer arrive in order. */
			q->delayed_err = errno;
			log_msg(LOG_DEBUG, "output commit: descriptor %d: %s at release; the program's "
				"next call on it returns it", fd, strerror(errno));
			count(&stats.counts.release_errors, 1);
			drop_queue(q);
			progressed = false;
			break;
		}
		c->off += (size_t)w;
		atomic_fetch_sub(&q->queued, (size_t)w);
		progressed = true;
		count(&stats.counts.bytes_released, (uint64_t)w);
		/* A datagram goes whole or not at all. */
		if (c->off < c->len)
			continue;
		uint64_t held = prim_now_ns() - c->t_ns;
		prim_lock(&stats.lock);
		stats.holds++;
		stats.hist[hist_bucket_of(held)]++;
		if (held > stats.counts.hold_ns_max)
			stats.counts.hold_ns_max = held;
		prim_unlock(&stats.lock);
		q->head = c->next;
		if (q->head == NULL)
			q->tail = NULL;
		free_chunk(c);
	}
	if (progressed)
		note_bytes_left(q);
	if (q->head == NULL && q->shutdown_how >= 0) {
		prim_sys_shutdown(fd, q->shutdown_how);
		q->shutdown_how = -1;
	}
	if (q->head == NULL && q->close_when_empty) {
		prim_sys_close(fd);
		forget(q);
	}
	return done;
}

static void demand(uint64_t stamp)
{
	uint64_t d = atomic_load(&durable.demanded_for);
	while (stamp > d) {
		if (atomic_compare_exchange_weak(&durable.demanded_for, &d, stamp)) {
			quiesce_request_epoch();
			count(&stats.counts.epochs_demanded, 1);
			return;
		}
	}
}

/* Wait, outside any FASE, until the image of quiescent point stamp is
 * durable.  False when output commit was turned off meanwhile. */
static bool wait_durable(uint64_t stamp)
{
	while (atomic_load(&durable.mark) < stamp) {
		if (!output_active() || !quiesce_running())
			return false;
		/* Sequentially consistent with output_on_durable's bump and
		 * its read of durable.waiters: the bump is read here, or this
		 * waiter is seen there. */
		atomic_fetch_add(&durable.waiters, 1);
		unsigned seen = atomic_load(&durable.word);
		demand(stamp);
		if (atomic_load(&durable.mark) < stamp)
			prim_futex_wait(&durable.word, seen, 100000000ULL);
		atomic_fetch_sub(&durable.waiters, 1);
	}
	return true;
}

/* Write out, waiting for room in the kernel, what the durable image covers
 * (q->lock not held). */
static void drain_fd(struct fdq *q, int fd)
{
	for (;;) {
		prim_lock(&q->lock);
		bool done = release_fd(q, fd);
		prim_unlock(&q->lock);
		if (done)
			return;
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		struct timespec tick = { 0, 100000000L };
		prim_sys_ppoll(&pfd, 1, &tick, NULL);
	}
}

/* ---- the program's calls ---- */

uint64_t output_stamp_now(void)
{
	return quiesce_pauses() + 1;
}

void output_enable(void)
{
	atomic_store(&output_on, true);
}

void output_disable(void)
{
	atomic_store(&output_on, false);
	output_readiness_restore_all();
	atomic_fetch_add(&durable.word, 1);
	prim_futex_wake(&durable.word, INT_MAX);
}

static bool fstat_held_kind(int fd, struct stat *st)
{
	if (prim_sys_fstat(fd, st) != 0)
		return false;	/* the real call reports EBADF */
	return S_ISSOCK(st->st_mode) || S_ISFIFO(st->st_mode);
}

/* Whether fd is a socket or a pipe (st->st_mode; with its identity when
 * asked of the kernel); *kept: the kind kept in its queue, read without its
 * lock (the release may hold it for a while), to be checked again under the
 * lock (kept_kind_holds). */
static bool held_kind(int fd, struct stat *st, unsigned char *kept)
{
	struct fdq *q = lookup(fd, false);
	*kept = q != NULL ? atomic_load_explicit(&q->kept_kind, memory_order_acquire) : KIND_NONE;
	if (*kept != KIND_NONE) {
		st->st_mode = *kept == KIND_SOCK ? S_IFSOCK : S_IFIFO;
		return true;
	}
	return fstat_held_kind(fd, st);
}

/* The chunk for n bytes, stamped now. */
static struct chunk *new_chunk(size_t n, const struct sockaddr *dest, socklen_t destlen)
{
	struct chunk *c = __libc_malloc(sizeof(*c) + n);
	if (c == NULL)
		return NULL;
	c->next = NULL;
	c->len = n;
	c->off = 0;
	c->t_ns = prim_now_ns();
	c->ctl = NULL;
	c->ctl_len = 0;
	c->destlen = 0;
	if (dest != NULL && destlen > 0 && destlen <= sizeof(c->dest)) {
		memcpy(&c->dest, dest, destlen);
		c->destlen = destlen;
	}
	return c;
}

/* How much of n bytes a non-blocking call may take when the queue has room
 * for fewer: a stream takes what fits, as the kernel does (so a descriptor
 * reported writable never answers EAGAIN); a datagram, or a pipe write of at
 * most PIPE_BUF bytes (atomic), goes whole or not at all. */
static size_t part_that_fits(const struct fdq *q, size_t n, size_t queued)
{
	size_t room = queued < OUTPUT_QUEUE_MAX ? OUTPUT_QUEUE_MAX - queued : 0;
	if (!q->is_stream || (!q->is_sock && n <= PIPE_BUF))
		return 0;
	return room;
}

/* Whether a call on fd with send_flags may not wait: MSG_DONTWAIT or the
 * descriptor's O_NONBLOCK. */
static bool call_nonblocking(int fd, int send_flags)
{
	if (send_flags & MSG_DONTWAIT)
		return true;
	long fl = prim_sys_fcntl(fd, F_GETFL, 0);
	return fl >= 0 && (fl & O_NONBLOCK);
}

/* Make room for *n bytes in q (q->lock held; may drop and retake it); a
 * non-blocking call on a stream may have *n lowered to what fits.  Returns
 * 0, or an errno for the call.  Whether the call may wait is only asked
 * once the queue is full: a system call on every held call otherwise. */
static int make_room(struct fdq *q, int fd, size_t *n, int send_flags)
{
	for (;;) {
		size_t queued = atomic_load(&q->queued);
		if (q->head == NULL || queued + *n <= OUTPUT_QUEUE_MAX)
			return 0;
		if (call_nonblocking(fd, send_flags)) {
			size_t part = part_that_fits(q, *n, queued);
			if (part == 0)
				return EAGAIN;
			*n = part;
			return 0;
		}
		if (fase_depth() != 0) {
			/* Waiting here would wait for an epoch this thread's own
			 * lock keeps from starting. */
			count(&stats.counts.over_bound_in_fase, 1);
			if (!atomic_exchange(&told.over_bound, true))
				log_msg(LOG_WARN, "output commit: a thread holding a lock wrote more "
					"than %u MiB to descriptor %d before it was durable; held "
					"beyond the bound (it cannot wait for an epoch while it holds "
					"the lock)", OUTPUT_QUEUE_MAX >> 20, fd);
			return 0;
		}
		count(&stats.counts.waits_full, 1);
		uint64_t last = q->tail->stamp;
		atomic_fetch_add(&q->space_waiters, 1);
		unsigned seen = atomic_load(&q->space);
		prim_unlock(&q->lock);
		demand(last);
		/* The epoch thread releases after the epoch; the kernel may
		 * take no more then, so try again ourselves now and then. */
		prim_futex_wait(&q->space, seen, 10000000ULL);
		atomic_fetch_sub(&q->space_waiters, 1);
		prim_lock(&q->lock);
		if (q->delayed_err != 0)
			return 0;	/* the caller reports it */
		if (!output_active())
			return 0;
		release_fd(q, fd);
	}
}

/* Report a delayed error as the call's own (q->lock held). */
static ssize_t delayed_error(struct fdq *q, int send_flags)
{
	int e = q->delayed_err;
	q->delayed_err = 0;
	prim_unlock(&q->lock);
	if (e == EPIPE && !(send_flags & MSG_NOSIGNAL))
		raise(SIGPIPE);	/* as the write itself would have */
	errno = e;
	return -1;
}

/* q's file is st's (q->lock held): a queue left for a descriptor that was
 * closed behind our back (fclose) and reused is never sent to the new file. */
static void bind_file(struct fdq *q, int fd, const struct stat *st)
{
	if (q->head != NULL && (q->dev != st->st_dev || q->ino != st->st_ino)) {
		if (!atomic_exchange(&told.stale, true))
			log_msg(LOG_WARN, "output commit: descriptor %d was closed without close(2) "
				"(fclose, close_range?) while output to it was held; that "
				"output is dropped", fd);
		drop_queue(q);
		q->delayed_err = 0;
	}
	if (q->dev != st->st_dev || q->ino != st->st_ino) {
		own_fd_close(&q->nb_fd);
		q->close_when_empty = false;
	}
	if (q->dev != st->st_dev || q->ino != st->st_ino || q->is_sock != S_ISSOCK(st->st_mode)) {
		int type = SOCK_STREAM;
		socklen_t tl = sizeof(type);
		if (S_ISSOCK(st->st_mode) &&
		    prim_sys_getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0)
			type = SOCK_DGRAM;	/* whole or nothing: always correct */
		q->is_stream = type == SOCK_STREAM;
	}
	q->dev = st->st_dev;
	q->ino = st->st_ino;
	q->is_sock = S_ISSOCK(st->st_mode);
	atomic_store_explicit(&q->kept_kind,
			      !q->created_seen ? KIND_NONE : q->is_sock ? KIND_SOCK : KIND_FIFO,
			      memory_order_release);
}

/* Bind q to fd's file (q->lock held): nothing to do when the kind held_kind
 * read (kept) is still kept; asked of the kernel again when a close cleared
 * it meanwhile.  False: fd is not held now (or, with control data, not a
 * socket). */
static bool bind_kind(struct fdq *q, int fd, struct stat *st, unsigned char kept,
		      bool need_sock)
{
	if (kept != KIND_NONE) {
		if (atomic_load(&q->kept_kind) == kept)
			return true;
		if (!fstat_held_kind(fd, st) || (need_sock && !S_ISSOCK(st->st_mode)))
			return false;
	}
	bind_file(q, fd, st);
	return true;
}

/* Hold the bytes of one call (q->lock held, room made); releases the lock. */
static ssize_t enqueue(struct fdq *q, struct chunk *c)
{
	/* Read after the call began (and after the caller's heap writes):
	 * the next quiescent point collects every one of them. */
	c->stamp = output_stamp_now();
	/* Once the lock is released the epoch thread may send and free c. */
	uint64_t stamp = c->stamp;
	size_t len = c->len;
	if (q->tail != NULL)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	atomic_fetch_add(&q->queued, c->len);
	update_full(q);
	prim_unlock(&q->lock);
	prim_lock(&stats.lock);
	stats.counts.writes_held++;
	stats.counts.bytes_held += len;
	prim_unlock(&stats.lock);
	demand(stamp);
	return (ssize_t)len;
}

static bool refuse_fd(int fd)
{
	if (fd >= OUTPUT_MAX_FDS && !atomic_exchange(&told.high_fd, true))
		log_msg(LOG_WARN, "output commit: descriptor %d is above %d; its output is not "
			"held", fd, OUTPUT_MAX_FDS - 1);
	return fd < 0 || fd >= OUTPUT_MAX_FDS;
}

static bool hold(int fd, const struct iovec *iov, int iovcnt, int send_flags,
		 const struct sockaddr *dest, socklen_t destlen, const void *control,
		 size_t controllen, ssize_t *ret);

bool output_hold(int fd, const struct iovec *iov, int iovcnt, int send_flags,
		 const struct sockaddr *dest, socklen_t destlen, ssize_t *ret)
{
	if (!output_active() || in_hold || refuse_fd(fd) || iovcnt < 0 || iovcnt > IOV_MAX)
		return false;
	in_hold = true;
	bool held = hold(fd, iov, iovcnt, send_flags, dest, destlen, NULL, 0, ret);
	int e = errno;
	in_hold = false;
	errno = e;
	return held;
}

/* A copy of ancillary data whose SCM_RIGHTS descriptors are duplicates
 * (the program may close its own before the release), or NULL with errno
 * set. */
static void *copy_control(const void *control, size_t len)
{
	void *ctl = __libc_malloc(len);
	if (ctl == NULL)
		return NULL;
	memcpy(ctl, control, len);
	/* Every slot is rewritten, a duplicate or -1 once one failed, so that
	 * free_control never closes one of the program's own descriptors. */
	bool ok = true;
	struct passed_fds p = passed_fds_of(ctl, len);
	for (int *fd = next_passed_fd(&p); fd != NULL; fd = next_passed_fd(&p)) {
		long d = ok ? prim_sys_fcntl(*fd, F_DUPFD_CLOEXEC, 0) : -1;
		ok = ok && d >= 0;
		*fd = d >= 0 ? (int)d : -1;
	}
	if (!ok) {
		int e = errno;
		free_control(ctl, len);
		errno = e;
		return NULL;
	}
	return ctl;
}

static bool hold(int fd, const struct iovec *iov, int iovcnt, int send_flags,
		 const struct sockaddr *dest, socklen_t destlen, const void *control,
		 size_t controllen, ssize_t *ret)
{
	struct stat st;
	unsigned char kept;
	if (!held_kind(fd, &st, &kept))
		return false;
	if (controllen != 0 && !S_ISSOCK(st.st_mode))
		return false;	/* the kernel says ENOTSOCK */
	size_t n = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > SSIZE_MAX - n)
			return false;	/* the kernel says EINVAL */
		n += iov[i].iov_len;
	}
	if (n == 0)
		return false;	/* nothing to hold (a zero-length datagram goes at once) */
	void *ctl = NULL;
	if (controllen != 0 && (ctl = copy_control(control, controllen)) == NULL)
		return false;	/* the caller sends it now, after the queue */
	struct fdq *q = lookup(fd, true);
	prim_lock(&q->lock);
	if (!bind_kind(q, fd, &st, kept, controllen != 0)) {
		prim_unlock(&q->lock);
		free_control(ctl, controllen);
		return false;
	}
	if (q->delayed_err != 0) {
		free_control(ctl, controllen);
		*ret = delayed_error(q, send_flags);
		return true;
	}
	int e = make_room(q, fd, &n, send_flags);
	if (q->delayed_err != 0) {
		free_control(ctl, controllen);
		*ret = delayed_error(q, send_flags);
		return true;
	}
	struct chunk *c = e == 0 ? new_chunk(n, dest, destlen) : NULL;
	if (c == NULL) {
		prim_unlock(&q->lock);
		free_control(ctl, controllen);
		errno = e != 0 ? e : ENOBUFS;
		*ret = -1;
		return true;
	}
	c->ctl = ctl;
	c->ctl_len = controllen;
	size_t at = 0;
	for (int i = 0; i < iovcnt && at < n; i++) {
		size_t k = iov[i].iov_len < n - at ? iov[i].iov_len : n - at;
		memcpy(c->data + at, iov[i].iov_base, k);
		at += k;
	}
	*ret = enqueue(q, c);
	return true;
}

bool output_hold_msg(int fd, const struct msghdr *m, int send_flags, ssize_t *ret)
{
	if (!output_active() || in_hold || refuse_fd(fd) || m->msg_iovlen > IOV_MAX)
		return false;
	in_hold = true;
	bool held = hold(fd, m->msg_iov, (int)m->msg_iovlen, send_flags, m->msg_name,
			 m->msg_namelen, m->msg_controllen != 0 ? m->msg_control : NULL,
			 m->msg_controllen, ret);
	int e = errno;
	in_hold = false;
	if (!held && m->msg_controllen != 0)
		output_before_unheld(fd);
	errno = e;
	return held;
}

static bool hold_sendfile(int out_fd, int in_fd, off_t *offset, size_t count_, ssize_t *ret);

bool output_hold_sendfile(int out_fd, int in_fd, off_t *offset, size_t count_, ssize_t *ret)
{
	if (!output_active() || in_hold || refuse_fd(out_fd))
		return false;
	in_hold = true;
	bool held = hold_sendfile(out_fd, in_fd, offset, count_, ret);
	int e = errno;
	in_hold = false;
	errno = e;
	return held;
}

static bool hold_sendfile(int out_fd, int in_fd, off_t *offset, size_t count_, ssize_t *ret)
{
	struct stat st;
	unsigned char kept;
	if (!held_kind(out_fd, &st, &kept))
		return false;
	if (count_ > OUTPUT_QUEUE_MAX)
		count_ = OUTPUT_QUEUE_MAX;	/* sendfile may send less */
	struct chunk *c = new_chunk(count_, NULL, 0);
	if (c == NULL) {
		errno = ENOBUFS;
		*ret = -1;
		return true;
	}
	ssize_t r = offset != NULL ? prim_sys_pread(in_fd, c->data, count_, *offset)
				   : prim_sys_read(in_fd, c->data, count_);
	if (r <= 0) {
		free_chunk(c);
		*ret = r;
		return true;
	}
	c->len = (size_t)r;
	struct fdq *q = lookup(out_fd, true);
	prim_lock(&q->lock);
	if (!bind_kind(q, out_fd, &st, kept, false)) {
		/* Closed meanwhile and now another file: give the input its
		 * bytes back and let the real call see what it is. */
		prim_unlock(&q->lock);
		if (offset == NULL)
			prim_lseek(in_fd, -(off_t)r, SEEK_CUR);
		free_chunk(c);
		return false;
	}
	size_t n = c->len;
	int e = q->delayed_err != 0 ? 0 : make_room(q, out_fd, &n, 0);
	if (e == 0 && q->delayed_err == 0 && n < c->len) {
		/* Only part fits: give the input the rest back. */
		if (offset == NULL)
			prim_lseek(in_fd, -(off_t)(c->len - n), SEEK_CUR);
		r = (ssize_t)n;
		c->len = n;
	}
	if (q->delayed_err != 0 || e != 0) {
		/* Nothing was sent: give the input its bytes back. */
		if (offset == NULL)
			prim_lseek(in_fd, -(off_t)r, SEEK_CUR);
		free_chunk(c);
		if (q->delayed_err != 0) {
			*ret = delayed_error(q, 0);
			return true;
		}
		prim_unlock(&q->lock);
		errno = e;
		*ret = -1;
		return true;
	}
	if (offset != NULL)
		*offset += r;
	*ret = enqueue(q, c);
	return true;
}

bool output_fd_full(int fd)
{
	struct fdq *q = lookup(fd, false);
	return q != NULL && atomic_load_explicit(&q->full, memory_order_relaxed);
}

void output_push(int fd)
{
	struct fdq *q = lookup(fd, false);
	if (q == NULL || atomic_load(&q->queued) == 0 || !prim_trylock(&q->lock))
		return;
	release_fd(q, fd);
	prim_unlock(&q->lock);
}

void output_after_dup(int old, int new_)
{
	if (old == new_ || refuse_fd(old) || refuse_fd(new_))
		return;
	struct fdq *q = lookup(old, true);
	struct fdq *_Atomic *t = atomic_load(&fds.entries);
	prim_lock(&fds.lock);
	/* new_'s own queue, if any, was emptied by output_before_close; it
	 * is left unused rather than freed (the epoch thread may be looking
	 * at it). */
	if (atomic_load(&t[new_]) != q) {
		atomic_fetch_add(&q->slots, 1);
		atomic_store_explicit(&t[new_], q, memory_order_release);
		int m = atomic_load(&fds.max_fd);
		while (new_ > m && !atomic_compare_exchange_weak(&fds.max_fd, &m, new_)) {
		}
	}
	prim_unlock(&fds.lock);
}

void output_fd_created(int fd)
{
	if (fd < 0 || fd >= OUTPUT_MAX_FDS)
		return;
	struct fdq *q = lookup(fd, true);
	prim_lock(&q->lock);
	/* A queue left here by a descriptor closed behind our back is bound
	 * again (and dropped) by the first held call's fstat. */
	atomic_store(&q->kept_kind, KIND_NONE);
	q->created_seen = true;
	prim_unlock(&q->lock);
}

void output_fd_handed_off(int fd)
{
	struct fdq *q = lookup(fd, false);
	if (q == NULL)
		return;
	prim_lock(&q->lock);
	q->created_seen = false;
	atomic_store(&q->kept_kind, KIND_NONE);
	prim_unlock(&q->lock);
}

void output_before_close_range(unsigned first, unsigned last)
{
	int top = atomic_load(&fds.max_fd);
	for (long fd = first; fd <= (long)last && fd <= top; fd++)
		output_before_close((int)fd);
}

/* fd was one of several descriptors sharing q: the others keep the queue. */
static bool detach_shared(int fd, struct fdq *q)
{
	prim_lock(&fds.lock);
	bool shared = atomic_load(&q->slots) > 0;
	if (shared) {
		atomic_fetch_sub(&q->slots, 1);
		atomic_store(&atomic_load(&fds.entries)[fd], NULL);
	}
	prim_unlock(&fds.lock);
	return shared;
}

void output_before_close(int fd)
{
	struct fdq *q = lookup(fd, false);
	if (q == NULL || detach_shared(fd, q))
		return;
	prim_lock(&q->lock);
	if (q->head == NULL) {
		forget(q);
		prim_unlock(&q->lock);
		return;
	}
	if (!output_active()) {
		drop_queue(q);	/* after exit's drain: never durable */
		forget(q);
		prim_unlock(&q->lock);
		return;
	}
	if (fase_depth() != 0) {
		/* Inside a FASE the epoch that makes these bytes durable
		 * cannot start before this thread unlocks: hand them to a
		 * duplicate of the descriptor, closed once they are out. */
		long nfd = prim_sys_fcntl(fd, F_DUPFD_CLOEXEC, 0);
		struct fdq *nq = nfd >= 0 ? lookup((int)nfd, true) : NULL;
		if (nq == NULL) {
			log_msg(LOG_WARN, "output commit: cannot keep descriptor %d open for its "
				"held output (%s); dropped", fd, strerror(errno));
			if (nfd >= 0)
				prim_sys_close((int)nfd);
			drop_queue(q);
		} else {
			prim_lock(&nq->lock);
			nq->head = q->head;
			nq->tail = q->tail;
			atomic_store(&nq->queued, atomic_load(&q->queued));
			nq->dev = q->dev;
			nq->ino = q->ino;
			nq->is_sock = q->is_sock;
			nq->is_stream = q->is_stream;
			nq->created_seen = false;
			atomic_store(&nq->kept_kind, KIND_NONE);
			nq->close_when_empty = true;
			prim_unlock(&nq->lock);
			update_full(nq);
			q->head = q->tail = NULL;
			atomic_store(&q->queued, 0);
			update_full(q);
		}
		forget(q);
		prim_unlock(&q->lock);
		return;
	}
	uint64_t last = q->tail->stamp;
	prim_unlock(&q->lock);
	if (wait_durable(last))
		drain_fd(q, fd);
	prim_lock(&q->lock);
	drop_queue(q);	/* what could not be released: an error, or shutdown */
	forget(q);
	prim_unlock(&q->lock);
}

void output_before_unheld(int fd)
{
	struct fdq *q = lookup(fd, false);
	if (q == NULL || atomic_load(&q->queued) == 0)
		return;
	if (!atomic_exchange(&told.ancillary, true))
		log_msg(LOG_WARN, "output commit: a send with ancillary data (descriptor %d) could "
			"not be held (no data bytes, or its descriptors could not be duplicated)%s",
			fd, fase_depth() != 0 ? ", and overtakes the output held "
			"before it (the sender holds a lock)" : "");
	if (fase_depth() != 0)
		return;
	prim_lock(&q->lock);
	uint64_t last = q->tail != NULL ? q->tail->stamp : 0;
	prim_unlock(&q->lock);
	if (last != 0 && wait_durable(last))
		drain_fd(q, fd);
}

bool output_before_shutdown(int fd, int how)
{
	struct fdq *q = lookup(fd, false);
	if (q == NULL || how == SHUT_RD)
		return false;
	prim_lock(&q->lock);
	if (q->head == NULL) {
		prim_unlock(&q->lock);
		return false;
	}
	if (fase_depth() != 0) {
		/* Cannot wait for the epoch: the release shuts the socket
		 * down once the queue is empty (reading still works now). */
		if (how == SHUT_RDWR)
			prim_sys_shutdown(fd, SHUT_RD);
		q->shutdown_how = SHUT_WR;
		prim_unlock(&q->lock);
		return true;
	}
	uint64_t last = q->tail->stamp;
	prim_unlock(&q->lock);
	if (wait_durable(last))
		drain_fd(q, fd);
	return false;
}

static void release_all(void)
{
	int top = atomic_load(&fds.max_fd);
	for (int fd = 0; fd <= top; fd++) {
		struct fdq *q = lookup(fd, false);
		if (q == NULL || atomic_load_explicit(&q->queued, memory_order_relaxed) == 0)
			continue;
		prim_lock(&q->lock);
		release_fd(q, fd);
		prim_unlock(&q->lock);
	}
}

static void *releaser_main(void *arg)
{
	(void)arg;
	for (;;) {
		unsigned seen = atomic_load(&releaser.word);
		release_all();
		while (atomic_load(&releaser.word) == seen)
			prim_futex_wait(&releaser.word, seen, 0);
	}
	return NULL;
}

/* The releaser, started by the first durable epoch with output commit on;
 * false when there is none (it could not be created: the epoch thread
 * releases itself, as it did before there was one). */
static bool releaser_ready(void)
{
	int st = atomic_load(&releaser.state);
	if (st == RELEASER_RUNNING)
		return true;
	if (st == RELEASER_FAILED || !atomic_load(&output_on))
		return false;
	/* Only the epoch thread (and shutdown after it) gets here. */
	int e = quiesce_create_internal_thread(&releaser.thread, releaser_main, NULL);
	if (e != 0) {
		log_msg(LOG_DEBUG, "output commit: no release thread (%s); the epoch thread "
			"sends held output itself", strerror(e));
		atomic_store(&releaser.state, RELEASER_FAILED);
		return false;
	}
	atomic_store(&releaser.state, RELEASER_RUNNING);
	return true;
}

void output_on_durable(uint64_t pause)
{
	uint64_t m = atomic_load(&durable.mark);
	while (pause > m && !atomic_compare_exchange_weak(&durable.mark, &m, pause)) {
	}
	atomic_fetch_add(&durable.word, 1);
	if (atomic_load(&durable.waiters) != 0)
		prim_futex_wake(&durable.word, INT_MAX);
	if (!releaser_ready()) {
		release_all();
		return;
	}
	atomic_fetch_add(&releaser.word, 1);
	prim_futex_wake(&releaser.word, 1);
}

void output_drain_all(void)
{
	int top = atomic_load(&fds.max_fd);
	uint64_t lost = 0;
	for (int fd = 0; fd <= top; fd++) {
		struct fdq *q = lookup(fd, false);
		if (q == NULL || atomic_load(&q->queued) == 0)
			continue;
		drain_fd(q, fd);
		prim_lock(&q->lock);
		for (struct chunk *c = q->head; c != NULL; c = c->next)
			lost += c->len - c->off;
		drop_queue(q);
		prim_unlock(&q->lock);
	}
	if (lost != 0)
		log_msg(LOG_WARN, "output commit: %llu bytes of output were never covered by a "
			"durable epoch at exit and are not sent", (unsigned long long)lost);
}

void output_atfork_child(void)
{
	atomic_store(&output_on, false);
	/* The parent's queues stay the parent's: forget them (their memory
	 * is the child's copy, left as is). */
	atomic_store(&fds.entries, NULL);
	atomic_store(&fds.max_fd, -1);
	atomic_store(&output_full_count, 0);
	/* The parent's release thread is not the child's. */
	atomic_store(&releaser.state, RELEASER_NONE);
	output_readiness_atfork_child();
}

void output_epoch_columns(bool *demanded, uint64_t *released)
{
	static uint64_t last_demanded, last_released;
	prim_lock(&stats.lock);
	*demanded = stats.counts.epochs_demanded != last_demanded;
	*released = stats.counts.bytes_released - last_released;
	last_demanded = stats.counts.epochs_demanded;
	last_released = stats.counts.bytes_released;
	prim_unlock(&stats.lock);
}

void output_get_stats(struct output_stats *st)
{
	prim_lock(&stats.lock);
	*st = stats.counts;
	st->hold_ns_p50 = hist_percentile(stats.hist, stats.holds, 50, st->hold_ns_max);
	st->hold_ns_p99 = hist_percentile(stats.hist, stats.holds, 99, st->hold_ns_max);
	prim_unlock(&stats.lock);
}
