/* SPDX-License-Identifier: BSD-3-Clause */
/* shadow -- the DRAM shadow heap's address range.  See tracker.h. */
#include "track/tracker.h"

#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <unistd.h>

void *shadow_reserve(uint64_t base, size_t len)
{
	size_t ps = prim_page_size();
	if (len == 0 || len % ps != 0 || base % ps != 0) {
		err_set("cannot reserve the persistent heap: size %zu or address %#llx is not a "
			"multiple of the page size %zu", len, (unsigned long long)base, ps);
		return NULL;
	}
	if (base != 0 && base + len > base) {
		void *p = prim_map_fixed((void *)(uintptr_t)base, len);
		if (p != NULL)
			return p;
		/* Taken (EEXIST), or outside this process's address space:
		 * the heap still works elsewhere, and the caller sees from the
		 * returned address that pointers stored in it must be
		 * adjusted. */
	}
	void *p = prim_map_any(len);
	if (p == NULL) {
		err_set_errno(errno, "cannot reserve %zu bytes of address space for the persistent "
			      "heap (use a smaller PMTHREADS_POOL_SIZE, or raise ulimit -v)", len);
		return NULL;
	}
	return p;
}

void shadow_release(void *addr, size_t len)
{
	if (addr != NULL)
		prim_unmap(addr, len);
}
