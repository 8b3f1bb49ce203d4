/* SPDX-License-Identifier: BSD-3-Clause */
/* nvm msync backend -- an ordinary file: flush records the page range, fence
 * msyncs the recorded ranges (real durability on SSDs and disks).  See nvm.h. */
#include "persist/nvm_backend.h"

#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* A fence msyncs the span from the lowest to the highest byte flushed since
 * the previous fence, in one call.  msync(MS_SYNC) writes back only the
 * dirty pages of the range, but each call is a synchronous round trip to
 * the device (and, on most file systems, a journal commit): one call per
 * flushed range made an epoch cost one device flush per dirty page.  Pages
 * in the span that were written but not flushed may reach the file early;
 * the nvm contract allows that (on pmem a cache line can be evicted at any
 * time), and the crash simulator tests that the persist algorithm copes. */
struct msync_state {	/* the writer's (nvm.h) */
	uintptr_t page_mask;	/* set at init */
	uintptr_t start, end;	/* page-aligned; start == end: nothing flushed */
};

static void msync_flush(struct nvm *n, const void *addr, size_t len)
{
	struct msync_state *s = n->impl;
	if (len == 0)
		return;
	uintptr_t start = (uintptr_t)addr & ~s->page_mask;
	uintptr_t end = ((uintptr_t)addr + len + s->page_mask) & ~s->page_mask;
	if (s->start == s->end) {
		s->start = start;
		s->end = end;
		return;
	}
	if (start < s->start)
		s->start = start;
	if (end > s->end)
		s->end = end;
}

static void msync_fence(struct nvm *n)
{
	struct msync_state *s = n->impl;
	if (s->start == s->end)
		return;
	int r = prim_msync((void *)s->start, s->end - s->start);
	n->stats.device_flushes++;
	if (r != 0) {
		int e = errno;
		/* Latched (nvm.h): the epoch being written is not published,
		 * and the runtime says so loudly once (runtime.c). */
		log_msg(LOG_DEBUG, "msync of %zu bytes of the pool failed (%s)",
			(size_t)(s->end - s->start), strerror(e));
		nvm_latch_error(n, e);
	}
	s->start = s->end = 0;
}

static void msync_unmap(struct nvm *n)
{
	if (n->impl != NULL)
		prim_unmap(n->impl, sizeof(struct msync_state));
	n->impl = NULL;
}

static const struct nvm_ops msync_ops = {
	.name = "msync",
	.flush = msync_flush,
	.fence = msync_fence,
	.unmap = msync_unmap,
	.copy_flush = NULL,
};

int nvm_msync_init(struct nvm *n)
{
	/* The runtime's memory, not malloc's (nvm.c). */
	struct msync_state *s = prim_map_any(sizeof(*s));
	if (s == NULL) {
		err_set_errno(ENOMEM, "cannot set up the msync backend");
		return -1;
	}
	s->page_mask = (uintptr_t)prim_page_size() - 1;
	n->ops = &msync_ops;
	n->impl = s;
	return 0;
}
