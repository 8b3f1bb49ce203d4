/* SPDX-License-Identifier: BSD-3-Clause */
/* own_fds -- the runtime's descriptors.  See own_fds.h. */
#include "base/own_fds.h"

#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

#define OWN_FD_MAX 128	/* about eight, and one per pipe output commit writes */
#define OWN_FD_SLOTS 4	/* variables holding one descriptor */

struct own {
	atomic_int fd_plus1;	/* 0: the entry is free */
	int *slots[OWN_FD_SLOTS];
	const char *what;
	bool close_at_last;	/* own_fd_close came before another slot's forget */
};

static struct own owns[OWN_FD_MAX];
static atomic_int owns_used;	/* entries with fd_plus1 != 0 */
/* No number below this is ours: most of the program's calls are answered
 * by one compare. */
static atomic_int owns_lowest = INT32_MAX;
static prim_lock_t owns_lock = PRIM_LOCK_INIT;
/* Taken around fork: the child closes the pool's descriptors and keeps the
 * program's close() and dup2() away from ours, so the table must be whole. */
PRIM_LOCK_NAMED(owns_lock, own_fds, "base/own_fds: the runtime's descriptors", PRIM_FORK_OWN_FDS);
static bool told_full;

static long soft_nofile(void)
{
	struct rlimit rl;
	if (prim_sys_prlimit(RLIMIT_NOFILE, NULL, &rl) != 0)
		return -1;
	return rl.rlim_cur > (rlim_t)0x7fffffff ? 0x7fffffff : (long)rl.rlim_cur;
}

/* The lowest number ours should take: 64 below the top, or the upper half
 * of a small limit.  -1 when the limit leaves nothing worth moving to. */
static int high_floor(void)
{
	long soft = soft_nofile();
	long top = soft < OWN_FD_TOP ? soft : OWN_FD_TOP;
	long floor = top >= 256 ? top - 64 : top / 2;
	return floor > STDERR_FILENO + 1 ? (int)floor : -1;
}

static int dup_at_least(int fd, int floor)
{
	return (int)prim_sys_fcntl(fd, F_DUPFD_CLOEXEC, floor);
}

static struct own *find(int fd)
{
	for (int i = 0; i < OWN_FD_MAX; i++)
		if (atomic_load_explicit(&owns[i].fd_plus1, memory_order_acquire) == fd + 1)
			return &owns[i];
	return NULL;
}

bool own_fd_any(void)
{
	return atomic_load_explicit(&owns_used, memory_order_relaxed) != 0;
}

bool own_fd_is(int fd)
{
	return fd >= atomic_load_explicit(&owns_lowest, memory_order_acquire) && find(fd) != NULL;
}

/* After a change of the table (owns_lock held). */
static void update_lowest(void)
{
	int lowest = INT32_MAX;
	for (int i = 0; i < OWN_FD_MAX; i++) {
		int v = atomic_load_explicit(&owns[i].fd_plus1, memory_order_relaxed) - 1;
		if (v >= 0 && v < lowest)
			lowest = v;
	}
	atomic_store_explicit(&owns_lowest, lowest, memory_order_release);
}

int own_fd_keep(int *slot, const char *what)
{
	int fd = *slot;
	if (fd < 0)
		return fd;
	prim_lock(&owns_lock);
	struct own *o = find(fd);
	if (o != NULL) {
		for (int i = 0; i < OWN_FD_SLOTS; i++)
			if (o->slots[i] == NULL || o->slots[i] == slot) {
				o->slots[i] = slot;
				break;
			}
		prim_unlock(&owns_lock);
		return fd;
	}
	o = find(-1);
	if (o == NULL) {
		prim_unlock(&owns_lock);
		if (!told_full) {
			told_full = true;
			log_msg(LOG_WARN, "more than %d descriptors of the runtime; %s (%d) is "
				"left where the program may close it", OWN_FD_MAX, what, fd);
		}
		return fd;
	}
	int floor = high_floor();
	if (floor > 0 && fd < floor) {
		int high = dup_at_least(fd, floor);
		if (high >= 0) {
			prim_sys_close(fd);
			fd = high;
			*slot = fd;
		}
	}
	o->slots[0] = slot;
	for (int i = 1; i < OWN_FD_SLOTS; i++)
		o->slots[i] = NULL;
	o->what = what;
	o->close_at_last = false;
	atomic_store_explicit(&o->fd_plus1, fd + 1, memory_order_release);
	atomic_fetch_add_explicit(&owns_used, 1, memory_order_relaxed);
	update_lowest();
	prim_unlock(&owns_lock);
	return fd;
}

