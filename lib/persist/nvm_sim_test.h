/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm_sim_test -- the simulator's test hooks, in test builds only.
 *
 * Owns: what the tests ask of a simulated mapping (nvm_sim.h) beyond
 * crash_after: a crash now, the primitives counted, a fence failed, the
 * media image read.  Compiled only into the tests' build of the core
 * (lib/meson.build: pmthreads_core_test, where nvm_sim.c is built with
 * PMT_TEST_HOOKS); included by tests/ only (the layers test checks it).
 */
#ifndef PMT_NVM_SIM_TEST_H
#define PMT_NVM_SIM_TEST_H

#include "persist/nvm.h"

#include <stdint.h>

/* Crash now (apply the random survival of unfenced lines to the file and
 * call on_crash).  The simulator only. */
__attribute__((noreturn)) void nvm_sim_crash(struct nvm *n);
/* The flushes and fences issued so far (0 for another backend). */
uint64_t nvm_sim_primitives(const struct nvm *n);
/* The k-th fence issued from now (1: the next) fails with errno err, as
 * msync does when the device fails: its pending lines never reach the
 * media, and the error is latched (nvm.h).  k = 0 cancels. */
void nvm_sim_fail_fence(struct nvm *n, uint64_t k, int err);
/* The media image (len bytes, same layout as the mapping): what would be
 * in the file if the machine lost power with every unfenced line lost.
 * NULL for other backends. */
const void *nvm_sim_media(const struct nvm *n);

#endif
