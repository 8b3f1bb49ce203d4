/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prim_locks_test -- test hooks: the runtime's named locks (prim.h's
 * PRIM_LOCK_NAMED and PRIM_LOCK_KIND records), held on demand.  A program
 * run under the tests' build of the preload (tests/meson.build:
 * libpmthreads_hooked) finds these with dlsym and forks while another of
 * its threads holds each lock in turn (tests/progs/forkheld.c).  Compiled
 * only into the tests' core (lib/meson.build: pmthreads_core_test) and
 * exported from it.
 */
#ifndef PMT_PRIM_LOCKS_TEST_H
#define PMT_PRIM_LOCKS_TEST_H

#include <stdbool.h>
#include <stddef.h>

/* How many kinds of lock are named, and of kind k what the record says:
 * what it guards, and its fork rank (0: reset in the child; else taken
 * around fork, prim.h). */
size_t prim_test_lock_kinds(void);
const char *prim_test_lock_what(size_t k);
int prim_test_lock_rank(size_t k);
/* Take (blocking) or release the i-th lock of kind k that exists now;
 * take returns false when there is no such lock. */
bool prim_test_lock_take(size_t k, size_t i);
void prim_test_lock_release(size_t k, size_t i);
/* Whether every named lock is free now; if not, *k and *i name the first
 * one held. */
bool prim_test_locks_free(size_t *k, size_t *i);

#endif
