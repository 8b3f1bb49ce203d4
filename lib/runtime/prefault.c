/* SPDX-License-Identifier: BSD-3-Clause */
/* prefault -- system calls that write into the heap.  See prefault.h. */
#include "runtime/prefault.h"

#include "heap/heap.h"
#include "recovery/restore.h"
#include "track/tracker.h"
#include "prim/prim.h"
#include "runtime/runtime.h"

#include <errno.h>
#include <string.h>

bool prefault_range(void *buf, size_t len)
{
	if (!heap_contains(buf) || len == 0)
		return false;
	/* Lazy restore first: with a user-mode-only userfaultfd the kernel's
	 * own access to a page not yet restored fails with EFAULT. */
	restore_prefault(buf, len);
	tracker_prefault(buf, len);
	return true;
}

/* Not inlined: glibc declares poll's array write-only (access attribute),
 * and GCC would take the test of where it is for a read of its elements. */
__attribute__((noinline)) bool prefault_poll_through_copy(void *fds, nfds_t n)
{
	return n > 0 && n <= PREFAULT_POLL_COPY_MAX && heap_contains(fds);
}

void prefault_poll_copy_back(struct pollfd *fds, const struct pollfd *copy, nfds_t n)
{
	int e = errno;
	prefault_range(fds, n * sizeof(*fds));
	for (nfds_t i = 0; i < n; i++)
		fds[i].revents = copy[i].revents;
	errno = e;
}

void prefault_select_copies_in(struct prefault_select_copies *c, int n, fd_set **sets[3],
			       struct timeval **tv)
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

void prefault_select_copies_out(const struct prefault_select_copies *c)
{
	int e = errno;
	for (int i = 0; i < 3; i++)
		if (c->orig[i] != NULL)
			memcpy(c->orig[i], c->copy[i], c->bytes);
	if (c->tv_orig != NULL)
		*c->tv_orig = c->tv;
	errno = e;
}

/* The pre-fault can be undone by an epoch before stdio's own read when the
 * caller is outside a FASE (sort(1) reading its temporary files into a
 * multi-megabyte buffer met it about once in six runs at a 10 ms interval):
 * the read fails with EFAULT having consumed nothing, glibc sets the
 * stream's error flag and fread returns short.  That one error is taken
 * back -- the flag cleared, the rest pre-faulted and read again -- when the
 * stream had no error before the call.  fread(b, s, n) is glibc's
 * fread(b, 1, s * n) / s, so the bytes are counted here. */
size_t prefault_fread(prefault_fread_fn real_fread, prefault_fread_fn real_fread_unlocked,
		      void *buf, size_t size, size_t n, FILE *f, bool unlocked)
{
	size_t bytes;
	if (size == 0 || n == 0 || __builtin_mul_overflow(size, n, &bytes) || !heap_contains(buf))
		return unlocked ? real_fread_unlocked(buf, size, n, f)
				: real_fread(buf, size, n, f);
	if (!unlocked)
		flockfile(f);
	bool had_error = ferror_unlocked(f) != 0;
	int saved_errno = errno;
	size_t done = 0;
	int round = 0;
	for (;;) {
		prefault_range((char *)buf + done, bytes - done);
		errno = 0;
		done += real_fread_unlocked((char *)buf + done, 1, bytes - done, f);
		if (done == bytes || had_error || !ferror_unlocked(f) || errno != EFAULT ||
		    round++ >= PREFAULT_RETRIES)
			break;
		clearerr_unlocked(f);
	}
	if (errno == 0)
		errno = saved_errno;	/* never set to 0 by a library function */
	if (!unlocked)
		funlockfile(f);
	return done / size;
}

char *prefault_getcwd(char *(*real_getcwd)(char *, size_t), char *buf, size_t n)
{
	int round = 0;
	char *r;
	bool in_heap;
	do {
		in_heap = prefault_range(buf, n);
		r = real_getcwd(buf, n);
	} while (r == NULL && errno == EFAULT && in_heap && round++ < PREFAULT_RETRIES);
	return r;
}

/* ---- the table's calls (prefault.h, "pinned for the call") ---- */

static void pin_range(void *ctx, void *addr, size_t len)
{
	struct prefault_pins *p = ctx;
	if (len == 0 || !heap_contains(addr))
		return;
	p->in_heap = true;
	/* Lazy restore first, as prefault_range. */
	restore_prefault(addr, len);
	if (!runtime_kernel_writes_fault())
		return;
	if (p->n < PREFAULT_PINS) {
		int rc = runtime_try_pin_writable(addr, len);
		if (rc == 0) {
			p->pin[p->n].addr = addr;
			p->pin[p->n].len = len;
			p->n++;
			return;
		}
	}
	tracker_prefault(addr, len);
	p->retry = true;
}

void prefault_pin_begin(struct prefault_pins *p, long nr, const unsigned long a[6])
{
	p->n = 0;
	p->in_heap = false;
	p->retry = false;
	syscall_outputs(nr, a, pin_range, p);
}

void prefault_pin_end(struct prefault_pins *p)
{
	if (p->n == 0)
		return;
	int e = errno;
	/* The pages stay writable and written until the next collection, so
	 * the epoch after the call takes what the kernel wrote. */
	for (unsigned i = 0; i < p->n; i++)
		runtime_unpin(p->pin[i].addr, p->pin[i].len);
	p->n = 0;
	errno = e;
}
