/* SPDX-License-Identifier: BSD-3-Clause */
/* cpu_generic -- prim's CPU part for any CPU without a file of its own, and
 * for -Dprim=generic.  Portable C only.  See prim.h. */
#include "prim/prim.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

void prim_cpu_relax(void)
{
	/* No spin hint: at least keep the compiler from folding the loop's
	 * reloads together (the call itself is opaque to the caller). */
	atomic_signal_fence(memory_order_seq_cst);
}

/* The access kind lives in CPU-specific parts of the signal frame. */
enum prim_fault_access prim_fault_access(const siginfo_t *si, const void *ucontext)
{
	(void)si;
	(void)ucontext;
	return PRIM_FAULT_UNKNOWN;
}

uintptr_t prim_direct_call_target(uintptr_t ra)
{
	(void)ra;
	return 0;
}

/* No instruction of its own: libc's syscall(2), which the preload then does
 * not wrap (preload/meson.build). */
long prim_syscall6(long nr, long a0, long a1, long a2, long a3, long a4, long a5)
{
	return syscall(nr, a0, a1, a2, a3, a4, a5);
}
