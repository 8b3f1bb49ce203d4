/* SPDX-License-Identifier: BSD-3-Clause */
/* target -- which process owns the pool.  See target.h. */
#include "runtime/target.h"

#include "base/config.h"
#include "prim/prim.h"

static int self_state;	/* 0 unknown, 1 target, 2 not */

bool target_is_path(const char *path)
{
	const struct config *c = config_get();
	if (c->program[0] == '\0')
		return true;
	return prim_same_file(path, c->program);
}

bool target_is_self(void)
{
	int s = __atomic_load_n(&self_state, __ATOMIC_ACQUIRE);
	if (s == 0) {
		s = target_is_path("/proc/self/exe") ? 1 : 2;
		__atomic_store_n(&self_state, s, __ATOMIC_RELEASE);
	}
	return s == 1;
}
