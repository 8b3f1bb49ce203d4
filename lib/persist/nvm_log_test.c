/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm log test hooks -- nvm_log_test.h, compiled into the tests' build of
 * the core only (with nvm_log.c built with PMT_TEST_HOOKS, which makes its
 * device honour fail_at).
 */
#include "persist/nvm_log_test.h"

#include "base/log.h"
#include "persist/nvm_log_internal.h"

#ifndef PMT_TEST_HOOKS
#error "nvm_log_test.c is for the test build (PMT_TEST_HOOKS): the shipped library has no test hooks"
#endif

uint64_t nvm_log_primitives(const struct nvm *n)
{
	const struct log_state *s = nvm_log_of(n);
	return s != NULL ? s->dev.primitives : 0;
}

void nvm_log_fail_io(struct nvm *n, uint64_t k, int err)
{
	struct log_state *s = nvm_log_of(n);
	if (s == NULL)
		log_fatal("nvm_log_fail_io on a %s mapping (log backend only)", n->ops->name);
	s->dev.fail_at = k;
	s->dev.fail_err = err;
}
