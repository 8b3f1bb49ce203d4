/* SPDX-License-Identifier: BSD-3-Clause */
/* tracker_uffd -- write tracking by userfaultfd write-protection in
 * asynchronous mode plus the PAGEMAP_SCAN ioctl.  See tracker.h.
 *
 * With UFFD_FEATURE_WP_ASYNC the kernel resolves a write to a protected page
 * itself (it clears the page's uffd-wp bit; no message, no signal, and a
 * kernel write such as read() into the page works and is seen too).
 * WP_UNPOPULATED makes protection stick to never-touched pages as well.
 * PAGEMAP_SCAN with PM_SCAN_WP_MATCHING then lists the pages whose bit is
 * clear (PAGE_IS_WRITTEN) and sets it again, in one call; without
 * PM_SCAN_WP_MATCHING the same scan only looks (written_since).  No VMA is
 * split and no signal is ever taken. */
#include "track/tracker_backend.h"

#include "base/log.h"
#include "base/own_fds.h"
#include "prim/prim.h"
#include "prim/prim_uffd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NEEDED_FEATURES (UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED)

/* Memory one last-level page table maps (x86-64, 4 KiB pages). */
#define PAGE_TABLE_SPAN ((size_t)2 << 20)

/* Regions fetched per PAGEMAP_SCAN call; a region is a run of written
 * pages, so one call usually covers a whole epoch. */
#define REGION_BATCH 512

struct uffd_impl {
	int uffd;
	int pagemap;
	bool kernel_faults;	/* opened without UFFD_USER_MODE_ONLY */
	size_t missing_len;	/* [base, base+missing_len) registered MISSING too */
	/* [base, base+covered) is write-protected where not written since
	 * (tracker_cover); above it a page's first touch counts as a write,
	 * once.  Grown under cover_lock by the heap's growth hook. */
	size_t covered;
	prim_lock_t cover_lock;
	pid_t owner;		/* both descriptors speak about this process */
	/* After a failed scan, every page from here on is reported dirty
	 * (SIZE_MAX: none pending). */
	size_t all_dirty_from;
	struct page_region regions[REGION_BATCH];
};

/* The attached trackers, for their locks' record (prim.h): set by attach
 * and detach, atomics.  A tracker beyond the first few goes unlisted. */
#define LISTED_MAX 8
static _Atomic(struct uffd_impl *) listed[LISTED_MAX];

static void list(struct uffd_impl *u, struct uffd_impl *was)
{
	for (int s = 0; s < LISTED_MAX; s++) {
		struct uffd_impl *e = was;
		if (atomic_compare_exchange_strong(&listed[s], &e, u))
			return;
	}
}

/* The growth hook covers more of the range under it; a fork child turns
 * the hook off first and never takes it. */
static prim_lock_t *cover_lock(size_t i)
{
	for (int s = 0; s < LISTED_MAX; s++) {
		struct uffd_impl *u = atomic_load(&listed[s]);
		if (u != NULL && i-- == 0)
			return &u->cover_lock;
	}
	return NULL;
}
PRIM_LOCK_KIND(cover_locks, "track/uffd: a tracker's write-protected extent", PRIM_FORK_RESET,
	       cover_lock);

static int open_uffd(void)
{
	/* User-mode-only faults are all an unprivileged process may ask for
	 * when vm.unprivileged_userfaultfd is 0; in async mode kernel-mode
	 * writes are resolved (and recorded) all the same. */
	return prim_uffd_open(true);
}

/* For lazy restore (restore.c): a MISSING fault taken by the kernel itself
 * (read() into a page not yet restored) waits for the restorer only on a
 * descriptor that is not user-mode-only; a user-mode-only one fails such an
 * access with EFAULT.  That needs privilege (root, CAP_SYS_PTRACE, or
 * vm.unprivileged_userfaultfd=1); fall back to user-mode-only without. */
