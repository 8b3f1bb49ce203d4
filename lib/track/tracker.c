/* SPDX-License-Identifier: BSD-3-Clause */
/* tracker -- backend choice and the calls common to every backend.  See
 * tracker.h. */
#include "track/tracker_backend.h"

#include "base/assert.h"
#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static const struct tracker_ops *choose(enum tracker_kind kind)
{
	switch (kind) {
	case TRACKER_AUTO:
		return tracker_uffd_supported() ? &tracker_uffd_ops : &tracker_mprotect_ops;
	case TRACKER_UFFD:
		if (!tracker_uffd_supported()) {
			err_set("PMTHREADS_TRACKER=uffd needs Linux >= 6.7 with userfaultfd "
				"(UFFD_FEATURE_WP_ASYNC and WP_UNPOPULATED) and the PAGEMAP_SCAN "
				"ioctl, but %s; use PMTHREADS_TRACKER=mprotect (or auto)",
				tracker_uffd_unsupported_reason());
			return NULL;
		}
		return &tracker_uffd_ops;
	case TRACKER_MPROTECT:
		return &tracker_mprotect_ops;
	}
	err_set("unknown write tracker kind %d (expected auto, uffd or mprotect)", (int)kind);
	return NULL;
}

int tracker_open(struct tracker **out, enum tracker_kind kind, void *base, size_t len)
{
	return tracker_open_flags(out, kind, base, len, 0);
}

int tracker_open_flags(struct tracker **out, enum tracker_kind kind, void *base, size_t len,
		       unsigned flags)
{
	size_t ps = prim_page_size();
	*out = NULL;
	if (base == NULL || len == 0 || (uintptr_t)base % ps != 0 || len % ps != 0) {
		err_set("cannot track writes to %p + %zu: the range must be non-empty and "
			"page-aligned", base, len);
		return -1;
	}
	const struct tracker_ops *ops = choose(kind);
	if (ops == NULL)
		return -1;

	/* Not malloc: in PMTHREADS_HEAP=malloc mode this runs while the
	 * malloc wrappers are still bootstrapping. */
	struct tracker *t = prim_map_any(sizeof(*t));
	if (t == NULL) {
		err_set_errno(errno, "cannot allocate the write tracker");
		return -1;
	}
	t->ops = ops;
	t->base = base;
	t->len = len;
	t->extent = len;
	t->page_size = ps;
	t->open_flags = flags;
	PMT_ASSERT((uintptr_t)base % ps == 0 && len % ps == 0);	/* checked above */

	/* Base pages only: a transparent huge page would make both backends
	 * report 512 pages for one write.  Failure (THP not configured) is
	 * harmless. */
	prim_no_huge_pages(base, len);

	int r = ops->attach(t);
	if (r != 0 && kind == TRACKER_AUTO && ops == &tracker_uffd_ops) {
		/* The kernel has the features but refused them here (say, a
		 * seccomp policy): auto means whatever works. */
		log_msg(LOG_INFO, "uffd write tracking unavailable (%s); using mprotect", err_get());
		t->ops = ops = &tracker_mprotect_ops;
		r = ops->attach(t);
	}
	if (r != 0) {
		prim_unmap(t, sizeof(*t));
		return -1;
	}
	*out = t;
	return 0;
}

void tracker_atfork_child(void)
{
	tracker_mprotect_atfork_child();
}

void tracker_close(struct tracker *t)
{
	if (t == NULL)
		return;
	t->ops->detach(t);
	prim_unmap(t, sizeof(*t));
}

int tracker_cover(struct tracker *t, size_t len)
{
	if (t->ops->cover == NULL)
		return 0;
	return t->ops->cover(t, len < t->len ? len : t->len);
}

void tracker_set_extent(struct tracker *t, size_t extent)
{
	if (extent > t->len)
		extent = t->len;
	t->extent = (extent + t->page_size - 1) / t->page_size * t->page_size;
	PMT_ASSERT(t->extent <= t->len && t->extent % t->page_size == 0);
}

const char *tracker_name(const struct tracker *t) { return t->ops->name; }

void tracker_get_stats(const struct tracker *t, struct tracker_stats *out)
{
	*out = t->stats;
	/* The mprotect backend counts faults in its signal handler. */
	out->faults = __atomic_load_n(&t->stats.faults, __ATOMIC_RELAXED);
}

size_t tracker_collect_dirty(struct tracker *t, uint64_t *pages, size_t max)
{
	size_t n = t->ops->collect_dirty(t, pages, max);
	PMT_ASSERT(n <= max);
	/* Ascending and unique (tracker.h): written_since walks it beside the
	 * written regions. */
	for (size_t k = 1; k < n; k++)
		PMT_ASSERT(pages[k - 1] < pages[k]);
	PMT_ASSERT(n == 0 || pages[n - 1] < t->len / t->page_size);
	t->stats.collections++;
	t->stats.pages_collected += n;
	return n;
}

void tracker_note_changed(struct tracker *t, const uint64_t *pages, size_t n,
			  const uint8_t *changed)
{
	if (t->ops->note_changed != NULL && n != 0)
		t->ops->note_changed(t, pages, n, changed);
}

size_t tracker_written_unknown(struct tracker *t, const uint64_t *pages, size_t n,
			       uint8_t *unknown)
{
	if (t->ops->written_unknown == NULL || n == 0)
		return 0;
	return t->ops->written_unknown(t, pages, n, unknown);
}

int tracker_written_since(struct tracker *t, const uint64_t *pages, size_t n, uint8_t *written)
{
	t->stats.rescans++;
	if (n == 0)
		return 0;
	PMT_ASSERT(pages[n - 1] < t->len / t->page_size);
	for (size_t k = 1; k < n; k++)
		PMT_ASSERT(pages[k - 1] < pages[k]);
	int r = t->ops->written_since(t, pages, n, written);
	if (r != 0) {
		t->stats.rescan_failures++;
		memset(written, 1, n);
	}
	return r;
}
