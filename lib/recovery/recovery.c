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
	/* Verified first: a refused pool is not written.  The copy never
	 * reads a torn copy (pool_valid_copy), so the invalidation may come
	 * after it. */
	uint64_t restored = recovery_copy_image(p, shadow);
	if (restored != RECOVERY_REFUSED)
		persist_invalidate_torn(p);
	return restored;
}

uint64_t recovery_copy_image(const struct pool *p, void *shadow)
{
	unsigned char *sh = shadow;
	uint64_t restored = 0;
	for (uint64_t i = 0; i < p->seq_pages; i++) {
		int c = pool_valid_copy(p, i);
		if (c < 0)
			continue;
		unsigned char *dst = sh + i * p->page_size;
		memcpy(dst, pool_copy(p, i, c), p->page_size);
		/* Hashed where it was just copied to (in cache). */
		if (recovery_verify_page(p, i, dst) != 0)
			return RECOVERY_REFUSED;
		restored++;
	}
	return restored;
}

int recovery_verify_page(const struct pool *p, uint64_t page, const void *bytes)
{
	char what[768];
	if (pool_verify_page(p, page, bytes, what, sizeof(what)) == 0)
		return 0;
	err_set("pool %s: page %llu (heap address %#llx) fails its checksum: %s.  The pool is "
		"refused and left as it is (the page's older copy is an older epoch, never used "
		"instead): run `pmthreads-recover check` on it to list every damaged page, then "
		"restore it from a backup, or remove it if its data is expendable "
		"(`pmthreads-recover dump` saves the rest first)", p->path, (unsigned long long)page,
		(unsigned long long)(p->shadow_base + page * p->page_size), what);
	return -1;
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
