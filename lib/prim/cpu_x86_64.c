/* SPDX-License-Identifier: BSD-3-Clause */
/* cpu_x86_64 -- prim's CPU part for x86-64 (meson picks it for
 * cpu_family x86_64 unless -Dprim=generic).  See prim.h. */
#include "prim/prim.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <ucontext.h>

void prim_cpu_relax(void)
{
	__builtin_ia32_pause();
}

/* The kernel copies the trap number and its error code into the frame
 * (REG_TRAPNO, REG_ERR).  For a page fault (trap 14) the error code has bit 1
 * set for a write and bit 4 for an instruction fetch; a read has neither.
 * Other traps that raise SIGSEGV (a general-protection fault: si_code
 * SI_KERNEL, no address) carry error codes of another meaning. */
#define X86_TRAP_PF 14
#define X86_PF_WRITE 0x2UL
#define X86_PF_INSTR 0x10UL

enum prim_fault_access prim_fault_access(const siginfo_t *si, const void *ucontext)
{
	(void)si;
	const ucontext_t *uc = ucontext;
	if (uc->uc_mcontext.gregs[REG_TRAPNO] != X86_TRAP_PF)
		return PRIM_FAULT_UNKNOWN;
	unsigned long err = (unsigned long)uc->uc_mcontext.gregs[REG_ERR];
	if (err & X86_PF_INSTR)
		return PRIM_FAULT_EXEC;
	return (err & X86_PF_WRITE) ? PRIM_FAULT_WRITE : PRIM_FAULT_READ;
}

uintptr_t prim_direct_call_target(uintptr_t ra)
{
	/* call rel32: e8 and a displacement from the next instruction. */
	const unsigned char *p = (const unsigned char *)ra - 5;
	if (p[0] != 0xe8)
		return 0;
	int32_t rel;
	memcpy(&rel, p + 1, sizeof(rel));
	return ra + (uintptr_t)(intptr_t)rel;
}

/* The syscall instruction: number in rax, arguments in rdi, rsi, rdx, r10,
 * r8, r9; rcx and r11 are clobbered; -4095..-1 is -errno. */
long prim_syscall6(long nr, long a0, long a1, long a2, long a3, long a4, long a5)
{
	register long r10 __asm__("r10") = a3;
	register long r8 __asm__("r8") = a4;
	register long r9 __asm__("r9") = a5;
	long ret;
	__asm__ __volatile__("syscall"
			     : "=a"(ret)
			     : "a"(nr), "D"(a0), "S"(a1), "d"(a2), "r"(r10), "r"(r8), "r"(r9)
			     : "rcx", "r11", "memory");
	if ((unsigned long)ret > -4096UL) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}
