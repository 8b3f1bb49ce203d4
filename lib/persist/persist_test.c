/* SPDX-License-Identifier: BSD-3-Clause */
/* persist_test -- the write-back's test hooks.  See persist_test.h. */
#include "persist/persist_test.h"

#include "persist/persist_internal.h"

bool persist_test_hint(struct pool *p, uint64_t page, enum persist_test_hint h)
{
	if (persist_reserve_memory(p) != 0 || p->page_hint == NULL || page >= p->npages)
		return false;
	/* A probe is due at the end of a level: 2^(L+2) - 1. */
	p->page_hint[page] = h == PERSIST_TEST_WHOLE	  ? HINT_HEAVY
			     : h == PERSIST_TEST_WHOLE_PROBE ? (uint8_t)(2 * HINT_HEAVY - 1)
							     : HINT_LIGHT;
	return true;
}

bool persist_test_hint_whole(struct pool *p, uint64_t page)
{
	return persist_test_hint(p, page, PERSIST_TEST_WHOLE);
}
