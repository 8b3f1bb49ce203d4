/*
 * shadow + tracker -- the DRAM shadow heap and which of its pages were written.
 *
 * Owns: reserving the shadow range at its fixed address, and the write
 * tracking backends behind struct tracker_ops:
 *   tracker_uffd.c      userfaultfd write-protect in async mode
 *                       (UFFD_FEATURE_WP_ASYNC | WP_UNPOPULATED) and the
 *                       PAGEMAP_SCAN ioctl with PM_SCAN_WP_MATCHING: the
 *                       kernel resolves first writes itself; one ioctl
 *                       returns the written pages and re-protects them
 *   tracker_mprotect.c  SIGSEGV + mprotect, for older kernels; chains to the
 *                       application's own SIGSEGV/SIGBUS handlers
 * Both report exactly the pages written since the previous collection.
 */
#ifndef PMT_TRACKER_H
#define PMT_TRACKER_H

#include "config.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reserve [base, base+len) at exactly base when possible, else anywhere.
 * Returns the address (check against base for relocation) or NULL with
 * err_get() set. */
void *shadow_reserve(uint64_t base, size_t len);
void shadow_release(void *addr, size_t len);

struct tracker;

struct tracker_stats {
	uint64_t faults;	/* first writes taken (mprotect: signals) */
	uint64_t collections;
	uint64_t pages_collected;
	uint64_t overflows;	/* mprotect: VMA budget exceeded, range unprotected */
};

struct tracker_ops {
	const char *name;
	/* Start tracking: every page of the range counts as clean now. */
	int (*attach)(struct tracker *t);
	/* Store the indices (page numbers from base, ascending) of every page
	 * written since attach or the previous collection into pages (room for
	 * max), re-arm tracking for them, and return how many.  Called only at
	 * a quiescent point.  If more than max pages are dirty, returns the
	 * first max and leaves the rest dirty for the next call. */
	size_t (*collect_dirty)(struct tracker *t, uint64_t *pages, size_t max);
	void (*detach)(struct tracker *t);
};

struct tracker {
	const struct tracker_ops *ops;
	void *base;
	size_t len;
	size_t page_size;
	struct tracker_stats stats;
	void *impl;
};

/* Create a tracker of the given kind over [base, base+len) (TRACKER_AUTO:
 * uffd when the kernel supports it, else mprotect) and attach it.  Returns 0
 * or -1 with err_get() set. */
int tracker_open(struct tracker **out, enum tracker_kind kind, void *base, size_t len);
void tracker_close(struct tracker *t);
size_t tracker_collect_dirty(struct tracker *t, uint64_t *pages, size_t max);

/* Whether this kernel offers what the uffd backend needs. */
bool tracker_uffd_supported(void);

/* mprotect backend services used by preload/ wrappers (no-ops for uffd):
 * make [addr, addr+len) writable and count its pages as written, so that a
 * system call writing there does not fail with EFAULT. */
void tracker_prefault(void *addr, size_t len);

/* Signal chaining (mprotect backend): preload/'s sigaction and signal
 * wrappers forward here.  For SIGSEGV and SIGBUS the application's handler
 * is recorded and ours stays installed; other signals go to the kernel.
 * Same contract as sigaction(2). */
int tracker_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

#endif
