/* SPDX-License-Identifier: BSD-3-Clause */
/* persist_test -- the write-back's test hooks.  See persist_test.h. */
#include "persist/persist_test.h"

#include "persist/persist_internal.h"

bool persist_test_hint_whole(struct pool *p, uint64_t page)
{
	if (persist_reserve_memory(p) != 0 || p->page_hint == NULL || page >= p->npages)
		return false;
	p->page_hint[page] = HINT_HEAVY;
	return true;
}
