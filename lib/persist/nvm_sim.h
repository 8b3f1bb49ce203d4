/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm_sim -- the strict persistence simulator, the nvm backend of crash tests.
 *
 * Owns: a separate "media" image that only fenced flushes reach, crash
 * injection after the k-th primitive, and the choice of which unfenced lines
 * survive a crash.  Selected with NVM_SIM (nvm_map's kind); everything here
 * is for tests and the crash sweeps, never for a program's pool.
 *
 * May call: nvm.h's types, base/.
 */
#ifndef PMT_NVM_SIM_H
#define PMT_NVM_SIM_H

#include "persist/nvm.h"

#include <stdbool.h>
#include <stdint.h>

/* How the simulator decides, at a crash, which of the lines that differ
 * between the mapping and the media survive. */
enum nvm_sim_survival {
	NVM_SIM_RANDOM = 0,	/* each line independently, from the seed */
	NVM_SIM_KEEP_OLD = 1,	/* every such line reverts to the media */
	NVM_SIM_KEEP_NEW = 2,	/* every such line keeps the mapping's content */
};

/* Whether one unfenced line (or, on the log backend's simulated device, one
 * unsynced sector) keeps its new content at a crash, by survival; rng is the
 * simulation's random state (seeded from nvm_sim_options.seed). */
bool nvm_sim_survives(enum nvm_sim_survival survival, uint64_t *rng);

/* Simulator controls, for tests (nvm_sim.c). */
struct nvm_sim_options {
	uint64_t seed;		/* randomness for which torn lines survive */
	uint64_t crash_after;	/* crash after this many primitives (flush or
				 * fence); 0 = never */
	/* Called at the simulated crash after the surviving image has been
	 * written to the file; must not return.  NULL: _exit(NVM_SIM_CRASH_EXIT). */
	void (*on_crash)(void *arg);
	void *on_crash_arg;
	enum nvm_sim_survival survival;
};
#define NVM_SIM_CRASH_EXIT 86

/* Simulator only: crash now (apply the random survival of unfenced lines to
 * the file and call on_crash).  Count of primitives issued so far. */
__attribute__((noreturn)) void nvm_sim_crash(struct nvm *n);
uint64_t nvm_sim_primitives(const struct nvm *n);
/* Simulator only: the k-th fence issued from now (1: the next) fails with
 * errno err, as msync does when the device fails: its pending lines never
 * reach the media, and the error is latched (nvm.h).  k = 0 cancels. */
void nvm_sim_fail_fence(struct nvm *n, uint64_t k, int err);
/* Simulator only: the media image (len bytes, same layout as the mapping):
 * what would be in the file if the machine lost power with every unfenced
 * line lost.  NULL for other backends. */
const void *nvm_sim_media(const struct nvm *n);

#endif
