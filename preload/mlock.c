/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlock -- mlockall and munlockall lock what the program has mapped, not
 * the runtime's reserves (lib/runtime/memory_lock.h).
 */
#include "base/export.h"
#include "runtime/interpose.h"

#include <sys/mman.h>

PMT_EXPORT int mlockall(int flags)
{
	return memory_lock_all(flags);
}

PMT_EXPORT int munlockall(void)
{
	return memory_unlock_all();
}