/* Remove slot from its entry.  True when the descriptor is to be closed
 * now: closing and no other slot holds it, or the last slot went after
 * another's own_fd_close, or it was never registered (closing). */
static bool drop_slot(int *slot, bool closing)
{
	int fd = *slot;
	if (fd < 0)
		return false;
	bool last = true, close_now = closing;
	prim_lock(&owns_lock);
	struct own *o = find(fd);
	if (o != NULL) {
		for (int i = 0; i < OWN_FD_SLOTS; i++) {
			if (o->slots[i] == slot)
				o->slots[i] = NULL;
			else if (o->slots[i] != NULL)
				last = false;
		}
		if (!last && closing)
			o->close_at_last = true;
		close_now = last && (closing || o->close_at_last);
		if (last) {
			atomic_store_explicit(&o->fd_plus1, 0, memory_order_release);
			atomic_fetch_sub_explicit(&owns_used, 1, memory_order_relaxed);
			update_lowest();
		}
	}
	prim_unlock(&owns_lock);
	return close_now;
}

void own_fd_forget(int *slot)
{
	if (drop_slot(slot, false))
		prim_sys_close(*slot);
}

void own_fd_close(int *slot)
{
	if (*slot < 0)
		return;
	if (drop_slot(slot, true))
		prim_sys_close(*slot);
	*slot = -1;
}

int own_fd_close_range(unsigned first, unsigned last, int flags,
		       int (*close_gap)(unsigned first, unsigned last, int flags))
{
	if (!own_fd_any() || (flags & CLOSE_RANGE_CLOEXEC) || first > last)
		return close_gap(first, last, flags);
	/* Ours inside the range, in increasing order. */
	unsigned ours[OWN_FD_MAX];
	int n = 0;
	for (int i = 0; i < OWN_FD_MAX; i++) {
		int v = atomic_load_explicit(&owns[i].fd_plus1, memory_order_acquire) - 1;
		if (v < 0 || (unsigned)v < first || (unsigned)v > last)
			continue;
		int j = n++;
		for (; j > 0 && ours[j - 1] > (unsigned)v; j--)
			ours[j] = ours[j - 1];
		ours[j] = (unsigned)v;
	}
	int rc = 0, err = 0;
	unsigned from = first;
	for (int i = 0; i <= n; i++) {
		unsigned to = i < n ? ours[i] : last;
		bool gap = i < n ? ours[i] > from : from <= last;
		if (gap && close_gap(from, i < n ? to - 1 : to, flags) != 0 && rc == 0) {
			rc = -1;
			err = errno;
		}
		if (i == n || ours[i] == last)
			break;
		from = ours[i] + 1;
	}
	if (rc != 0)
		errno = err;
	return rc;
}

int own_fd_vacate(int fd)
{
	if (!own_fd_is(fd))
		return 0;
	long soft = soft_nofile();
	if (soft >= 0 && fd >= soft)
		return 0;	/* the kernel refuses dup2 onto it, as natively */
	prim_lock(&owns_lock);
	struct own *o = find(fd);
	if (o == NULL) {
		prim_unlock(&owns_lock);
		return 0;
	}
	int floor = high_floor();
	int moved = floor > 0 ? dup_at_least(fd, floor) : -1;
	if (moved < 0)
		moved = dup_at_least(fd, STDERR_FILENO + 1);
	if (moved < 0) {
		int e = errno;
		prim_unlock(&owns_lock);
		log_msg(LOG_WARN, "the program's dup2 onto descriptor %d, the runtime's %s, "
			"fails: it cannot be moved (%s)", fd, o->what, "no free descriptor");
		errno = e == EINVAL ? EMFILE : e;
		return -1;
	}
	for (int i = 0; i < OWN_FD_SLOTS; i++)
		if (o->slots[i] != NULL)
			__atomic_store_n(o->slots[i], moved, __ATOMIC_RELEASE);
	atomic_store_explicit(&o->fd_plus1, moved + 1, memory_order_release);
	update_lowest();
	prim_sys_close(fd);
	prim_unlock(&owns_lock);
	return 0;
}
