/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * persist_test -- the write-back's test hooks, in test builds only.
 *
 * Owns: what the tests ask of persist beyond persist.h: a page's history
 * set as if its last comparison had found every line changed, so that a
 * crash sweep on a small pool reaches whole pages of every kind without
 * epochs that teach it first.  Compiled only into the tests' build of the
 * core (lib/meson.build: pmthreads_core_test); included by tests/ only.
 */
#ifndef PMT_PERSIST_TEST_H
#define PMT_PERSIST_TEST_H

#include "persist/pool.h"

#include <stdint.h>

/* What page page of p's history says (persist_internal.h), as if its
 * write-backs had found it: written whole at its next write-back (where the
 * backend writes pages straight, and the attempt has p->whole_min such
 * pages), and compared with its valid copy then (probe); or changing
 * little, compared line by line.  Reserves the hints first; false when
 * they cannot be had. */
enum persist_test_hint { PERSIST_TEST_WHOLE, PERSIST_TEST_WHOLE_PROBE, PERSIST_TEST_LIGHT };
bool persist_test_hint(struct pool *p, uint64_t page, enum persist_test_hint h);
/* persist_test_hint(p, page, PERSIST_TEST_WHOLE). */
bool persist_test_hint_whole(struct pool *p, uint64_t page);

#endif