static int open_uffd_kernel_faults(bool *kernel_faults)
{
	int fd = prim_uffd_open(false);
	*kernel_faults = fd >= 0;
	return fd >= 0 ? fd : open_uffd();
}

bool tracker_uffd_kernel_faults_possible(void)
{
	bool kernel_faults;
	int fd = open_uffd_kernel_faults(&kernel_faults);
	if (fd >= 0)
		prim_close(fd);
	return fd >= 0 && kernel_faults;
}

/* 0 unknown, 1 supported, 2 not. */
static atomic_int support_state;
static char support_reason[256];

static bool probe(void)
{
	int fd = open_uffd();
	if (fd < 0) {
		snprintf(support_reason, sizeof(support_reason),
			 "userfaultfd(UFFD_USER_MODE_ONLY) failed (%s%s)", strerror(errno),
			 errno == EPERM ? ": forbidden by a seccomp policy or sysctl" : "");
		return false;
	}
	struct uffdio_api api = { .api = UFFD_API, .features = 0 };
	int r = prim_uffd_ioctl(fd, UFFDIO_API, &api);
	int e = errno;
	prim_close(fd);
	if (r != 0) {
		snprintf(support_reason, sizeof(support_reason), "UFFDIO_API failed (%s)",
			 strerror(e));
		return false;
	}
	if ((api.features & NEEDED_FEATURES) != NEEDED_FEATURES) {
		snprintf(support_reason, sizeof(support_reason),
			 "this kernel's userfaultfd lacks %s", (api.features & UFFD_FEATURE_WP_ASYNC) ?
			 "UFFD_FEATURE_WP_UNPOPULATED" : "UFFD_FEATURE_WP_ASYNC");
		return false;
	}
	int pm = prim_open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC, 0);
	if (pm < 0) {
		snprintf(support_reason, sizeof(support_reason),
			 "/proc/self/pagemap cannot be opened (%s)", strerror(errno));
		return false;
	}
	/* An empty scan: only tells whether the ioctl exists. */
	struct pm_scan_arg arg = { .size = sizeof(arg) };
	r = (int)prim_pagemap_scan(pm, &arg);
	e = errno;
	prim_close(pm);
	if (r < 0) {
		snprintf(support_reason, sizeof(support_reason),
			 "the PAGEMAP_SCAN ioctl is not available (%s)", strerror(e));
		return false;
	}
	support_reason[0] = '\0';
	return true;
}

bool tracker_uffd_supported(void)
{
	int s = atomic_load_explicit(&support_state, memory_order_acquire);
	if (s == 0) {
		/* Two threads may probe at once; they find the same answer. */
		s = probe() ? 1 : 2;
		atomic_store_explicit(&support_state, s, memory_order_release);
	}
	return s == 1;
}

const char *tracker_uffd_unsupported_reason(void)
{
	tracker_uffd_supported();
	return support_reason;
}

/* Write-protect (or not) [base+from, base+to). */
static int wp_span(struct tracker *t, struct uffd_impl *u, size_t from, size_t to, bool protect)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = (uintptr_t)t->base + from, .len = to - from },
		.mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};
	return prim_uffd_ioctl(u->uffd, UFFDIO_WRITEPROTECT, &wp);
}

/* Protection ahead of the heap grows in steps this large: a step's
 * page-table work is small, while the whole capacity at once (the default
 * pool is 8 GiB) would cost in proportion to it at every start-up. */
#define COVER_STEP ((size_t)64 << 20)

static int cover_to(struct tracker *t, struct uffd_impl *u, size_t len)
{
	if (len <= __atomic_load_n(&u->covered, __ATOMIC_ACQUIRE))
		return 0;
	len = (len + COVER_STEP - 1) / COVER_STEP * COVER_STEP;
	if (len > t->len)
		len = t->len;
	int rc = 0;
	prim_lock(&u->cover_lock);
	if (len > u->covered) {
		rc = wp_span(t, u, u->covered, len, true);
		if (rc == 0)
			__atomic_store_n(&u->covered, len, __ATOMIC_RELEASE);
		else
			err_set_errno(errno, "cannot write-protect %p + %zu with userfaultfd",
				      (void *)((char *)t->base + u->covered), len - u->covered);
	}
	prim_unlock(&u->cover_lock);
	return rc;
}

