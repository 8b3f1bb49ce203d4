/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * restore -- making a reopened pool's consistent image the shadow heap's
 * content, without copying it all before the program may run.
 *
 * Owns: the order "invalidate torn copies (durable) -> attach the write
 * tracker -> serve the heap" at start-up, and the two ways of serving it:
 *   lazy   (uffd tracker) the tracker's userfaultfd is registered for
 *          missing-page faults too, over the part of the heap that has
 *          persisted pages; a restorer thread answers each fault with
 *          UFFDIO_COPY of the page's valid copy (pool_valid_copy) in
 *          write-protect mode, so a restored page counts as clean for the
 *          tracker (it is already in the pool) and the program's first write
 *          to it is tracked as usual; a fault brings the next FAULT_AROUND
 *          pages along before the toucher is woken; between faults the same
 *          thread restores the remaining pages in the background.  Pages
 *          never persisted are zero-filled (write-protected) on first touch.  The heap is usable as soon
 *          as the registration is made: time to usable does not grow with
 *          the heap.
 *   eager  (mprotect tracker, PMTHREADS_RESTORE=eager, or uffd unavailable)
 *          every persisted page is copied before the tracker attaches
 *          (recovery_restore_image).
 * A page is restored from the copy that is valid when it is restored; that
 * is the one valid at start-up, because an epoch only rewrites the older
 * copy of a page that was written, and a page is written only once present
 * (restored).  Neither path writes the pool after the invalidation, so a
 * crash at any point of restoring is followed by the same recovery.
 *
 * Every page with a persisted image is verified against its checksum as it
 * is restored (recovery_verify_page).  The eager path refuses the pool
 * before the program runs (restore_open fails).  The lazy path finds a bad
 * page after start-up, while the program runs: it prints the page, its heap
 * address, its copy and epoch and the fix, and ends the process with
 * _exit(RESTORE_REFUSED_EXIT) -- the page cannot be served, an older copy
 * would mix epochs, and a program that goes on without it could not be
 * trusted.  The damaged copy is never written (a page is written only once
 * restored), so the next start finds it again.
 *
 * A read of the pool its storage cannot serve (a read error of the file
 * arrives as SIGBUS at the load) ends the process the same way on either
 * path, in the handler (nvm.h's read guard, around every read of the pool
 * here: the scan, the eager copy, the restorer thread, restore_finish and
 * restore_prefault): the message names the pool and what of it could not be
 * read (a page's copy, a table), says that its storage failed during the
 * restore and that the pool was left as it was -- on the eager path nothing
 * of the open was written yet -- and the status is RESTORE_REFUSED_EXIT.
 * The runtime's SIGBUS handler is installed before restore_open for it.
 *
 * fork(): the child loses the userfaultfd registration (no
 * UFFD_FEATURE_EVENT_FORK), so a pthread_atfork prepare handler completes
 * the restore in the parent first.  Shutdown completes it too (the heap stays
 * usable after the runtime detaches).
 */
#ifndef PMT_RESTORE_H
#define PMT_RESTORE_H

#include "base/config.h"
#include "base/stats_fields.h"
#include "persist/pool.h"
#include "track/tracker.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The exit status of a process whose lazy restore met a damaged page, or
 * whose restore could not read the pool. */
#define RESTORE_REFUSED_EXIT 1

struct restore_options {
	enum restore_policy policy;	/* config.h: auto | eager | lazy */
	/* Tests only: no background pass, pages are restored only when
	 * touched (or by restore_finish). */
	bool no_background;
};

/* X(kind, field, report key): base/stats_fields.h.  lazy is the report's
 * "restore": "lazy" | "eager", written by hand. */
#define RESTORE_STATS_FIELDS(X) \
	X(flag, lazy, NULL) /* the lazy path serves the heap */ \
	X(count, pages, "recovered_pages") /* pages with a persisted image */ \
	X(value, usable_ns, "recovery_ns") /* from restore_open to a usable heap */ \
	/* from restore_open to every page restored; 0 while pages are pending */ \
	X(value, complete_ns, "restore_complete_ns") \
	X(count, eager_pages, "restored_eager") /* copied before the program ran */ \
	X(count, fault_pages, "restored_on_fault") /* lazy: restored on first touch */ \
	X(count, background_pages, "restored_background") /* lazy: by the background pass */ \
	/* lazy: restored by restore_finish (fork, shutdown) or a prefault */ \
	X(count, finish_pages, "restored_finish") \
	/* lazy: never-persisted pages zero-filled on first touch */ \
	X(count, zero_pages, "restore_zero_fills") \
	/* lazy: kernel accesses wait (not EFAULT) */ \
	X(flag, kernel_faults, "restore_kernel_faults")

struct restore_stats {
	RESTORE_STATS_FIELDS(STATS_DECLARE)
};

struct restore;

/* Open the write tracker of kind over the heap [shadow, shadow+len) and make
 * the pool's consistent image its content: on a new pool (p->created) only
 * the tracker; on a reopened one the lazy or the eager path as above.
 * Nothing is written to the pool: torn copies are never served
 * (pool_valid_copy) and are invalidated by the caller once every check of
 * the open passed (persist_invalidate_torn, after pool_accept), or by the
 * first epoch.  *tracker_out is the tracker (close
 * it with tracker_close after restore_close).  *out is NULL when nothing is
 * pending (eager or new pool).  Returns 0 or -1 with err_get() set (nothing
 * left open; a page that fails its checksum on the eager path is one such
 * error, naming the page). */
int restore_open(struct restore **out, struct tracker **tracker_out, struct pool *p, void *shadow,
		 size_t len, enum tracker_kind kind, const struct restore_options *o);

/* Restore every page not yet restored, now, on the calling thread (the
 * restorer keeps running).  Idempotent; NULL is a no-op. */
void restore_finish(struct restore *r);

/* Restore the pages of [addr, addr+len) that are pending, on the calling
 * thread: for system calls that write the heap when the kernel's own faults
 * cannot wait for the restorer (user-mode-only userfaultfd).  Any part outside
 * the heap is ignored; cheap when nothing is pending. */
void restore_prefault(void *addr, size_t len);

/* restore_finish, then stop the restorer thread and free.  Call before
 * tracker_close (the restorer reads the tracker's descriptor).  NULL is a
 * no-op. */
void restore_close(struct restore *r);

/* In a fork child: forget r without touching the parent's thread. */
void restore_abandon(struct restore *r);

/* Counters (of the last restore_open in this process when r is NULL). */
void restore_get_stats(const struct restore *r, struct restore_stats *out);

#endif
