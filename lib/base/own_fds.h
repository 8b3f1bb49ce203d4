/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * own_fds -- the runtime's descriptors, kept out of the program's way.
 *
 * Owns: which descriptors of the process are the runtime's (the pool file,
 * which also holds its OFD lock; the epoch log; /proc/self/pagemap and the
 * userfaultfd of the trackers; the restorer's eventfd; the saved standard
 * error of the report; output commit's non-blocking pipe opens), where
 * their numbers are, and what the program's descriptor calls do to them.
 *
 * Programs close descriptors they never opened: close_range(3, ~0U) or
 * closefrom(3) at start (varnishd), a close() of every number below the
 * limit, a walk of /proc/self/fd closing what it finds, dup2 onto a number
 * they consider free.  Without care each of these ends one of ours and the
 * number then names one of the program's files.  So:
 *   - own_fd_keep moves a descriptor near the top of the numbers the
 *     program may use (below min(soft RLIMIT_NOFILE, OWN_FD_TOP), found
 *     with F_DUPFD_CLOEXEC: nothing can go above the soft limit without
 *     changing the program's limit, and a high number makes the kernel's
 *     descriptor table, which fork copies, that large), out of the way of
 *     the lowest-free numbering that open, socket, pipe and dup use;
 *   - close() of one of ours fails with EBADF, as for a number never
 *     opened; close_range and closefrom close the numbers around ours;
 *     dup, dup2, dup3 and fcntl F_DUPFD* from one of ours fail with EBADF;
 *   - dup2 or dup3 onto one of ours first moves ours to another number
 *     (the registered variables are rewritten), then lets the call happen;
 *   - a lower RLIMIT_NOFILE leaves open descriptors open (the kernel only
 *     refuses new numbers above it): ours stay where they are.
 * They stay visible to calls that only look (fstat, fcntl F_GETFD, a
 * /proc/self/fd listing): pmthreads(7) says so.
 *
 * A descriptor may be held in several variables (the pool's and its nvm
 * mapping's): each is registered, and all are rewritten on a move.  The
 * calls here use raw system calls, never the interposed wrappers.  Queries
 * (own_fd_is, own_fd_close_range) take no lock and are async-signal-safe;
 * registration and moves serialise on one lock.
 */
#ifndef PMT_OWN_FDS_H
#define PMT_OWN_FDS_H

#include <stdbool.h>

/* Ours go just below min(soft RLIMIT_NOFILE, OWN_FD_TOP). */
#define OWN_FD_TOP 4096

/* Register *slot, an open descriptor of the runtime that lives until
 * own_fd_close (what: a few words for messages).  The first registration
 * of a number moves it high (*slot rewritten; the descriptor keeps its file
 * description, so OFD locks and the file position stay, and becomes
 * close-on-exec); a later slot holding the same number only joins it.
 * Returns *slot.  When the table is full or no high number is free, the
 * descriptor stays where it is, registered if there is room. */
int own_fd_keep(int *slot, const char *what);

/* *slot no longer holds the descriptor.  It stays open while another slot
 * does; it is closed here when this was the last slot and another's
 * own_fd_close came first (the two owners may let go in either order). */
void own_fd_forget(int *slot);

/* Forget *slot and close its descriptor, at once or, while another slot
 * still holds it, when that one is forgotten; *slot becomes -1.  A slot
 * never registered is just closed. */
void own_fd_close(int *slot);

/* Whether fd is one of ours. */
bool own_fd_is(int fd);

/* Whether any descriptor is ours now (one load: the wrappers' fast path). */
bool own_fd_any(void);

/* close_range(first, last, flags) for the program: close_gap is called for
 * each part of [first, last] that holds none of ours (once with the whole
 * range when it holds none); the first failure is returned (-1, errno).
 * CLOSE_RANGE_CLOEXEC only marks descriptors and ours already are: the
 * range is passed whole. */
int own_fd_close_range(unsigned first, unsigned last, int flags,
		       int (*close_gap)(unsigned first, unsigned last, int flags));

/* Before a dup2/dup3 onto fd: if fd is ours and below the soft limit (above
 * it the kernel refuses the call itself, as natively), move ours to another
 * number and close fd.  0 when fd is free for the call, -1 (EMFILE) when
 * ours cannot move. */
int own_fd_vacate(int fd);

#endif
