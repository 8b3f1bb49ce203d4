/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tracker backends -- struct tracker and the operations tracker.c dispatches
 * to.  Private to the track module (tracker*.c); everything else uses
 * tracker.h.
 */
#ifndef PMT_TRACKER_BACKEND_H
#define PMT_TRACKER_BACKEND_H

#include "track/tracker.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tracker_ops {
	const char *name;
	/* Start tracking: every page of the range counts as clean now.
	 * Returns 0 or -1 with err_get() set. */
	int (*attach)(struct tracker *t);
	/* Store the indices (page numbers from base, ascending) of every page
	 * written since attach or the previous collection into pages (room for
	 * max), re-arm tracking for them, and return how many.  Called only at
	 * a quiescent point.  If more than max pages are dirty, returns the
	 * first max and leaves the rest dirty for the next call. */
	size_t (*collect_dirty)(struct tracker *t, uint64_t *pages, size_t max);
	/* Without re-arming anything, set written[k] to 1 for each pages[k]
	 * (ascending, as collect_dirty returned them) written since the
	 * previous collection, and to 0 for the others; those pages stay
	 * marked for the next collection.  The epoch's write-back (epoch.c)
	 * asks this after it read the live pages of a batch: a page written
	 * meanwhile may hold a mix of two states.  Returns 0, or -1 when the
	 * backend cannot tell (the caller must then count every page as
	 * written).  Not concurrently with collect_dirty (they share buffers:
	 * the epoch thread calls both); cheap: no fault, no protection change. */
	int (*written_since)(struct tracker *t, const uint64_t *pages, size_t n,
			     uint8_t *written);
	/* Optional (tracker_note_changed): which of a collection's pages the
	 * write-back found changed.  NULL: the backend has no use for it. */
	void (*note_changed)(struct tracker *t, const uint64_t *pages, size_t n,
			     const uint8_t *changed);
	/* Optional (tracker_written_unknown): set unknown[k] for the pages of
	 * the last collection reported without a write seen; returns how
	 * many.  NULL: every page reported was seen written. */
	size_t (*written_unknown)(struct tracker *t, const uint64_t *pages, size_t n,
				  uint8_t *unknown);
	/* Optional (tracker_cover): make first writes to [base, base+len)
	 * tracked exactly from now on.  NULL: attach already did. */
	int (*cover)(struct tracker *t, size_t len);
	/* Stop tracking; the range stays mapped and becomes plainly writable.
	 * Safe in a fork child (acts on the child's own mappings only). */
	void (*detach)(struct tracker *t);
};

struct tracker {
	const struct tracker_ops *ops;
	void *base;
	size_t len;
	size_t extent;		/* collections look at [base, base+extent) only;
				 * see tracker_set_extent */
	size_t page_size;
	unsigned open_flags;	/* TRACKER_OPEN_* */
	struct tracker_stats stats;
	void *impl;
};

/* The backends. */
extern const struct tracker_ops tracker_uffd_ops;
extern const struct tracker_ops tracker_mprotect_ops;

/* What a backend keeps of the process's other threads, dropped in a fork
 * child before any tracker is detached there (tracker_atfork_child). */
void tracker_mprotect_atfork_child(void);

#endif
