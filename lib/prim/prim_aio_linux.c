/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prim_aio -- asynchronous writes of a file opened for direct I/O: Linux's
 * native AIO (io_setup, io_submit, io_getevents), by raw system calls (no
 * libaio).  See prim.h.  On a file opened O_DIRECT the kernel queues each
 * write to the device and returns; on anything else a write completes
 * inside io_submit, which is still correct, only not asynchronous.
 */
#include "prim/prim.h"

#include <errno.h>
#include <linux/aio_abi.h>
#include <string.h>
#include <sys/syscall.h>

int prim_aio_setup(unsigned nr, uint64_t *ctx)
{
	aio_context_t c = 0;
	if (prim_syscall(SYS_io_setup, nr, &c) != 0)
		return -1;
	*ctx = (uint64_t)c;
	return 0;
}

void prim_aio_destroy(uint64_t ctx)
{
	(void)prim_syscall(SYS_io_destroy, (aio_context_t)ctx);
}

long prim_aio_submit(uint64_t ctx, const struct prim_aio_write *w, size_t n)
{
	struct iocb cbs[PRIM_AIO_BATCH];
	struct iocb *ptrs[PRIM_AIO_BATCH];
	if (n > PRIM_AIO_BATCH)
		n = PRIM_AIO_BATCH;
	for (size_t i = 0; i < n; i++) {
		memset(&cbs[i], 0, sizeof(cbs[i]));
		cbs[i].aio_lio_opcode = IOCB_CMD_PWRITE;
		cbs[i].aio_fildes = (uint32_t)w[i].fd;
		cbs[i].aio_buf = (uint64_t)(uintptr_t)w[i].buf;
		cbs[i].aio_nbytes = w[i].len;
		cbs[i].aio_offset = (int64_t)w[i].off;
		cbs[i].aio_data = w[i].tag;
		ptrs[i] = &cbs[i];
	}
	/* The kernel copies each iocb at submission: they may live on the
	 * stack.  EINTR and EAGAIN before any was taken: retried by the
	 * caller, who reaps first. */
	return prim_syscall(SYS_io_submit, (aio_context_t)ctx, (long)n, ptrs);
}

long prim_aio_reap(uint64_t ctx, size_t min, struct prim_aio_done *out, size_t max)
{
	struct io_event ev[PRIM_AIO_BATCH];
	if (max > PRIM_AIO_BATCH)
		max = PRIM_AIO_BATCH;
	if (min > max)
		min = max;
	long got;
	do
		got = prim_syscall(SYS_io_getevents, (aio_context_t)ctx, (long)min, (long)max, ev, NULL);
	while (got < 0 && errno == EINTR);
	for (long i = 0; i < got; i++) {
		out[i].tag = ev[i].data;
		out[i].res = ev[i].res;
	}
	return got;
}
