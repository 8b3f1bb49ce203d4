/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shadow + tracker -- the DRAM shadow heap and which of its pages were written.
 *
 * Owns: reserving the shadow range at its fixed address, and the write
 * tracking backends behind struct tracker_ops (tracker_backend.h, private to
 * this module: everything else sees struct tracker only through the
 * functions below):
 *   tracker_uffd.c      userfaultfd write-protect in async mode
 *                       (UFFD_FEATURE_WP_ASYNC | WP_UNPOPULATED) and the
 *                       PAGEMAP_SCAN ioctl with PM_SCAN_WP_MATCHING: the
 *                       kernel resolves first writes itself; one ioctl
 *                       returns the written pages and re-protects them
 *   tracker_mprotect.c  SIGSEGV + mprotect, for older kernels
 *   fault_signal.c      the process's SIGSEGV disposition: our handler, and
 *                       chaining to the application's own (fault_signal.h)
 *   tracker.c           backend choice, open/close/collect, counters
 *   shadow.c            the fixed-address reservation
 * Both report every page written since the previous collection; the uffd
 * backend exactly those, the mprotect backend also (unless
 * TRACKER_OPEN_EXACT) up to 15 pages ahead of one written in order, and
 * pages written in consecutive epochs that it keeps writable while they
 * keep changing (tracker_note_changed), and every page touched in an epoch
 * in which it gave up page protection to bound the VMA count
 * (TRACKER_MPROTECT_MAX_RUNS).
 *
 * Tracking is at base-page granularity: tracker_open disables transparent
 * huge pages over the range (a written 2 MiB page would otherwise be
 * reported, and persisted, as 512 written pages).
 */
#ifndef PMT_TRACKER_H
#define PMT_TRACKER_H

#include "base/config.h"
#include "base/stats_fields.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reserve [base, base+len) at exactly base when possible, else anywhere
 * (also when base is 0).  len must be a multiple of the page size.  The
 * memory is zero-filled, read-write, MAP_NORESERVE.  Returns the address
 * (check against base for relocation) or NULL with err_get() set. */
void *shadow_reserve(uint64_t base, size_t len);
/* Unmap a range returned by shadow_reserve.  NULL is a no-op. */
void shadow_release(void *addr, size_t len);

struct tracker;

/* X(kind, field, report key): base/stats_fields.h. */
#define TRACKER_STATS_FIELDS(X) \
	/* first writes taken (mprotect: signals; uffd: pages found written, \
	 * as the kernel resolves first writes without telling anyone) */ \
	X(count, faults, "tracker_faults") \
	X(count, collections, "tracker_collections") /* tracker_collect_dirty calls */ \
	X(count, pages_collected, "tracker_pages") \
	/* mprotect: pages made hot (kept writable across collections) */ \
	X(count, hot_pages, "tracker_hot_pages") \
	/* mprotect: VMA budget exceeded, range unprotected */ \
	X(count, overflows, "tracker_overflows") \
	/* uffd: PAGEMAP_SCAN failed; the whole range was reported dirty instead */ \
	X(count, scan_errors, "tracker_scan_errors") \
	X(count, rescans, "tracker_rescans") /* tracker_written_since calls */ \
	/* of which could not tell (every page counted as written) */ \
	X(count, rescan_failures, "tracker_rescan_failures")

struct tracker_stats {
	TRACKER_STATS_FIELDS(STATS_DECLARE)
};

/* The counters of several trackers in one (the runtime's report). */
static inline void tracker_stats_add(struct tracker_stats *dst, const struct tracker_stats *src)
{
	TRACKER_STATS_FIELDS(STATS_ADD)
}

/* tracker_open_flags: the uffd backend will serve missing-page faults for
 * lazy restore (restore.h): open its descriptor so that faults taken by the
 * kernel wait for the restorer when the process may ask for that, and leave
 * the write-protection of the range to tracker_uffd_register_missing (which
 * protects only the part it registers; see there for what that means above
 * it). */
