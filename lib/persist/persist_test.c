/* SPDX-License-Identifier: BSD-3-Clause */
/* persist_test -- the write-back's test hooks.  See persist_test.h. */
#include "persist/persist_test.h"

#include "persist/persist_internal.h"

bool persist_test_hint(struct pool *p, uint64_t page, enum persist_test_hint h)
{
	if (persist_reserve_memory(p) != 0 || p->page_hint == NULL || page >= p->npages)
		return false;
	p->page_hint[page] = h == PERSIST_TEST_WHOLE	  ? HINT_HEAVY
			     : h == PERSIST_TEST_WHOLE_PROBE ? HINT_PROBE_NEXT
							     : HINT_LIGHT;
	return true;
}

bool persist_test_hint_whole(struct pool *p, uint64_t page)
{
	return persist_test_hint(p, page, PERSIST_TEST_WHOLE);
}
