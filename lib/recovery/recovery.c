/* SPDX-License-Identifier: BSD-3-Clause */
/* recovery -- the inverse of an epoch.  See recovery.h.
 *
 * Idempotent by construction: the only writes are invalidations of copies
 * that are torn by the same test (seq > VER_d) every time, so a crash during
 * recovery is followed by the same recovery.
 */
#include "recovery/recovery.h"

#include "persist/persist.h"

#include "base/log.h"

#include <string.h>

uint64_t recovery_restore_image(struct pool *p, void *shadow)
{
	persist_invalidate_torn(p);
	return recovery_copy_image(p, shadow);
}

uint64_t recovery_copy_image(const struct pool *p, void *shadow)
{
	unsigned char *sh = shadow;
	uint64_t restored = 0;
	for (uint64_t i = 0; i < p->seq_pages; i++) {
		int c = pool_valid_copy(p, i);
		if (c < 0)
			continue;
		memcpy(sh + i * p->page_size, pool_copy(p, i, c), p->page_size);
		restored++;
	}
	return restored;
}

void recovery_read_page(const struct pool *p, uint64_t page, void *out)
{
	if (page >= p->npages)
		log_fatal("recovery_read_page: page %llu is outside the heap (%llu pages)",
			  (unsigned long long)page, (unsigned long long)p->npages);
	int c = pool_valid_copy(p, page);
	if (c < 0)
		memset(out, 0, p->page_size);
	else
		memcpy(out, pool_copy(p, page, c), p->page_size);
}
