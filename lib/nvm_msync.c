/* nvm msync backend -- an ordinary file: flush records the page range, fence
 * msyncs the recorded ranges (real durability on SSDs and disks).  See nvm.h. */
#include "nvm_backend.h"

#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Enough for one epoch's seq-table lines and page runs in the common case;
 * when it fills up the ranges are written back early, which the contract
 * allows (a flush may reach the media any time before the fence). */
#define MSYNC_RANGES 256

struct msync_range {
	uintptr_t start, end;	/* page-aligned */
};

struct msync_state {
	uintptr_t page_mask;
	size_t count;
	struct msync_range r[MSYNC_RANGES];
};

static void sync_range(struct nvm *n, const struct msync_range *r)
{
	if (msync((void *)r->start, r->end - r->start, MS_SYNC) != 0) {
		n->stats.errors++;
		log_msg(LOG_ERR, "msync of %zu bytes of the pool failed (%s): the last epoch may "
			"not be durable", (size_t)(r->end - r->start), strerror(errno));
	}
}

static void sync_all(struct nvm *n, struct msync_state *s)
{
	for (size_t i = 0; i < s->count; i++)
		sync_range(n, &s->r[i]);
	s->count = 0;
}

static void msync_flush(struct nvm *n, const void *addr, size_t len)
{
	struct msync_state *s = n->impl;
	if (len == 0)
		return;
	uintptr_t start = (uintptr_t)addr & ~s->page_mask;
	uintptr_t end = ((uintptr_t)addr + len + s->page_mask) & ~s->page_mask;
	if (s->count > 0) {
		struct msync_range *last = &s->r[s->count - 1];
		if (start <= last->end && end >= last->start) {
			if (start < last->start)
				last->start = start;
			if (end > last->end)
				last->end = end;
			return;
		}
	}
	if (s->count == MSYNC_RANGES)
		sync_all(n, s);
	s->r[s->count++] = (struct msync_range){ start, end };
}

static void msync_fence(struct nvm *n) { sync_all(n, n->impl); }

static void msync_unmap(struct nvm *n)
{
	free(n->impl);
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
	struct msync_state *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		err_set_errno(ENOMEM, "cannot set up the msync backend");
		return -1;
	}
	s->page_mask = (uintptr_t)sysconf(_SC_PAGESIZE) - 1;
	n->ops = &msync_ops;
	n->impl = s;
	return 0;
}
