/* SPDX-License-Identifier: BSD-3-Clause */
/* memory_limits -- RLIMIT_AS and RLIMIT_DATA with a persistent heap.  See
 * memory_limits.h. */
#include "runtime/memory_limits.h"

#include "prim/prim.h"

#include <stdatomic.h>
#include <unistd.h>

static atomic_bool active;
static _Atomic uint64_t ours_pool, ours_pool_private;

void memory_limits_set_ours(bool on, uint64_t pool_bytes, uint64_t pool_bytes_private)
{
	atomic_store(&ours_pool, pool_bytes);
	atomic_store(&ours_pool_private, pool_bytes_private);
	atomic_store(&active, on);
}

static uint64_t share(int resource)
{
	if (!atomic_load(&active))
		return 0;
	if (resource == RLIMIT_AS)
		return prim_mapped_bytes() + atomic_load(&ours_pool);
	if (resource == RLIMIT_DATA)
		return prim_mapped_bytes() + atomic_load(&ours_pool_private);
	return 0;
}

static rlim_t plus(rlim_t v, uint64_t d)
{
	if (v == RLIM_INFINITY || v + d < v || v + d == RLIM_INFINITY)
		return RLIM_INFINITY;
	return v + d;
}

static rlim_t minus(rlim_t v, uint64_t d)
{
	if (v == RLIM_INFINITY)
		return v;
	return v > d ? v - d : 0;
}

void memory_limits_to_kernel(int resource, struct rlimit *rl)
{
	uint64_t d = share(resource);
	rl->rlim_cur = plus(rl->rlim_cur, d);
	rl->rlim_max = plus(rl->rlim_max, d);
}

void memory_limits_to_program(int resource, struct rlimit *rl)
{
	uint64_t d = share(resource);
	rl->rlim_cur = minus(rl->rlim_cur, d);
	rl->rlim_max = minus(rl->rlim_max, d);
}

/* The first seven numbers of /proc/self/statm (pages): size resident
 * shared text lib data dt. */
static bool read_statm(uint64_t out[7])
{
	char buf[256];
	long n = prim_read_file("/proc/self/statm", buf, sizeof(buf));
	if (n <= 0)
		return false;
	int k = 0;
	for (long i = 0; i < n && k < 7;) {
		if (buf[i] < '0' || buf[i] > '9') {
			i++;
			continue;
		}
		uint64_t v = 0;
		while (i < n && buf[i] >= '0' && buf[i] <= '9')
			v = v * 10 + (uint64_t)(buf[i++] - '0');
		out[k++] = v;
	}
	return k == 7;
}

/* The program's limit (UINT64_MAX: none), from the kernel's. */
static uint64_t program_limit(int resource)
{
	struct rlimit rl;
	if (prim_get_rlimit(resource, &rl) != 0)
		return UINT64_MAX;
	memory_limits_to_program(resource, &rl);
	return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
}

bool memory_limits_allow(uint64_t heap_used)
{
	uint64_t as = program_limit(RLIMIT_AS), data = program_limit(RLIMIT_DATA);
	if (as == UINT64_MAX && data == UINT64_MAX)
		return true;
	uint64_t statm[7];
	if (!read_statm(statm))
		return true;
	uint64_t ps = (uint64_t)prim_page_size();
	/* What the kernel would count had the heap been mapped as it grew. */
	uint64_t vm = statm[0] * ps, vm_data = statm[5] * ps;
	uint64_t as_ours = share(RLIMIT_AS), data_ours = share(RLIMIT_DATA);
	uint64_t as_used = (vm > as_ours ? vm - as_ours : 0) + heap_used;
	uint64_t data_used = (vm_data > data_ours ? vm_data - data_ours : 0) + heap_used;
	return as_used <= as && data_used <= data;
}
