/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlimits -- the program's RLIMIT_AS and RLIMIT_DATA leave out the
 * runtime's mappings (lib/runtime/memory_limits.h): setrlimit and prlimit
 * hand the kernel the program's value raised by the runtime's share,
 * getrlimit and prlimit report the kernel's lowered by it.  Other resources
 * and other processes pass through.  The *64 names take the same layout on
 * 64-bit systems.
 */
/* Both names defined here: without this, <sys/resource.h> would make
 * setrlimit an alias of setrlimit64. */
#undef _FILE_OFFSET_BITS
#include "base/export.h"
#include "runtime/interpose.h"

#include <stddef.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int limits(pid_t pid, int resource, const struct rlimit *new_limit,
		  struct rlimit *old_limit)
{
	bool self = pid == 0 || pid == getpid();
	struct rlimit kernel_new;
	const struct rlimit *to_set = new_limit;
	if (self && new_limit != NULL) {
		kernel_new = *new_limit;
		memory_limits_to_kernel(resource, &kernel_new);
		to_set = &kernel_new;
	}
	if (syscall(SYS_prlimit64, pid, resource, to_set, old_limit) != 0)
		return -1;
	if (self && old_limit != NULL)
		memory_limits_to_program(resource, old_limit);
	return 0;
}

PMT_EXPORT int setrlimit(__rlimit_resource_t resource, const struct rlimit *rl)
{
	return limits(0, (int)resource, rl, NULL);
}

PMT_EXPORT int getrlimit(__rlimit_resource_t resource, struct rlimit *rl)
{
	return limits(0, (int)resource, NULL, rl);
}

PMT_EXPORT int prlimit(pid_t pid, __rlimit_resource_t resource, const struct rlimit *new_limit,
		       struct rlimit *old_limit)
{
	return limits(pid, (int)resource, new_limit, old_limit);
}

_Static_assert(sizeof(struct rlimit64) == sizeof(struct rlimit), "64-bit rlim_t");

PMT_EXPORT int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *rl)
{
	return setrlimit(resource, (const struct rlimit *)rl);
}

PMT_EXPORT int getrlimit64(__rlimit_resource_t resource, struct rlimit64 *rl)
{
	return getrlimit(resource, (struct rlimit *)rl);
}

PMT_EXPORT int prlimit64(pid_t pid, __rlimit_resource_t resource,
			 const struct rlimit64 *new_limit, struct rlimit64 *old_limit)
{
	return limits(pid, (int)resource, (const struct rlimit *)new_limit,
		      (struct rlimit *)old_limit);
}
