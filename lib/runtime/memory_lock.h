/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory_lock -- mlockall and munlockall with a persistent heap.
 *
 * Owns: what mlockall(MCL_CURRENT) locks, and locking the heap's new pages
 * while mlockall(MCL_FUTURE) is in effect.  The heap's whole range and the
 * pool's mapping are mapped up front (gigabytes, mostly never touched), and
 * the kernel's MCL_CURRENT would fault all of it in and pin it, or refuse
 * with ENOMEM under RLIMIT_MEMLOCK (it compares the whole address space's
 * size with the limit).  So MCL_CURRENT locks every mapping of the process
 * but the runtime's reserves (runtime_reserved_ranges: the heap's range
 * above its high-water mark, the pool's mapping), with the kernel's rules
 * for errors and RLIMIT_MEMLOCK applied to what the program has mapped.
 * The heap does not grow by mapping memory, so while MCL_FUTURE is in effect
 * its growth hook locks the pages it takes (memory_lock_grown), as the
 * kernel locks a native malloc's new brk or mmap memory.
 */
#ifndef PMT_MEMORY_LOCK_H
#define PMT_MEMORY_LOCK_H

#include <stddef.h>

/* mlockall(flags) and munlockall() as the program means them: 0, or -1
 * with errno set. */
int memory_lock_all(int flags);
int memory_unlock_all(void);

/* The heap now uses [addr, addr+len): locked while MCL_FUTURE is in
 * effect.  0, or -1 with errno set (the heap must not use the pages, as a
 * native brk beyond RLIMIT_MEMLOCK fails). */
int memory_lock_grown(void *addr, size_t len);

#endif
