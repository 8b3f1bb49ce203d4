/* SPDX-License-Identifier: BSD-3-Clause */
/* memory_lock -- mlockall and munlockall with a persistent heap.  See
 * memory_lock.h. */
#include "runtime/memory_lock.h"

#include "prim/prim.h"
#include "runtime/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* MCL_FUTURE's flags (MCL_FUTURE | MCL_ONFAULT) while it is in effect, 0
 * otherwise. */
static atomic_int future;

/* The whole of /proc/self/maps, read before any lock splits a mapping (a
 * read in pieces could then see part of it twice); *len bytes at the
 * returned address, prim_unmap(p, *cap) after.  NULL on failure, errno set. */
static char *read_maps(size_t *len, size_t *cap)
{
	int fd = prim_sys_open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t n = 0, c = 1 << 16;
	char *buf = prim_map_any(c);
	while (buf != NULL) {
		if (n == c) {
			char *bigger = prim_map_any(c * 2);
			if (bigger != NULL)
				memcpy(bigger, buf, n);
			prim_unmap(buf, c);
			buf = bigger;
			c *= 2;
			continue;
		}
		long r = prim_sys_read(fd, buf + n, c - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r < 0) {
				prim_unmap(buf, c);
				buf = NULL;
			}
			break;
		}
		n += (size_t)r;
	}
	int e = errno;
	prim_sys_close(fd);
	errno = buf == NULL && e == 0 ? ENOMEM : e;
	*len = n;
	*cap = c;
	return buf;
}

static uintptr_t hex(const char **p)
{
	uintptr_t v = 0;
	for (;; (*p)++) {
		char ch = **p;
		int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
		if (d < 0)
			return v;
		v = v * 16 + (uintptr_t)d;
	}
}

/* The runtime's mappings (prim's and the pool's), which stay unlocked; one
 * call at a time (lock). */
#define EXCLUDED_MAX 513
static uintptr_t ex_lo[EXCLUDED_MAX], ex_hi[EXCLUDED_MAX];
static prim_lock_t lock = PRIM_LOCK_INIT;
PRIM_LOCK_NAMED(lock, memory_lock, "runtime/memory_lock: mlock of the program's ranges",
		PRIM_FORK_RESET);

/* Calls fn on each part of each mapping that is not the runtime's, then on
 * the part of the heap in use; false when the maps cannot be read (errno
 * set).  Under lock. */
static bool each_program_range(void (*fn)(uintptr_t lo, uintptr_t hi, void *ctx), void *ctx)
{
	uintptr_t heap_lo, heap_hi;
	size_t nr = prim_mappings(ex_lo, ex_hi, EXCLUDED_MAX - 1);
	runtime_lock_ranges(&ex_lo[nr], &ex_hi[nr], &heap_lo, &heap_hi);
	nr++;
	size_t len, cap;
	char *maps = read_maps(&len, &cap);
	if (maps == NULL)
		return false;
	for (const char *p = maps, *end = maps + len; p < end;) {
		uintptr_t lo = hex(&p);
		p++; /* '-' */
		uintptr_t hi = hex(&p);
		/* What is left of [lo, hi) with the runtime's ranges cut out,
		 * left to right. */
		uintptr_t at = lo;
		while (at < hi) {
			uintptr_t stop = hi, skip_to = hi;
			for (size_t i = 0; i < nr; i++)
				if (ex_lo[i] < hi && ex_hi[i] > at && (ex_lo[i] > at ? ex_lo[i] : at) < stop) {
					stop = ex_lo[i] > at ? ex_lo[i] : at;
					skip_to = ex_hi[i] < hi ? ex_hi[i] : hi;
				}
			if (stop > at)
				fn(at, stop, ctx);
			at = skip_to > stop ? skip_to : hi;
		}
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		p = nl == NULL ? end : nl + 1;
	}
	prim_unmap(maps, cap);
	if (heap_hi > heap_lo)
		fn(heap_lo, heap_hi, ctx);
	return true;
}

static void add_size(uintptr_t lo, uintptr_t hi, void *ctx)
{
	*(uint64_t *)ctx += hi - lo;
}

static void lock_range(uintptr_t lo, uintptr_t hi, void *ctx)
{
	int flags = *(int *)ctx;
	/* As mlockall's own walk: a mapping that cannot be locked or faulted
	 * in (PROT_NONE, [vsyscall]) is passed over. */
	(void)prim_sys_mlock((void *)lo, hi - lo, (flags & MCL_ONFAULT) != 0);
}

static int lock_current(int flags);

int memory_lock_all(int flags)
{
	uintptr_t pool_lo, pool_hi, heap_lo, heap_hi;
	runtime_lock_ranges(&pool_lo, &pool_hi, &heap_lo, &heap_hi);
	bool valid = flags != 0 && (flags & ~(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)) == 0 &&
		     flags != MCL_ONFAULT;
	if (!valid || !(flags & MCL_CURRENT) || (pool_hi == 0 && heap_hi == 0)) {
		int r = prim_sys_mlockall(flags);
		if (r == 0 && valid)
			atomic_store(&future, flags & MCL_FUTURE ? flags & ~MCL_CURRENT : 0);
		return r;
	}
	prim_lock(&lock);
	int r = lock_current(flags);
	prim_unlock(&lock);
	return r;
}

/* mlockall(flags) with MCL_CURRENT, a runtime in place.  Under lock. */
static int lock_current(int flags)
{
	int saved = errno;
	struct rlimit rl;
	if (prim_get_rlimit(RLIMIT_MEMLOCK, &rl) != 0)
		return -1;
	if (rl.rlim_cur != RLIM_INFINITY && !prim_capable_ipc_lock()) {
		/* The kernel's checks, against the program's own mappings. */
		uint64_t total = 0;
		if (rl.rlim_cur == 0) {
			errno = EPERM;
			return -1;
		}
		if (!each_program_range(add_size, &total))
			return -1;
		if (total > rl.rlim_cur) {
			errno = ENOMEM;
			return -1;
		}
	}
	if (flags & MCL_FUTURE) {
		if (prim_sys_mlockall(flags & ~MCL_CURRENT) != 0)
			return -1;
		atomic_store(&future, flags & ~MCL_CURRENT);
	} else if (atomic_exchange(&future, 0) != 0) {
		/* The kernel's MCL_CURRENT alone also ends MCL_FUTURE; only
		 * munlockall does that without locking every mapping. */
		if (prim_sys_munlockall() != 0)
			return -1;
	}
	if (!each_program_range(lock_range, &flags))
		return -1;
	errno = saved;
	return 0;
}

int memory_unlock_all(void)
{
	atomic_store(&future, 0);
	return prim_sys_munlockall();
}

int memory_lock_grown(void *addr, size_t len)
{
	int f = atomic_load_explicit(&future, memory_order_relaxed);
	if (f == 0)
		return 0;
	return prim_sys_mlock(addr, len, (f & MCL_ONFAULT) != 0);
}
