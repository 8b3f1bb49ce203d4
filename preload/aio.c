/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * aio -- POSIX asynchronous I/O: what a request writes in flight is pinned
 * writable from submission until its completion is seen
 * (lib/runtime/aio_pins.h), and glibc's own bookkeeping for it, which its
 * helper threads write with every signal blocked, is allocated outside the
 * heap.  The *64 names take the same layout on 64-bit systems.  A
 * lio_listio bound to glibc's pre-2.4 version is served by the current one.
 */
/* Both names defined here: without this, <aio.h> would make aio_read an
 * alias of aio_read64. */
#undef _FILE_OFFSET_BITS
#include "base/export.h"
#include "preload.h"
#include "real.h"
#include "runtime/interpose.h"

#include <aio.h>
#include <errno.h>

_Static_assert(sizeof(struct aiocb64) == sizeof(struct aiocb), "64-bit off_t");

static int pin(struct aiocb *cb, bool written)
{
	if (aio_pin_request(cb, sizeof(*cb), (void *)cb->aio_buf, cb->aio_nbytes, written) != 0) {
		errno = EAGAIN; /* "not queued due to resource limitations" */
		return -1;
	}
	return 0;
}

/* glibc queues the request in blocks it mallocs (and reallocs) here, on the
 * caller's thread: from the next allocator, not the heap. */
#define QUEUED(CALL)                            \
	({                                      \
		preload_libc_alloc_begin();     \
		int r_ = (CALL);                \
		preload_libc_alloc_end();       \
		r_;                             \
	})

static int submit(struct aiocb *cb, bool written, int (*fn)(struct aiocb *))
{
	if (pin(cb, written) != 0)
		return -1;
	int r = QUEUED(fn(cb));
	if (r != 0) {
		int e = errno;
		aio_pin_release(cb);
		errno = e;
	}
	return r;
}

PMT_EXPORT int aio_read(struct aiocb *cb)
{
	return submit(cb, true, REAL(aio_read));
}

PMT_EXPORT int aio_write(struct aiocb *cb)
{
	return submit(cb, false, REAL(aio_write));
}

PMT_EXPORT int aio_fsync(int op, struct aiocb *cb)
{
	if (aio_pin_request(cb, sizeof(*cb), NULL, 0, false) != 0) {
		errno = EAGAIN;
		return -1;
	}
	int r = QUEUED(REAL(aio_fsync)(op, cb));
	if (r != 0) {
		int e = errno;
		aio_pin_release(cb);
		errno = e;
	}
	return r;
}

PMT_EXPORT int lio_listio(int mode, struct aiocb *const list[], int nent, struct sigevent *sig)
{
	for (int i = 0; i < nent; i++) {
		if (list[i] == NULL || list[i]->aio_lio_opcode == LIO_NOP)
			continue;
		if (pin(list[i], list[i]->aio_lio_opcode == LIO_READ) != 0) {
			int e = errno;
			while (i-- > 0)
				if (list[i] != NULL)
					aio_pin_release(list[i]);
			errno = e;
			return -1;
		}
	}
	int r = QUEUED(REAL(lio_listio)(mode, list, nent, sig));
	/* LIO_WAIT returned 0: every request completed.  On an error some
	 * requests may be in flight; they stay pinned until seen. */
	if (mode == LIO_WAIT && r == 0) {
		int e = errno;
		for (int i = 0; i < nent; i++)
			if (list[i] != NULL)
				aio_pin_release(list[i]);
		errno = e;
	}
	return r;
}

PMT_EXPORT int aio_error(const struct aiocb *cb)
{
	int r = REAL(aio_error)(cb);
	if (r != EINPROGRESS && r != -1 && atomic_load_explicit(&aio_pins_in_use,
								memory_order_relaxed) != 0) {
		int e = errno;
		aio_pin_release(cb);
		errno = e;
	}
	return r;
}

PMT_EXPORT ssize_t aio_return(struct aiocb *cb)
{
	ssize_t r = REAL(aio_return)(cb);
	if (atomic_load_explicit(&aio_pins_in_use, memory_order_relaxed) != 0) {
		int e = errno;
		aio_pin_release(cb);
		errno = e;
	}
	return r;
}

PMT_EXPORT int aio_read64(struct aiocb64 *cb)
{
	return aio_read((struct aiocb *)cb);
}

PMT_EXPORT int aio_write64(struct aiocb64 *cb)
{
	return aio_write((struct aiocb *)cb);
}

PMT_EXPORT int aio_fsync64(int op, struct aiocb64 *cb)
{
	return aio_fsync(op, (struct aiocb *)cb);
}

PMT_EXPORT int lio_listio64(int mode, struct aiocb64 *const list[], int nent,
			    struct sigevent *sig)
{
	return lio_listio(mode, (struct aiocb *const *)list, nent, sig);
}

PMT_EXPORT int aio_error64(const struct aiocb64 *cb)
{
	return aio_error((const struct aiocb *)cb);
}

PMT_EXPORT ssize_t aio_return64(struct aiocb64 *cb)
{
	return aio_return((struct aiocb *)cb);
}
