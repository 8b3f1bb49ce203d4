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

/* The test build of the core adds nvm_sim_test.h: a crash now, the
 * primitives counted, a fence failed, the media image. */

#endif
