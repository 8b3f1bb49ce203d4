/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm sim test hooks -- nvm_sim_test.h, compiled into the tests' build of
 * the core only (with nvm_sim.c built with PMT_TEST_HOOKS, which makes its
 * fence honour fail_at).
 */
#include "persist/nvm_sim_test.h"

#include "base/log.h"
#include "persist/nvm_sim_internal.h"

#ifndef PMT_TEST_HOOKS
#error "nvm_sim_test.c is for the test build (PMT_TEST_HOOKS): the shipped library has no test hooks"
#endif

void nvm_sim_crash(struct nvm *n)
{
	struct sim_state *s = nvm_sim_of(n);
	if (s == NULL)
		log_fatal("nvm_sim_crash on the %s backend (only the simulator can crash)",
			  n ? n->ops->name : "(none)");
	nvm_sim_lose_power(n, s);
}

uint64_t nvm_sim_primitives(const struct nvm *n)
{
	struct sim_state *s = nvm_sim_of(n);
	return s ? s->primitives : 0;
}

void nvm_sim_fail_fence(struct nvm *n, uint64_t k, int err)
{
	struct sim_state *s = nvm_sim_of(n);
	if (s == NULL)
		log_fatal("nvm_sim_fail_fence on a %s mapping (simulator only)", n->ops->name);
	s->fail_at = k;
	s->fail_err = err;
}

const void *nvm_sim_media(const struct nvm *n)
{
	struct sim_state *s = nvm_sim_of(n);
	return s ? s->media : NULL;
}
