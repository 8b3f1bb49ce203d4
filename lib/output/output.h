/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * output -- output commit: what the program writes to sockets and pipes is
 * held until the heap state it may depend on is durable.
 *
 * Owns: the per-descriptor queues of held bytes, their stamps, their release
 * to the kernel, errors the kernel returned at release (delivered later as
 * delayed errors), back-pressure, and the output statistics.
 *
 * Stamping: bytes handed over at time t get the number the next quiescent
 * point will get (quiesce_pauses() + 1, read after the call began: every
 * heap write the program made before the call is in that point's image).
 * They are released once a durable image of a point numbered at least that
 * exists (output_on_durable), never before, in the order they were written
 * per descriptor.  While bytes wait, an epoch is demanded
 * (quiesce_request_epoch) so a reply waits about one pause and one
 * write-back, not the interval.
 *
 * The queues live outside the persistent heap (mmap'd chunks): after a
 * crash they are gone, as unacknowledged output must be.
 *
 * Which descriptors: sockets and pipes (fstat S_ISSOCK / S_ISFIFO);
 * regular files, ttys and the rest pass through.  The kind is asked at
 * every call, so a descriptor closed behind our back (fclose of an fdopen'd
 * socket, a raw close system call) and reused is seen for what it is now --
 * except for a descriptor made by a call the preload sees (accept, accept4,
 * socket, socketpair, pipe, pipe2: output_fd_created) and since then neither
 * closed nor given to fdopen (output_fd_handed_off): its kind is read once
 * and kept in its queue until close, dup2/dup3 onto it, close_range or
 * closefrom (all through output_before_close).  Only a close the preload
 * cannot see (syscall(SYS_close), io_uring) followed by reuse of the number
 * would be misread then.  The queue remembers the file's (st_dev, st_ino) and a released
 * chunk goes only to that same file.  A descriptor made by dup, dup2, dup3
 * or fcntl F_DUPFD shares the queue of the one it copies (one inherited
 * through fork or passed with SCM_RIGHTS does not).  Sends with ancillary data are held
 * too, with a copy of it in which the SCM_RIGHTS descriptors are duplicates
 * (the program may close its own before the release), closed once the
 * kernel has taken the message; one that cannot be (no data bytes, no
 * descriptor left for the duplicates) is sent at once, after what the
 * descriptor holds outside a FASE, and reported once.  stdio writes through glibc's internal write are not seen, except stdout's
 * when it is a pipe or a socket (output/stdout.h).  A call
 * made by a signal handler that interrupted its thread inside this module
 * is not held (the queue's lock is taken); one made elsewhere in a handler
 * is, and allocates from glibc's malloc.
 *
 * Back-pressure: at most OUTPUT_QUEUE_MAX bytes per descriptor.  A full
 * queue makes a non-blocking call (O_NONBLOCK or MSG_DONTWAIT) fail with
 * EAGAIN -- or, on a stream socket or a pipe write above PIPE_BUF, take the
 * part that fits -- and a blocking one wait for room, outside any FASE
 * only.  poll, select and epoll do not report a descriptor writable while
 * more than OUTPUT_ROOM_MARK is held (output/readiness.h).  A
 * thread that holds a lock cannot wait for an epoch (no quiescent point can
 * be reached while it holds it): its bytes are queued beyond the bound, and
 * that is reported once.
 *
 * Release runs after each durable epoch on the release thread (started by
 * the first durable epoch with output commit on; the epoch thread itself if
 * it cannot be created), so that the next quiescent point need not wait
 * for this one's replies to be sent, with non-blocking sends (a pipe through a non-blocking open of /proc/self/fd);
 * what the kernel does not take stays queued, first, and is tried again
 * after the next epoch or by a thread waiting on that descriptor.  An error
 * (EPIPE, ECONNRESET, ...) drops that descriptor's queue and is returned by
 * the program's next held call on it.
 *
 * shutdown(2) of the write side waits the same way (inside a FASE it is
 * done by the release, after the bytes).  close of a descriptor with held bytes waits until they are durable and
 * written (outside a FASE); inside one the queue is moved to a duplicate
 * descriptor the release closes once it is empty.  Exit (output_drain_all
 * after the final epoch) writes what the final durable image covers.
 */
#ifndef PMT_OUTPUT_H
#define PMT_OUTPUT_H

#include "base/stats_fields.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#define OUTPUT_QUEUE_MAX (4u << 20)
/* A descriptor with more than this held is not reported writable by poll,
 * select or epoll (output/readiness.h): writable promises room for at least
 * half the bound, as the kernel's own sockets promise a third. */
#define OUTPUT_ROOM_MARK (OUTPUT_QUEUE_MAX / 2)
/* Descriptors above this are passed through (reported once). */
#define OUTPUT_MAX_FDS 65536

#ifndef __cplusplus
#include <stdatomic.h>
/* Output commit is on (the preload wrappers test this first). */
extern atomic_bool output_on __attribute__((visibility("hidden")));
static inline bool output_active(void)
{
	return atomic_load_explicit(&output_on, memory_order_relaxed);
}
/* How many descriptors have more than OUTPUT_ROOM_MARK held. */
extern atomic_int output_full_count __attribute__((visibility("hidden")));
#endif

/* fd was just made by accept, accept4, socket, socketpair, pipe or pipe2:
 * its kind may be kept from its first held call until it is closed. */
void output_fd_created(int fd);
/* fd was given to stdio (fdopen), which may close it without close(2):
 * its kind is asked at every call again. */
void output_fd_handed_off(int fd);
/* close_range / closefrom of [first, last] (not CLOSE_RANGE_CLOEXEC):
 * output_before_close of each descriptor in it. */
void output_before_close_range(unsigned first, unsigned last);

/* fd has more than OUTPUT_ROOM_MARK bytes held (not writable, for poll). */
bool output_fd_full(int fd);

/* Send what the durable image covers of fd's queue now, without blocking
 * (a waiter for room does not wait for the next epoch to retry bytes the
 * kernel could not take at the last release).  Skipped when another thread
 * has the queue. */
void output_push(int fd);

/* Turn holding on / off.  output_disable does not release anything. */
void output_enable(void);
void output_disable(void);

/* Hold bytes written to fd.  nonblock: the call may not wait (MSG_DONTWAIT;
 * the descriptor's O_NONBLOCK is read here).  dest: a sendto address to keep
 * with them (NULL: none).  Returns true when the call was handled, with *ret
 * what it returns (bytes taken, or -1 with errno set); false when fd is not
 * held (not a socket or pipe, or output commit is off): the caller does the
 * real call. */
bool output_hold(int fd, const struct iovec *iov, int iovcnt, int send_flags,
		 const struct sockaddr *dest, socklen_t destlen, ssize_t *ret);

/* sendmsg(2): output_hold with the message's address and ancillary data.
 * Returns false when the caller must make the real call (after, outside a
 * FASE, the descriptor's held bytes were released). */
bool output_hold_msg(int fd, const struct msghdr *m, int send_flags, ssize_t *ret);

/* sendfile(2) to a held descriptor: reads count bytes from in_fd (at
 * *offset when offset is not NULL, advancing it; else at its file position)
 * and holds them.  Same return convention as output_hold. */
bool output_hold_sendfile(int out_fd, int in_fd, off_t *offset, size_t count, ssize_t *ret);

/* fd is about to be closed (or replaced by dup2/dup3): release what it holds
 * first (see the header comment).  Then the descriptor is forgotten. */
void output_before_close(int fd);

/* new_ was made from old by dup, dup2, dup3 or fcntl F_DUPFD (after output_before_close
 * of new_ for the last two): from now on both share old's queue. */
void output_after_dup(int old, int new_);

/* A call on fd that is not held (a send with ancillary data that could not
 * be) is about to be made: outside a FASE, first release what fd holds (waiting for it to be
 * durable), so the order is kept; reported once. */
void output_before_unheld(int fd);

/* shutdown(fd, how) is about to be called.  Outside a FASE: releases what
 * fd holds first (waiting for it to be durable) and returns false (the
 * caller shuts down).  Inside one, with bytes held: the write side is shut
 * down by the release once they are out (a read side at once) and this
 * returns true (the call returns 0). */
bool output_before_shutdown(int fd, int how);

/* The epoch thread, after an epoch whose image is durable: pause is its
 * number (quiesce_current_pause).  Releases what that covers. */
void output_on_durable(uint64_t pause);

/* At exit, after the final epoch: write (blocking) every chunk the latest
 * durable image covers, and report what could not be released. */
void output_drain_all(void);

/* After fork in the child: the parent's queues are the parent's; the child
 * never holds (it has no pool). */
void output_atfork_child(void);

/* X(kind, field, report key): base/stats_fields.h. */
#define OUTPUT_STATS_FIELDS(X) \
	X(count, writes_held, "output_writes_held") /* calls held, in all */ \
	X(count, bytes_held, "output_bytes_held") \
	X(count, bytes_released, "output_bytes_released") \
	/* a release error, or never durable at exit */ \
	X(count, bytes_dropped, "output_bytes_dropped") \
	X(count, epochs_demanded, "output_epochs_demanded") /* quiesce_request_epoch calls */ \
	X(count, waits_full, "output_waits_full") /* blocking calls that waited for room */ \
	X(count, over_bound_in_fase, "output_over_bound_in_fase") /* calls queued beyond the bound */ \
	X(count, release_errors, "output_release_errors") /* delayed errors recorded */ \
	/* from the call to the bytes' release, per held call (histogram upper \
	 * bounds, <= 12.5 % high) */ \
	X(value, hold_ns_p50, "output_hold_ns_p50") \
	X(value, hold_ns_p99, "output_hold_ns_p99") \
	X(value, hold_ns_max, "output_hold_ns_max")

struct output_stats {
	OUTPUT_STATS_FIELDS(STATS_DECLARE)
};
void output_get_stats(struct output_stats *st);

/* The epoch log's columns (epoch_log_set_output): whether an epoch was
 * demanded, and the bytes released, since the previous call.  Called by the
 * epoch thread only. */
void output_epoch_columns(bool *demanded, uint64_t *released);

/* For the unit test: the stamp a call made now would get. */
uint64_t output_stamp_now(void);

#endif