#define TRACKER_OPEN_MISSING 1u
/* tracker_open_flags: do not arm the whole range at attach; the owner calls
 * tracker_cover before it first uses each part.  Above the covered part the
 * uffd backend reports a page as written after its first touch (even a
 * read), and may report its never-touched neighbours in the same 2 MiB page
 * table once: conservative, never a lost write.  Arming a whole range costs
 * time in proportion to its size, paid at every start-up however little of
 * it the program uses; the runtime covers what its heap uses (the restored
 * image, then each growth of the heap). */
#define TRACKER_OPEN_COVER_LATER 2u
/* tracker_open_flags: report exactly the pages written.  Without it the
 * mprotect backend, at a first write to a page whose predecessor was
 * written in the same epoch, opens (and reports) the next pages too, up to
 * 16: a program filling memory in order takes a sixteenth of the faults,
 * and the write-back compares a few pages it did not need to.  Tests of
 * exactness ask for it; the uffd backend is always exact. */
#define TRACKER_OPEN_EXACT 4u
/* tracker_open_flags: the mprotect backend makes pages hot (see
 * tracker_note_changed) whatever the rate of collections, not only while
 * they come every few milliseconds.  For tests, whose collections' spacing
 * is the machine's to decide. */
#define TRACKER_OPEN_HOT_AT_ANY_RATE 8u

/* Create a tracker of the given kind over [base, base+len) (TRACKER_AUTO:
 * uffd when the kernel supports it, else mprotect) and attach it.  base and
 * len must be page-aligned, len > 0, and the range anonymous private memory
 * (as from shadow_reserve).  Asking for TRACKER_UFFD on a kernel without
 * support is an error naming what is missing.  Returns 0 or -1 with err_get()
 * set. */
int tracker_open(struct tracker **out, enum tracker_kind kind, void *base, size_t len);
int tracker_open_flags(struct tracker **out, enum tracker_kind kind, void *base, size_t len,
		       unsigned flags);
/* Lazy restore (restore.c) shares the uffd tracker's descriptor, as a range
 * has only one userfaultfd context: register [base, base+len) of a tracker
 * opened with TRACKER_OPEN_MISSING for missing-page faults as well (the
 * write-protection stays as it is).  Returns the descriptor (owned by the
 * tracker, closed by tracker_close) and sets *kernel_faults when faults the
 * kernel takes wait for a UFFDIO_COPY instead of failing with EFAULT; -1
 * with err_get() set when the tracker is not such a uffd tracker. */
int tracker_uffd_register_missing(struct tracker *t, size_t len, bool *kernel_faults);
/* Whether this process may open a userfaultfd whose kernel-mode faults wait
 * (see tracker_uffd_register_missing). */
bool tracker_uffd_kernel_faults_possible(void);
/* Track first writes to [base, base+len) exactly from now on (see
 * TRACKER_OPEN_COVER_LATER); call before the part is first used.  Cheap
 * when already covered; thread-safe.  Returns 0, or -1 with err_get() set
 * (the part then stays conservatively tracked: nothing is lost). */
int tracker_cover(struct tracker *t, size_t len);
/* Detach and free.  NULL is a no-op. */
void tracker_close(struct tracker *t);
/* In a fork child, before any tracker is closed there: forget what the
 * parent's other threads were doing in the trackers (a fault handler in
 * flight, which detach would wait for). */
void tracker_atfork_child(void);
/* The backend's name ("uffd", "mprotect"), for reports. */
const char *tracker_name(const struct tracker *t);
/* The counters so far. */
void tracker_get_stats(const struct tracker *t, struct tracker_stats *out);
/* The backend's collect_dirty, counted in the tracker's stats. */
size_t tracker_collect_dirty(struct tracker *t, uint64_t *pages, size_t max);
/* Limit later collections to [base, base+extent) (rounded up to a page,
 * capped at len; tracker_open sets len).  The caller promises that nothing
 * above it was written since the previous collection: a PAGEMAP_SCAN costs
 * time for every page table entry of the range it walks, written or not, so
 * the runtime passes the heap's high-water mark instead of scanning a mostly
 * unused pool.  Writes above the extent are not lost, only deferred: they
 * stay marked until a collection whose extent covers them (the mprotect
 * backend, whose bitmap costs nothing to read, may report the few up to the
 * next multiple of 64 pages early).  Call only where collect_dirty may be
 * called (a quiescent point). */
