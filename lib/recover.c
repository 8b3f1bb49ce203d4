/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recover -- the inverse of an epoch: invalidate torn copies, restore the
 * consistent image.  See persist.h.
 *
 * Idempotent by construction: the only writes are invalidations of copies
 * that are torn by the same test (seq > VER_d) every time, so a crash during
 * recovery is followed by the same recovery.
 */
#include "persist.h"

#include "log.h"

#include <string.h>

uint64_t pool_invalidate_torn(struct pool *p)
{
	if (p->read_only)
		return 0;
	if (persist_get_fault() == PERSIST_FAULT_SKIP_INVALIDATE) {
		p->torn_invalidated = true;
		return 0;
	}
	const uint64_t v = *p->ver_d;
	uint64_t count = 0;
	/* One flush per line of the seq table (four pages' pairs), not per
	 * copy: an interrupted epoch leaves runs of torn copies. */
	uintptr_t line = 0;
	for (uint64_t i = 0; i < p->seq_pages; i++) {
		for (int c = 0; c < 2; c++) {
			uint64_t s = p->seq[i][c];
			if (s != POOL_SEQ_INVALID && s > v) {
				p->seq[i][c] = POOL_SEQ_INVALID;
				uintptr_t l = (uintptr_t)&p->seq[i][c] & ~(uintptr_t)(NVM_LINE - 1);
				if (l != line && line != 0)
					nvm_flush(p->nvm, (const void *)line, NVM_LINE);
				line = l;
				count++;
			}
		}
	}
	if (line != 0)
		nvm_flush(p->nvm, (const void *)line, NVM_LINE);
	if (count != 0)
		nvm_fence(p->nvm);
	p->torn_invalidated = true;
	if (count != 0)
		log_msg(LOG_INFO, "pool %s: invalidated %llu copies left by an interrupted epoch",
			p->path, (unsigned long long)count);
	return count;
}

uint64_t pool_recover(struct pool *p, void *shadow)
{
	pool_invalidate_torn(p);
	return pool_copy_image(p, shadow);
}

uint64_t pool_copy_image(const struct pool *p, void *shadow)
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

void pool_read_page(const struct pool *p, uint64_t page, void *out)
{
	if (page >= p->npages)
		log_fatal("pool_read_page: page %llu is outside the heap (%llu pages)",
			  (unsigned long long)page, (unsigned long long)p->npages);
	int c = pool_valid_copy(p, page);
	if (c < 0)
		memset(out, 0, p->page_size);
	else
		memcpy(out, pool_copy(p, page, c), p->page_size);
}
