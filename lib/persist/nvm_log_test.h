/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm_log_test -- the log backend's test hooks, in test builds only.
 *
 * Owns: what the tests ask of a log-backed mapping beyond nvm.h and
 * nvm_log.h: how many primitives its simulated device issued, and I/O
 * errors injected into its device.  Compiled only into the tests' build of
 * the core (lib/meson.build: pmthreads_core_test, where nvm_log.c is built
 * with PMT_TEST_HOOKS); the shipped library and the tool have neither these
 * functions nor the checks behind them.  Included by tests/ only (the
 * layers test checks it).
 */
#ifndef PMT_NVM_LOG_TEST_H
#define PMT_NVM_LOG_TEST_H

#include "persist/nvm.h"

#include <stdint.h>

/* The writes and syncs of the simulated device so far (0 for a real one,
 * or another backend). */
uint64_t nvm_log_primitives(const struct nvm *n);

/* The k-th write or sync of the device from now (1: the next) fails with
 * errno err and does nothing, as a device that lost the write; the error
 * is latched (nvm.h) -- by the next fence when it is a checkpoint's after a
 * fence (log_state.deferred_error).  k = 0 cancels.  A real device or a
 * simulated one. */
void nvm_log_fail_io(struct nvm *n, uint64_t k, int err);

#endif
