/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm_log_direct -- the log backend's whole pages written straight to the
 * file (nvm_write_direct).  See struct log_direct in nvm_log_internal.h.
 *
 * Owns: the descriptor for direct I/O, the AIO context, the staging ring
 * the write-back prepares pages in, the writes queued and in flight, and
 * their drain, which every sync of the device does first (nvm_log.c's
 * dev_sync): a sync that returned has the pages of every write before it.
 * Compiled with the test hooks in test builds (PMT_TEST_HOOKS): a write
 * here counts as one of the device's for nvm_log_fail_io.
 */
#include "base/log.h"
#include "base/own_fds.h"
#include "persist/nvm_log_internal.h"

#include <errno.h>
#include <string.h>

/* Runs of whole pages shorter than this go through the page cache when
 * they cannot be written asynchronously: a direct write waits for the
 * device (~70-100 us here, a virtio disk), which scattered pages would pay
 * one by one, where the page cache takes them at memory speed and the next
 * sync writes them out together. */
#define SYNC_DIRECT_MIN_BYTES (256u << 10)

void nvm_log_direct_init(struct log_dev *d)
{
	d->direct.fd = -1;
	d->direct.given = UINT64_MAX;
	d->direct.file = d->fd;
}

/* The descriptor for direct I/O, the context and the ring, at the first
 * whole page; what cannot be had is done without (synchronous writes, the
 * page cache). */
static void set_up(struct log_direct *x, int fd)
{
	if (x->tried)
		return;
	x->tried = true;
	x->fd = prim_reopen_direct(fd);
	if (x->fd < 0)
		return;
	own_fd_keep(&x->fd, "pool file (direct I/O)");
	x->stage = prim_map_any(DIRECT_STAGE_BYTES);
	if (x->stage != NULL && prim_aio_setup(DIRECT_INFLIGHT, &x->aio) == 0)
		return;
	log_msg(LOG_DEBUG, "no asynchronous writes for the pool's whole pages (%s): written one "
		"by one", strerror(errno));
	if (x->stage != NULL)
		prim_unmap(x->stage, DIRECT_STAGE_BYTES);
	x->stage = NULL;
	x->aio = 0;
}

/* What completed, recorded; the ring's tail moved past the oldest writes
 * that did.  Waits for at least min of the writes submitted (at most as
 * many as are in flight).  0, or the errno of reaping. */
static int reap(struct log_direct *x, size_t min)
{
	if (min > x->inflight)
		min = (size_t)x->inflight;
	struct prim_aio_done done[PRIM_AIO_BATCH];
	long got = prim_aio_reap(x->aio, min, done, PRIM_AIO_BATCH);
	if (got < 0)
		return errno;
	for (long i = 0; i < got; i++) {
		struct direct_write *w = &x->fl[done[i].tag % DIRECT_INFLIGHT];
		const size_t len = (size_t)(w->end - w->start);
		/* A file system that opens for direct I/O but takes no such
		 * write (EINVAL): this one again through the page cache, and
		 * no more staged. */
		if (done[i].res == -EINVAL) {
			x->stopped = true;
			done[i].res = pwrite_all(*x->file, x->stage + w->start % DIRECT_STAGE_BYTES,
						 len, w->off) == 0 ? (int64_t)len : -EIO;
		}
		w->done = true;
		x->inflight--;
		if (done[i].res != (int64_t)len && x->error == 0)
			x->error = done[i].res < 0 ? (int)-done[i].res : EIO;
	}
	while (x->first != x->next && x->fl[x->first % DIRECT_INFLIGHT].done)
		x->first++;
	x->tail = x->first != x->next ? x->fl[x->first % DIRECT_INFLIGHT].start : x->head;
	return 0;
}

/* The queued writes handed to the kernel.  0, or an errno. */
static int submit(struct log_direct *x)
{
	size_t at = 0;
	while (at < x->nqueued) {
		long took = prim_aio_submit(x->aio, x->queued + at, x->nqueued - at);
		if (took > 0) {
			at += (size_t)took;
			x->inflight += (uint64_t)took;
			continue;
		}
		/* EAGAIN: the kernel is out of room for now; what completes
		 * frees some -- if anything is in flight to complete. */
		int e = took < 0 ? errno : EIO;
		if ((e == EAGAIN || e == EINTR) && x->inflight != 0) {
			if ((e = reap(x, 1)) != 0)
				return e;
			continue;
		}
		/* Refused (a seccomp filter, no AIO in this kernel): the rest
		 * now, one by one, and nothing more staged. */
		x->stopped = true;
		for (; at < x->nqueued; at++) {
			const struct prim_aio_write *q = &x->queued[at];
			if (prim_pwrite_all(q->fd, q->buf, q->len, (off_t)q->off) != 0)
				return errno;
			x->fl[q->tag % DIRECT_INFLIGHT].done = true;
		}
		while (x->first != x->next && x->fl[x->first % DIRECT_INFLIGHT].done)
			x->first++;
		x->tail = x->first != x->next ? x->fl[x->first % DIRECT_INFLIGHT].start : x->head;
	}
	x->nqueued = 0;
	return 0;
}

