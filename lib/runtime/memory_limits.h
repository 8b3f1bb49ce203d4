/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory_limits -- RLIMIT_AS and RLIMIT_DATA with a persistent heap.
 *
 * Owns: the program's view of those two limits, and whether the heap may
 * grow to a given size under them.  In malloc mode the heap replaces glibc's,
 * whose brk and mmap the kernel refuses beyond the limits (malloc returns
 * NULL, errno ENOMEM).  But the heap's whole range and the pool's mapping
 * are mapped up front, which the kernel counts from the start: a program
 * that lowers a limit below them could then map nothing at all (thread
 * stacks, glibc's own buffers), and under the mprotect tracker could not
 * make a heap page writable again (RLIMIT_DATA counts writable private
 * memory).  So the limits the program sets and reads (preload/'s setrlimit,
 * getrlimit, prlimit) are its own: the kernel gets them raised by the
 * runtime's share (memory_limits_set_ours), and the heap's growth hook asks
 * memory_limits_allow, counting the heap as the part in use.
 */
#ifndef PMT_MEMORY_LIMITS_H
#define PMT_MEMORY_LIMITS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

/* The runtime's share of the address space: its private writable memory
 * (prim_mapped_bytes: the heap's range, the trackers' and the epoch's
 * memory, the stacks of its threads; counted by RLIMIT_AS and RLIMIT_DATA) and the pool's mapping
 * (RLIMIT_AS; RLIMIT_DATA too when it is private and writable: the log
 * backend's, pool_bytes_private).  Switched on once the heap is mapped;
 * before (and with active false), the limits pass through unchanged. */
void memory_limits_set_ours(bool active, uint64_t pool_bytes, uint64_t pool_bytes_private);

/* The limit for resource as the kernel should hold it, from the program's
 * value (to_kernel), or as the program should see it, from the kernel's
 * (to_program).  Resources other than RLIMIT_AS and RLIMIT_DATA, and
 * RLIM_INFINITY, pass unchanged. */
void memory_limits_to_kernel(int resource, struct rlimit *rl);
void memory_limits_to_program(int resource, struct rlimit *rl);

/* Whether the process stays within the program's RLIMIT_AS and RLIMIT_DATA
 * with heap_used bytes of the heap in use.  Cheap while both are infinite;
 * reads /proc/self/statm otherwise, with raw system calls (it runs inside
 * malloc).  True when that cannot be read. */
bool memory_limits_allow(uint64_t heap_used);

#endif
