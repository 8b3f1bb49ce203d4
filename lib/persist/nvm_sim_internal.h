/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm_sim_internal -- what the simulator (nvm_sim.c) shares with its test
 * hooks (nvm_sim_test.c, test builds only): its per-mapping state.  Private
 * to persist/nvm_sim*.c; everything else uses nvm_sim.h.
 */
#ifndef PMT_NVM_SIM_INTERNAL_H
#define PMT_NVM_SIM_INTERNAL_H

#include "persist/nvm.h"
#include "persist/nvm_sim.h"

#include <stddef.h>
#include <stdint.h>

struct sim_line {
	size_t off;			/* line offset in the mapping */
	unsigned char data[NVM_LINE];	/* content when flushed */
};

/* A simulated mapping's state (nvm.impl).  Used by one thread at a time,
 * as every mapping is (nvm.h): the one that flushes and fences it, or the
 * test between those calls; no field is locked or atomic. */
struct sim_state {
	unsigned char *media;		/* fences copy pending lines into it */
	struct sim_line *pending;	/* flushed since the last fence, in order: flush, fence */
	size_t npending, cap;
	uint64_t primitives;		/* each flush and fence */
	uint64_t rng;			/* the crash's survival choices */
	/* Test builds only (nvm_sim_fail_fence, between the user's calls):
	 * the fail_at-th fence from now fails with fail_err.  The shipped
	 * build never reads them. */
	int fail_err;
	uint64_t fail_at;
	struct nvm_sim_options opt;	/* set at init */
};

/* The simulator's state of n, NULL for another backend's. */
struct sim_state *nvm_sim_of(const struct nvm *n);

/* Power lost now: every line the mapping and the media disagree on keeps
 * its new content or reverts, by the survival, in the file; then on_crash
 * or _exit(NVM_SIM_CRASH_EXIT). */
_Noreturn void nvm_sim_lose_power(struct nvm *n, struct sim_state *s);

#endif