static void free_fd(struct log_direct *x)
{
	if (x->fd >= 0)
		own_fd_close(&x->fd);
}

void nvm_log_direct_reserve(struct log_dev *d)
{
	if (d->sim == NULL)
		set_up(&d->direct, *d->fd);
}

void *nvm_log_direct_stage(struct log_dev *d, size_t len)
{
	struct log_direct *x = &d->direct;
	if (d->sim != NULL || len > DIRECT_STAGE_BYTES / 4)
		return NULL;
	set_up(x, *d->fd);
	if (x->aio == 0 || x->error != 0 || x->stopped)
		return NULL;
	uint64_t pos = x->head;
	if (pos % DIRECT_STAGE_BYTES + len > DIRECT_STAGE_BYTES)
		pos = (pos / DIRECT_STAGE_BYTES + 1) * DIRECT_STAGE_BYTES;
	/* Room, and a slot for the write: the oldest writes completed. */
	while (pos + len - x->tail > DIRECT_STAGE_BYTES ||
	       x->next - x->first + 1 > DIRECT_INFLIGHT) {
		if (submit(x) != 0 || reap(x, 1) != 0) {
			x->error = x->error != 0 ? x->error : EIO;
			return NULL;
		}
	}
	x->given = pos;
	return x->stage + pos % DIRECT_STAGE_BYTES;
}

/* Synchronously: large runs direct, small ones through the page cache. */
static int write_now(struct log_direct *x, int fd, const void *buf, size_t len, uint64_t off)
{
	if (x->fd >= 0 && len >= SYNC_DIRECT_MIN_BYTES) {
		if (prim_pwrite_all(x->fd, buf, len, (off_t)off) == 0)
			return 0;
		if (errno != EINVAL)
			return errno;
		log_msg(LOG_DEBUG, "the pool's file system refuses direct I/O: whole pages go "
			"through the page cache");
		free_fd(x);
	}
	return pwrite_all(fd, buf, len, off);
}

int nvm_log_direct_write(struct log_dev *d, const void *buf, size_t len, uint64_t off)
{
	struct log_direct *x = &d->direct;
#ifdef PMT_TEST_HOOKS
	if (dev_fails(d))
		return d->fail_err;
#endif
	x->unsynced = true;
	if (d->sim != NULL)
		return nvm_log_sim_write(d, buf, len, off);
	set_up(x, *d->fd);
	if (x->error != 0)
		return x->error;
	uint64_t pos = x->given;
	x->given = UINT64_MAX;
	if (x->aio == 0 || pos == UINT64_MAX || buf != x->stage + pos % DIRECT_STAGE_BYTES)
		return write_now(x, *d->fd, buf, len, off);
	/* Staged: queued, handed to the kernel a batch at a time. */
	struct direct_write *w = &x->fl[x->next % DIRECT_INFLIGHT];
	*w = (struct direct_write){ pos, pos + len, off, false };
	x->queued[x->nqueued++] = (struct prim_aio_write){ x->fd, buf, len, off, x->next };
	x->next++;
	x->head = pos + len;
	if (x->nqueued == PRIM_AIO_BATCH)
		return submit(x);
	return 0;
}

int nvm_log_direct_drain(struct log_dev *d)
{
	struct log_direct *x = &d->direct;
	if (x->aio != 0) {
		int e = submit(x);
		while (e == 0 && x->inflight != 0)
			e = reap(x, (size_t)x->inflight);
		if (e != 0 && x->error == 0)
			x->error = e;
	}
	return x->error;
}

void nvm_log_direct_free(struct log_dev *d, bool drain)
{
	struct log_direct *x = &d->direct;
	/* A fork child's copy (drain false): the context and the writes are
	 * the parent's. */
	if (drain && x->aio != 0) {
		(void)nvm_log_direct_drain(d);
		prim_aio_destroy(x->aio);
	}
	x->aio = 0;
	if (x->stage != NULL)
		prim_unmap(x->stage, DIRECT_STAGE_BYTES);
	x->stage = NULL;
	free_fd(x);
}
