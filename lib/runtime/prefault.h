/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prefault -- system calls that write into the heap while its clean pages
 * are write-protected.
 *
 * Owns: the EFAULT policy.  With the mprotect tracker a clean heap page is
 * read-only, and a kernel write into it fails with EFAULT instead of
 * faulting.  Every call of lib/runtime/syscall_outputs.tab (each libc entry
 * point there and syscall(2)) has the outputs the table names pinned
 * writable for its duration (PREFAULT_SYSCALL, below).  The few calls it
 * names as hand-made here keep the older policy: a buffer's part inside the
 * heap is pre-faulted before the call (a page not yet restored lazily is
 * restored first, restore.h; then the pages become writable and count as
 * written, tracker_prefault), and as an epoch can re-protect it before the
 * kernel writes when the caller is outside a FASE, the call is retried on
 * EFAULT (epoll_wait, whose kernel fails before taking an event; stdio's
 * reads; getcwd); poll and select, which consume a timeout or a signal
 * before their write-back, wait on a copy on the stack instead.  With the
 * uffd tracker the kernel resolves such writes itself and only the lazy
 * restore is done.
 */
#ifndef PMT_PREFAULT_H
#define PMT_PREFAULT_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "runtime/syscall_outputs.h"

/* A few rounds are plenty: each needs an epoch to land exactly between the
 * pre-fault and the kernel's write. */
#define PREFAULT_RETRIES 4

/* Pre-fault [buf, buf+len) where it lies in the heap; whether it does. */
bool prefault_range(void *buf, size_t len);
/* The call that returned r on a buffer that touches the heap (in_heap)
 * failed with EFAULT and may be tried again: counts the round. */
static inline bool prefault_again(long r, bool in_heap, int *round)
{
	return r < 0 && errno == EFAULT && in_heap && (*round)++ < PREFAULT_RETRIES;
}

/* Return CALL, retried while it fails with EFAULT on a heap buffer; PREP
 * pre-faults and says whether the buffer touches the heap. */
#define PREFAULT_RETURN(type, PREP, CALL)                      \
	do {                                                   \
		int round_ = 0;                                \
		type r_;                                       \
		bool in_heap_;                                 \
		do {                                           \
			in_heap_ = (PREP);                     \
			r_ = (CALL);                           \
		} while (prefault_again(r_, in_heap_, &round_)); \
		return r_;                                     \
	} while (0)

/* ---- the table's calls: pinned for the call ----
 *
 * Every libc entry point of lib/runtime/syscall_outputs.tab, and syscall(2)
 * by number, goes through PREFAULT_SYSCALL: the ranges the table names for
 * the call that lie in the heap are restored if a lazy restore has not
 * reached them yet, and under the mprotect tracker pinned writable
 * (runtime_pin_writable: marked written, and never re-protected by an epoch
 * until unpinned) for the call's duration.  No epoch can then make the
 * kernel's write fail, however long the call blocks, so calls that consume
 * something before they write (wait4 reaps the child, a datagram is taken
 * off its queue) lose nothing.  Past PREFAULT_PINS ranges, or when the pin
 * lock is held (a signal handler that interrupted its holder), the rest is
 * only pre-faulted and the call retried on EFAULT as above.  Under uffd only
 * the lazy restore is done.  errno is kept across prefault_pin_end. */
enum { PREFAULT_PINS = 8 };

struct prefault_pins {
	unsigned n;
	bool in_heap;	/* some range lies in the heap */
	bool retry;	/* some range only pre-faulted: retry on EFAULT */
	struct {
		void *addr;
		size_t len;
	} pin[PREFAULT_PINS];
};

void prefault_pin_begin(struct prefault_pins *p, long nr, const unsigned long a[6]);
void prefault_pin_end(struct prefault_pins *p);

/* r = CALL, with system call nr's outputs pinned around it; the system
 * call's arguments follow (up to six, converted to unsigned long). */
#define PREFAULT_SYSCALL(r, nr, CALL, ...)                                      \
	do {                                                                    \
		const unsigned long a_[6] = { __VA_ARGS__ };                    \
		struct prefault_pins p_;                                        \
		int round_ = 0;                                                 \
		do {                                                            \
			prefault_pin_begin(&p_, (nr), a_);                      \
			(r) = (CALL);                                           \
			prefault_pin_end(&p_);                                  \
		} while (p_.retry && prefault_again((long)(r), p_.in_heap, &round_)); \
	} while (0)

/* poll and ppoll write every revents back when they return -- after a
 * timeout or a signal too -- and an epoch may write-protect the array again
 * while they wait: the write-back then fails with EFAULT after the call
 * consumed its timeout or its signal, so a retry would wait again (a timeout
 * five times over, a signal's EINTR lost; varnishd's manager missed its
 * SIGTERM).  An array in the heap of at most PREFAULT_POLL_COPY_MAX entries
 * is polled through a copy on the stack (prefault_poll_through_copy says
 * so), its revents stored back by ordinary stores (prefault_poll_copy_back,
 * errno kept); a longer one is pre-faulted and retried. */
enum { PREFAULT_POLL_COPY_MAX = 256 };	/* 2 KiB */
bool prefault_poll_through_copy(void *fds, nfds_t n);
void prefault_poll_copy_back(struct pollfd *fds, const struct pollfd *copy, nfds_t n);

/* select and pselect write their sets back when they return -- after a
 * timeout or a signal too, select its time left as well -- so, as poll's
 * array, sets and a time value in the heap are passed as copies on the
 * stack and stored back by ordinary stores.  Sets for more descriptors than
 * the copies hold are passed as they are. */
enum { PREFAULT_SELECT_COPY_SETS = 8 };	/* 8192 descriptors, 1 KiB a set */

struct prefault_select_copies {
	fd_set *orig[3];
	fd_set copy[3][PREFAULT_SELECT_COPY_SETS];
	size_t bytes;
	struct timeval *tv_orig;
	struct timeval tv;
};

/* Point *sets[i] (and *tv, when tv is not NULL) at copies where they lie in
 * the heap; c then stores the results back (errno kept). */
void prefault_select_copies_in(struct prefault_select_copies *c, int n, fd_set **sets[3],
			       struct timeval **tv);
void prefault_select_copies_out(const struct prefault_select_copies *c);

/* stdio reads large requests straight into the caller's buffer with an
 * internal read(2) that no wrapper sees.  fread and fread_unlocked (unlocked)
 * through the real functions, the one EFAULT of a read an epoch re-protected
 * taken back when the stream had no error before the call. */
typedef size_t (*prefault_fread_fn)(void *, size_t, size_t, FILE *);
size_t prefault_fread(prefault_fread_fn real_fread, prefault_fread_fn real_fread_unlocked,
		      void *buf, size_t size, size_t n, FILE *f, bool unlocked);

/* getcwd into a caller's buffer through the real function, retried as
 * above (it fails with NULL, not -1). */
char *prefault_getcwd(char *(*real_getcwd)(char *, size_t), char *buf, size_t n);

#endif
