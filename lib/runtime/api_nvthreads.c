/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * api_nvthreads -- the functions behind nvrecovery.h, NVthreads' interface:
 * its nvmalloc, nvrecover and nvcheckpoint under names of pmthreads' own
 * (the header maps NVthreads' names to them), so that the library exports
 * no short name of NVthreads' and pmthreads.h's nvrecover keeps its type.
 */
#include "base/export.h"
#include "base/log.h"
#include "heap/heap.h"
#include "runtime/runtime.h"

#include <nvrecovery.h>

#include <errno.h>
#include <stdatomic.h>

/* Here the names are pmthreads.h's: the NVthreads functions call them. */
#undef nvmalloc
#undef nvrecover

/* NVthreads' nvrecover returns 0, or -1 as an unsigned long. */
#define NVT_RECOVER_FAILED ((unsigned long)-1)

PMT_EXPORT void *pmthreads_nvthreads_malloc(size_t size, char *name)
{
	return nvmalloc(size, name);
}

PMT_EXPORT unsigned long pmthreads_nvthreads_recover(void *dest, size_t size, char *name)
{
	err_clear();
	if (name == NULL) {
		err_set("nvrecover: no name");
		errno = EINVAL;
		return NVT_RECOVER_FAILED;
	}
	if (runtime_init() != 0) {
		errno = runtime_init_errno();
		return NVT_RECOVER_FAILED;
	}
	return heap_name_recover(name, dest, size, NULL) == 0 ? 0 : NVT_RECOVER_FAILED;
}

PMT_EXPORT void pmthreads_nvthreads_checkpoint(void)
{
	if (pmthreads_sync() == 0)
		return;
	/* NVthreads' nvcheckpoint returns nothing: say once why this one could
	 * not make the caller's writes durable. */
	static _Atomic bool told;
	if (!atomic_exchange(&told, true))
		log_msg(LOG_WARN, "nvcheckpoint: %s", errno == EDEADLK
			? "called while holding a lock, so no quiescent point can be reached; "
			  "the writes become durable at the first epoch after the outermost "
			  "critical section ends"
			: pmthreads_errormsg());
}