void tracker_set_extent(struct tracker *t, size_t extent);

/* Whether this kernel offers what the uffd backend needs (probed once). */
bool tracker_uffd_supported(void);
/* Why it does not (a sentence naming the missing kernel feature), or "" when
 * it does. */
const char *tracker_uffd_unsupported_reason(void);

/* mprotect backend services used by preload/ wrappers (no-ops for uffd):
 * make [addr, addr+len) writable and count its pages as written, so that a
 * system call writing there does not fail with EFAULT.  Any part of the
 * range outside every tracked range is ignored.  Thread-safe. */
void tracker_prefault(void *addr, size_t len);

/* A function told of every first write to a tracked page the mprotect
 * backend sees: addr is the faulting address, ucontext the SIGSEGV handler's
 * context (a ucontext_t *, so an unwinder can start at the faulting frame).
 * It runs in the signal handler on the writing thread, before the page is
 * made writable, so it must be async-signal-safe (the FASE checker,
 * fase_checker.h, is the user).  NULL (the default) turns it off.  The uffd
 * backend never calls it: the kernel resolves its first writes unseen. */
typedef void (*tracker_write_hook)(void *addr, void *ucontext);
void tracker_set_write_hook(tracker_write_hook fn);

/* The backend's written_since, counted in the tracker's stats; -1 (every
 * page written) when the backend cannot tell. */
int tracker_written_since(struct tracker *t, const uint64_t *pages, size_t n, uint8_t *written);

/* After the write-back of pages a collection returned (pages[k] as it
 * returned them, or any subset): changed[k] != 0 when the write-back found
 * page pages[k]'s bytes changed.  The mprotect backend keeps a page written
 * in consecutive epochs writable (hot: reported at every collection
 * without faulting) only while it keeps changing; the uffd backend has no
 * use for it.  Call on the thread that collects, between collections. */
void tracker_note_changed(struct tracker *t, const uint64_t *pages, size_t n,
			  const uint8_t *changed);

/* Which pages of the last collection (pages[k] as it returned them, or any
 * subset) were reported without a write to them having been seen: the
 * mprotect backend's hot pages, writable since the collection before, which
 * may well hold the bytes they held then.  Sets unknown[k] to 1 for those and
 * 0 for the others, and returns how many are 1; returns 0 without touching
 * unknown when the backend saw a write to every page it reported (the uffd
 * backend always).  Call on the thread that collects, before the next
 * collection. */
size_t tracker_written_unknown(struct tracker *t, const uint64_t *pages, size_t n,
			       uint8_t *unknown);

/* The mprotect backend keeps at most this many separately writable runs of
 * pages per epoch (each costs up to two VMAs; vm.max_map_count is 65530 by
 * default).  Beyond it the whole range is made writable until the next
 * collection, which then reports every page touched (resident or swapped)
 * and counts stats.overflows. */
#define TRACKER_MPROTECT_MAX_RUNS 8192

/* Memory the kernel writes as a stack: a thread stack or an alternate
 * signal stack the program allocated in the heap.  The kernel cannot deliver
 * the fault of a write to a read-only stack page on that very stack (clone,
 * signal frames), so the process would die.  The mprotect backend keeps
 * every page of [addr, addr+len) writable until tracker_unpin of the same
 * range, and reports each of them written at every collection meanwhile
 * (nothing written there is lost); pins may overlap.  No-ops for the uffd
 * backend (the kernel resolves its own writes) and for any part outside the
 * tracked range.  Thread-safe; not async-signal-safe.  Returns 0, or -1
 * with err_get() set. */
int tracker_pin_writable(struct tracker *t, void *addr, size_t len);
void tracker_unpin(struct tracker *t, void *addr, size_t len);

#endif
