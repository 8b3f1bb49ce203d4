/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * checker -- PMTHREADS_CHECK=1: report writes to the persistent heap made by
 * a thread that holds no lock.
 *
 * Owns: deciding whether a first write to a tracked page breaks failure
 * atomicity (the writing thread's fase_depth() is 0), deduplicating reports
 * by call site, and printing one symbolised backtrace per site.
 *
 * How it sees writes: it is the mprotect tracker's write hook
 * (tracker_set_write_hook), so it runs inside the SIGSEGV handler, on the
 * writing thread, before the page is made writable.  Check mode therefore
 * needs the mprotect tracker: with uffd the kernel resolves first writes
 * itself and nobody learns which thread wrote.  runtime.c forces mprotect
 * when check mode is on (with a warning when uffd was asked for explicitly)
 * and config.c shortens the epoch interval to CONFIG_CHECK_INTERVAL_MS.
 *
 * At exit fase_checker_print_summary lists every site again with the number of
 * unlocked first writes seen there and file:line where debug information is
 * present; PMTHREADS_CHECK=fail then makes the exit status 1 (runtime/
 * startup.c).
 *
 * What a report looks like (one per call site, however often it runs):
 *   pmthreads: warning: write to the persistent heap at 0x6000001230 outside
 *     any lock (not failure-atomic)
 *   pmthreads: warning:   #0 0x55d0c1a01189 unlocked_store+0x9 (/path/prog)
 *   pmthreads: warning:   #1 0x55d0c1a01234 main+0x54 (/path/prog)
 * A call site is the faulting instruction; when that lies in the C library
 * (memcpy, memset, strcpy...) the return addresses up to the first frame
 * outside it are part of the site too, so that every unlocked memcpy of the
 * program is not folded into one report.
 *
 * Limitations (a debugging aid, not a proof):
 *  - Only the first write to a page in an epoch faults.  A write by an
 *    unlocked thread to a page some FASE (or an earlier unlocked write)
 *    already dirtied in the same epoch is not seen.  The short check
 *    interval narrows that window; it does not close it.
 *  - In an epoch in which the tracker gave up page protection (more than
 *    TRACKER_MPROTECT_MAX_RUNS writable runs) nothing is checked.
 *  - Writes made by the kernel (read(), recv() into a heap buffer: the
 *    preload layer pre-faults those pages) are not checked.
 *  - Writes the C library makes outside any pthread lock to memory that
 *    lives in the heap are reported like the program's own: with
 *    PMTHREADS_HEAP=malloc, the loader's bookkeeping at exit, an old-ABI
 *    condition variable inside pthread_cond_wait (which runs outside the
 *    FASE by design), stdio under its internal (non-pthread) lock.  Frames
 *    in a stripped library (libc) name the nearest exported symbol.
 *  - Symbolising uses libunwind's unw_get_proc_name, which allocates (it
 *    copies the object's path).  That is done in the signal handler, with
 *    SIGSEGV unblocked so that the allocator's own first writes to heap pages
 *    (PMTHREADS_HEAP=malloc) are tracked as usual.  It is safe here because a
 *    reported write is never made from inside an allocator: the persistent
 *    heap's operations are FASEs (depth > 0, never reported) and glibc's
 *    allocator never writes the persistent heap.  Unwinding and the
 *    deduplication itself do not allocate.
 */
#ifndef PMT_CHECKER_H
#define PMT_CHECKER_H

#include "base/stats_fields.h"

#include <stdint.h>

/* Distinct call sites remembered; beyond it further new sites are counted
 * but not reported (one warning says so). */
#define CHECKER_MAX_SITES 4096

/* Frames printed per report. */
#define CHECKER_MAX_FRAMES 16

/* Prepare, outside any signal handler: libunwind's per-thread cache (its
 * global cache takes a lock, which a handler must not), a warm-up unwind and
 * symbolisation so that lazy initialisation does not happen in the handler,
 * and the C library's address range.  Idempotent.  Returns 0 or -1 with
 * err_get() set. */
int fase_checker_init(void);

/* The tracker write hook: a first write to the tracked page holding addr,
 * by the calling thread, from a SIGSEGV handler whose context is ucontext
 * (a ucontext_t *).  Reports it when the thread is outside every FASE and
 * the site is new.  Async-signal-safe in the sense above. */
void fase_checker_on_write(void *addr, void *ucontext);

/* X(kind, field, report key): base/stats_fields.h. */
#define FASE_CHECKER_STATS_FIELDS(X) \
	X(count, writes_checked, "checker_writes_checked") /* hook calls */ \
	X(count, unlocked_writes, "checker_unlocked_writes") /* of those, with fase_depth() == 0 */ \
	X(count, sites_reported, "checker_sites_reported") /* distinct sites, each reported once */ \
	X(count, sites_dropped, "checker_sites_dropped") /* new sites beyond CHECKER_MAX_SITES */

struct fase_checker_stats {
	FASE_CHECKER_STATS_FIELDS(STATS_DECLARE)
};
void fase_checker_get_stats(struct fase_checker_stats *out);
/* Unlocked writes seen so far (PMTHREADS_CHECK=fail turns them into exit
 * status 1). */
uint64_t fase_checker_violations(void);

/* At exit, outside any signal handler: one line of totals, and when there
 * were unlocked writes each reported site again with its write count and
 * file:line (lib/diagnose/symbolize.h).  Allocates. */
void fase_checker_print_summary(void);

#endif