static int uffd_cover(struct tracker *t, size_t len)
{
	/* Detached (a fork child's heap is plain memory): nothing to arm. */
	return t->impl != NULL ? cover_to(t, t->impl, len) : 0;
}

static int uffd_attach(struct tracker *t)
{
	struct uffd_impl *u = prim_map_any(sizeof(*u));
	if (u == NULL) {
		err_set_errno(errno, "cannot allocate the uffd write tracker");
		return -1;
	}
	u->uffd = -1;
	u->pagemap = -1;
	u->owner = prim_getpid();
	u->all_dirty_from = SIZE_MAX;

	u->uffd = (t->open_flags & TRACKER_OPEN_MISSING) ? open_uffd_kernel_faults(&u->kernel_faults)
							  : open_uffd();
	if (u->uffd < 0) {
		err_set_errno(errno, "userfaultfd failed (use PMTHREADS_TRACKER=mprotect)");
		goto fail;
	}
	own_fd_keep(&u->uffd, "userfaultfd");
	struct uffdio_api api = { .api = UFFD_API, .features = NEEDED_FEATURES };
	if (prim_uffd_ioctl(u->uffd, UFFDIO_API, &api) != 0) {
		err_set_errno(errno, "userfaultfd refuses asynchronous write-protection (needs "
			      "Linux >= 6.7; use PMTHREADS_TRACKER=mprotect)");
		goto fail;
	}
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)t->base, .len = t->len },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};
	if (prim_uffd_ioctl(u->uffd, UFFDIO_REGISTER, &reg) != 0) {
		err_set_errno(errno, "cannot register %p + %zu for userfaultfd write-protection "
			      "(the range must be private anonymous memory; or use "
			      "PMTHREADS_TRACKER=mprotect)", t->base, t->len);
		goto fail;
	}
	/* Lazy restore (TRACKER_OPEN_MISSING) protects only the part it
	 * registers (tracker_uffd_register_missing: see there); with
	 * TRACKER_OPEN_COVER_LATER the owner protects what it uses as it
	 * goes (tracker_cover). */
	if (!(t->open_flags & (TRACKER_OPEN_MISSING | TRACKER_OPEN_COVER_LATER)) &&
	    cover_to(t, u, t->len) != 0)
		goto fail_unregister;
	u->pagemap = prim_open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC, 0);
	if (u->pagemap < 0) {
		err_set_errno(errno, "cannot open /proc/self/pagemap to collect written pages "
			      "(is /proc mounted?)");
		goto fail_unregister;
	}
	own_fd_keep(&u->pagemap, "/proc/self/pagemap");
	t->impl = u;
	list(u, NULL);
	return 0;

fail_unregister:
	(void)prim_uffd_ioctl(u->uffd, UFFDIO_UNREGISTER, &reg.range);
fail:
	own_fd_close(&u->uffd);
	prim_unmap(u, sizeof(*u));
	return -1;
}

/* Report pages [from, npages) as dirty, at most max of them; the rest stay
 * pending.  Used only after a failed scan, where nothing better is known. */
static size_t report_all(struct tracker *t, struct uffd_impl *u, uint64_t *pages, size_t max)
{
	size_t npages = t->len / t->page_size;
	size_t n = 0;
	size_t i = u->all_dirty_from;
	for (; i < npages && n < max; i++)
		pages[n++] = i;
	if (i < npages) {
		u->all_dirty_from = i;
	} else {
		u->all_dirty_from = SIZE_MAX;
		if (u->covered != 0 && wp_span(t, u, 0, u->covered, true) != 0)
			u->all_dirty_from = 0;	/* still unknown next time */
	}
	return n;
}

