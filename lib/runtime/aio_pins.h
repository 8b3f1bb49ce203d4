/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * aio_pins -- persistent-heap memory that an asynchronous I/O request
 * writes while it is in flight.
 *
 * Owns: which requests (by the address of their control block) are in
 * flight, and keeping what their I/O writes writable under the mprotect
 * tracker (runtime_pin_writable) from submission until the program sees the
 * request complete.  glibc serves aio_read, aio_write, aio_fsync and
 * lio_listio on helper threads of its own that block every signal: the
 * kernel's write into a read-only buffer fails with EFAULT there, and the
 * helper's store of the result into a read-only control block is a fault
 * the kernel can only end the process for.  So the control block and a
 * read's buffer are pinned before the request is queued (and, after a
 * recovery, restored first: the kernel cannot fault in a lazily restored
 * page), and unpinned when aio_error reports the request done, aio_return
 * collects it, a lio_listio(LIO_WAIT) that waited for it returns, or the
 * control block is submitted again.  Pinned pages are persisted at every
 * epoch meanwhile (nothing the I/O writes is lost).  Without a tracker, or
 * for memory outside the heap, the pins are no-ops.
 */
#ifndef PMT_AIO_PINS_H
#define PMT_AIO_PINS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* Before submitting the request whose control block is [cb, cb+cb_len):
 * pins the control block and, when the request writes it (a read),
 * [buf, buf+len); otherwise only restores the buffer for the kernel to read.
 * A previous request of the same control block is forgotten first.  Returns
 * 0, or -1 with err_get() set (nothing pinned). */
int aio_pin_request(const void *cb, size_t cb_len, void *buf, size_t len, bool written);
/* The request of control block cb completed, or was never queued: unpin
 * what aio_pin_request pinned for it (nothing when it has no entry).
 * Callers test aio_pins_in_use first (the fast path of aio_error). */
void aio_pin_release(const void *cb);
extern atomic_uint aio_pins_in_use __attribute__((visibility("hidden")));

/* After fork() in the child: no request in flight, nothing pinned. */
void aio_pins_atfork_child(void);

#endif
