/* SPDX-License-Identifier: BSD-3-Clause */
/* aio_pins -- heap memory written by asynchronous I/O in flight.  See
 * aio_pins.h. */
#include "runtime/aio_pins.h"

#include "base/log.h"
#include "prim/prim.h"
#include "recovery/restore.h"
#include "runtime/runtime.h"

#include <errno.h>
#include <string.h>

struct entry {
	uintptr_t cb;
	size_t cb_len;
	void *buf; /* NULL when only the control block is pinned */
	size_t len;
};

/* From prim_map_any, never malloc: the requests' own memory comes from
 * there, and a wrapper may run while the heap is not ready. */
static prim_lock_t lock = PRIM_LOCK_INIT;
PRIM_LOCK_NAMED(lock, pins, "runtime/aio_pins: the buffers of requests in flight",
		PRIM_FORK_RESET);
static struct entry *entries;
static size_t n_entries, cap_entries;
atomic_uint aio_pins_in_use;

static bool grow(void)
{
	void *items = entries;
	bool ok = prim_array_grow(&items, &cap_entries, n_entries, sizeof(*entries), 64);
	entries = items;
	return ok;
}

/* Under lock. */
static void remove_at(size_t i)
{
	runtime_unpin((void *)entries[i].cb, entries[i].cb_len);
	if (entries[i].buf != NULL)
		runtime_unpin(entries[i].buf, entries[i].len);
	entries[i] = entries[--n_entries];
	atomic_store(&aio_pins_in_use, (unsigned)n_entries);
}

/* Under lock. */
static void forget(uintptr_t cb)
{
	for (size_t i = 0; i < n_entries; i++)
		if (entries[i].cb == cb) {
			remove_at(i);
			return;
		}
}

int aio_pin_request(const void *cb, size_t cb_len, void *buf, size_t len, bool written)
{
	void *block = (void *)(uintptr_t)cb;
	restore_prefault(block, cb_len);
	if (len > 0)
		restore_prefault(buf, len);
	prim_lock(&lock);
	forget((uintptr_t)cb);
	if (n_entries == cap_entries && !grow()) {
		prim_unlock(&lock);
		err_set_errno(ENOMEM, "cannot record an asynchronous I/O request");
		return -1;
	}
	if (runtime_pin_writable(block, cb_len) != 0) {
		prim_unlock(&lock);
		return -1;
	}
	bool pin_buf = written && len > 0;
	if (pin_buf && runtime_pin_writable(buf, len) != 0) {
		runtime_unpin(block, cb_len);
		prim_unlock(&lock);
		return -1;
	}
	entries[n_entries++] = (struct entry){ (uintptr_t)cb, cb_len, pin_buf ? buf : NULL, len };
	atomic_store(&aio_pins_in_use, (unsigned)n_entries);
	prim_unlock(&lock);
	return 0;
}

void aio_pin_release(const void *cb)
{
	prim_lock(&lock);
	forget((uintptr_t)cb);
	prim_unlock(&lock);
}

void aio_pins_atfork_child(void)
{
	n_entries = 0;
	atomic_store(&aio_pins_in_use, 0);
}