/* One PAGEMAP_SCAN of [start, end) for written pages, into u->regions; with
 * PM_SCAN_WP_MATCHING in flags the pages it reports are write-protected
 * again.  max_pages 0: no limit.  Returns the number of regions (and sets
 * *walk_end to where the walk stopped), or -1 with errno. */
static long scan_written(struct uffd_impl *u, uint64_t start, uint64_t end, uint64_t flags,
			 uint64_t max_pages, uint64_t *walk_end)
{
	for (;;) {
		struct pm_scan_arg arg = {
			.size = sizeof(arg),
			/* CHECK_WPASYNC: a part of the range that lost its
			 * registration (unmapped and remapped by someone)
			 * fails the scan instead of silently reporting
			 * nothing. */
			.flags = flags | PM_SCAN_CHECK_WPASYNC,
			.start = start,
			.end = end,
			.vec = (uintptr_t)u->regions,
			.vec_len = REGION_BATCH,
			.max_pages = max_pages,
			.category_mask = PAGE_IS_WRITTEN,
			.return_mask = PAGE_IS_WRITTEN,
		};
		long r = prim_pagemap_scan(u->pagemap, &arg);
		if (r < 0 && errno == EINTR)
			continue;
		*walk_end = arg.walk_end;
		return r;
	}
}

static size_t uffd_collect(struct tracker *t, uint64_t *pages, size_t max)
{
	struct uffd_impl *u = t->impl;
	if (u->all_dirty_from != SIZE_MAX)
		return report_all(t, u, pages, max);

	const uint64_t base = (uintptr_t)t->base;
	/* Only up to the extent: the kernel walks every page table entry of
	 * the scanned range, written or not.  Written pages above it keep
	 * their written state for a later, wider scan. */
	const uint64_t end = base + t->extent;
	uint64_t start = base;
	size_t n = 0;
	while (n < max && start < end) {
		uint64_t walk_end;
		long r = scan_written(u, start, end, PM_SCAN_WP_MATCHING, max - n, &walk_end);
		if (r < 0) {
			log_msg(LOG_ERR, "PAGEMAP_SCAN over the persistent heap failed (%s); "
				"persisting every page of it this epoch", strerror(errno));
			t->stats.scan_errors++;
			/* Pages already listed were re-protected; report the
			 * rest of the range from where the scan stood. */
			u->all_dirty_from = (size_t)((start - base) / t->page_size);
			return n + report_all(t, u, pages + n, max - n);
		}
		for (long i = 0; i < r; i++) {
			for (uint64_t a = u->regions[i].start; a < u->regions[i].end && n < max;
			     a += t->page_size)
				pages[n++] = (a - base) / t->page_size;
		}
		if (walk_end <= start)
			break;		/* no progress: nothing more to find */
		start = walk_end;
	}
	t->stats.faults += n;
	return n;
}

/* PAGEMAP_SCAN without PM_SCAN_WP_MATCHING: the written regions over the
 * batch's span, protection left as it is, walked beside the batch. */
static int uffd_written_since(struct tracker *t, const uint64_t *pages, size_t n,
			      uint8_t *written)
{
	struct uffd_impl *u = t->impl;
	if (u->all_dirty_from != SIZE_MAX)
		return -1;	/* a failed scan is pending: nothing is known */
	const uint64_t base = (uintptr_t)t->base;
	const size_t ps = t->page_size;
	memset(written, 0, n);
	uint64_t start = base + pages[0] * ps;
	const uint64_t end = base + (pages[n - 1] + 1) * ps;
	size_t k = 0;
	while (start < end && k < n) {
		uint64_t walk_end;
		long r = scan_written(u, start, end, 0, 0, &walk_end);
		if (r < 0)
			return -1;
		for (long i = 0; i < r && k < n; i++) {
			uint64_t lo = (u->regions[i].start - base) / ps;
			uint64_t hi = (u->regions[i].end - base) / ps;
			while (k < n && pages[k] < lo)
				k++;
			for (; k < n && pages[k] < hi; k++)
				written[k] = 1;
		}
		if (walk_end <= start)
			break;
		start = walk_end;
	}
	return 0;
}

