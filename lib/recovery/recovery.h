/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recovery -- the inverse of an epoch: a torn epoch undone, the last durable
 * image read back.
 *
 * Owns: the invalidation of copies with seq > VER_d (durably, before
 * anything else), and reading each page's valid copy with the larger seq.
 * Idempotent: a crash during recovery is followed by the same recovery.
 * The runtime does not copy the image up front when it can avoid it:
 * restore.h serves pages lazily.  Not to be confused with recover/, the
 * pmthreads-recover tool, which calls this module.
 *
 * May call: persist/ (pool, persist's fault hook), base/.
 */
#ifndef PMT_RECOVERY_H
#define PMT_RECOVERY_H

#include "persist/pool.h"

#include <stdint.h>

/* Recover the consistent image into shadow (the heap range, zero-filled
 * fresh anonymous memory).  Returns the number of pages restored (pages
 * never persisted are zeros and are not touched), or RECOVERY_REFUSED when
 * a page fails its checksum (recovery_verify_page: err_get() names it; the
 * pages after it are not restored, the pool is not written).  On a
 * read-only pool the torn copies are skipped rather than invalidated, so
 * nothing is written. */
uint64_t recovery_restore_image(struct pool *p, void *shadow);
/* recovery_restore_image without the invalidation (which must have happened): the
 * eager path of restore.h. */
uint64_t recovery_copy_image(const struct pool *p, void *shadow);
#define RECOVERY_REFUSED UINT64_MAX

/* Check bytes, page i's content as read from its valid copy, against the
 * checksum the epoch that wrote the copy recorded (pool_verify_page).
 * 0 when it matches (or the page was never persisted); -1 with err_get()
 * naming the pool, the page index, its heap address, the copy and its
 * epoch, and the fix.  The older copy is never offered instead: it belongs
 * to an older epoch, and mixing epochs would tear the failure-atomic
 * sections that span this page and others. */
int recovery_verify_page(const struct pool *p, uint64_t page, const void *bytes);

/* Write the consistent image of page i into out (page_size bytes) without
 * modifying the pool (for pmthreads-recover dump, which saves what it can
 * of a damaged pool: not verified; recovery_verify_page does that). */
void recovery_read_page(const struct pool *p, uint64_t page, void *out);

#endif
