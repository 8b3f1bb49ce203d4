/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * persist_internal -- what persist.c shares with its test hooks
 * (persist_test.c): the encoding of pool.page_hint, what the write-back
 * learnt of each page for the choice of whole pages (persist.h, "Whole
 * pages").  Private to persist/persist*.c.
 */
#ifndef PMT_PERSIST_INTERNAL_H
#define PMT_PERSIST_INTERNAL_H

#include "persist/persist.h"

/* page_hint[i]: bit 7 (HINT_WHOLE) -- written whole by the attempt under
 * way; bits 0-6, what the write-backs of the page found:
 *   HINT_UNKNOWN   nothing yet: written whole if never persisted and in a
 *                  run of dirty pages (then HINT_FRESH), else compared line
 *                  by line;
 *   HINT_LIGHT     its last comparison found fewer than half its lines
 *                  changed: compared line by line;
 *   HINT_FRESH     written whole when it was never persisted: fresh memory
 *                  tells nothing of how its next writes go, so the next is
 *                  compared line by line (in place where it can be: a page
 *                  that changes little costs no more than its lines);
 *   2^(L+1) + s    heavy (L in [1, HINT_LEVELS), s < 2^(L+1)): written
 *                  whole, s times since its level began.  At s = 2^(L+1) - 1
 *                  (hint_probe_due) the whole write is also compared,
 *                  read-only, with the page's valid copy -- a probe, which
 *                  writes no line -- and still heavy the page goes on at
 *                  level L + 1 (at most HINT_LEVELS - 1), else it turns
 *                  light: probes after 3, 7, 15 and 31 whole writes, then
 *                  every 31.  A comparison line by line that finds most
 *                  lines changed starts at level 1 (HINT_HEAVY). */
#define HINT_WHOLE 0x80
#define HINT_VALUE 0x7f
#define HINT_UNKNOWN 0
#define HINT_LIGHT 1
#define HINT_FRESH 2
#define HINT_HEAVY 4		/* level 1, s = 0 */
#define HINT_LEVELS 5

_Static_assert((2u << HINT_LEVELS) - 1 <= HINT_VALUE, "page_hint overflows");

/* Whether heavy hint v is due for a comparison (s = 2^(L+1) - 1). */
static inline bool hint_probe_due(uint8_t v) { return ((v + 1) & v) == 0; }

#endif