static void uffd_detach(struct tracker *t)
{
	struct uffd_impl *u = t->impl;
	if (u == NULL)
		return;
	/* In a fork child the descriptors still speak about the parent's
	 * memory: only close them (the child's copy of the range was not
	 * registered, since no UFFD_FEATURE_EVENT_FORK was asked for). */
	if (prim_getpid() == u->owner) {
		if (u->covered != 0)
			(void)wp_span(t, u, 0, u->covered, false);
		struct uffdio_range range = { .start = (uintptr_t)t->base, .len = t->len };
		(void)prim_uffd_ioctl(u->uffd, UFFDIO_UNREGISTER, &range);
	}
	list(NULL, u);
	own_fd_close(&u->pagemap);
	own_fd_close(&u->uffd);
	prim_unmap(u, sizeof(*u));
	t->impl = NULL;
}

int tracker_uffd_register_missing(struct tracker *t, size_t len, bool *kernel_faults)
{
	if (t->ops != &tracker_uffd_ops || !(t->open_flags & TRACKER_OPEN_MISSING)) {
		err_set("lazy restore needs the uffd write tracker opened with TRACKER_OPEN_MISSING "
			"(this one is %s)", t->ops->name);
		return -1;
	}
	struct uffd_impl *u = t->impl;
	len = (len + t->page_size - 1) / t->page_size * t->page_size;
	if (len > t->len)
		len = t->len;
	if (len == 0)
		return u->uffd;
	/* Same context as the write-protection: one VMA has one uffd.  The
	 * part [base, base+len) becomes a VMA of its own (MISSING|WP); above
	 * it the kernel keeps zero-filling first touches itself.
	 *
	 * Only this part is write-protected now: a page restored there
	 * arrives protected (UFFDIO_COPY_MODE_WP), and one not yet restored
	 * needs its marker (WP_UNPOPULATED), because PAGEMAP_SCAN's fast path
	 * (category and return mask PAGE_IS_WRITTEN) reports every pte not
	 * write-protected as written, a none pte in a populated page table
	 * too (so the protection extends to the end of the last page table,
	 * 2 MiB).  Above it nothing was ever persisted, and protecting the
	 * whole capacity would cost in proportion to it at start-up: there a page
	 * first touched (even read) counts as written once, and so may an
	 * untouched page below the scan extent (the heap's high-water mark)
	 * in a page table another touch populated.  Such a page is zeros
	 * like its copies in the pool, so its epoch writes only its seq. */
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)t->base, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP,
	};
	if (prim_uffd_ioctl(u->uffd, UFFDIO_REGISTER, &reg) != 0) {
		err_set_errno(errno, "cannot register %p + %zu for userfaultfd missing-page faults",
			      t->base, len);
		return -1;
	}
	if (!(reg.ioctls & (1ULL << _UFFDIO_COPY))) {
		err_set("userfaultfd offers no UFFDIO_COPY on the heap range");
		return -1;
	}
	size_t wp_len = (len + PAGE_TABLE_SPAN - 1) / PAGE_TABLE_SPAN * PAGE_TABLE_SPAN;
	if (wp_len > t->len)
		wp_len = t->len;
	if (cover_to(t, u, wp_len) != 0)
		return -1;
	u->missing_len = len;
	*kernel_faults = u->kernel_faults;
	return u->uffd;
}

const struct tracker_ops tracker_uffd_ops = {
	.name = "uffd",
	.attach = uffd_attach,
	.collect_dirty = uffd_collect,
	.written_since = uffd_written_since,
	.cover = uffd_cover,
	.detach = uffd_detach,
};
