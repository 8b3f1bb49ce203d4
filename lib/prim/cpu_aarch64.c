/* SPDX-License-Identifier: BSD-3-Clause */
/* cpu_aarch64 -- prim's CPU part for AArch64 (meson picks it for
 * cpu_family aarch64 unless -Dprim=generic).  See prim.h. */
#include "prim/prim.h"

#include <asm/sigcontext.h>
#include <errno.h>
#include <string.h>
#include <ucontext.h>

void prim_cpu_relax(void)
{
	__asm__ __volatile__("yield" ::: "memory");
}

/* The syndrome of the abort, ESR_EL1 (Arm ARM D17.2.37): exception class in
 * bits 31:26; for a data abort WnR (bit 6) says write, but cache maintenance
 * instructions (CM, bit 8) report WnR = 1 without writing -- the kernel's
 * is_write_abort() reads it the same way. */
#define ESR_EC_SHIFT 26
#define ESR_EC_MASK 0x3fU
#define ESR_EC_IABT_LOW 0x20U	/* instruction abort from EL0 */
#define ESR_EC_DABT_LOW 0x24U	/* data abort from EL0 */
#define ESR_WNR (1ULL << 6)
#define ESR_CM (1ULL << 8)

/* Find the esr_context record among the records the kernel lays out in
 * uc_mcontext.__reserved (uapi asm/sigcontext.h: a list of _aarch64_ctx
 * headers, each followed by its body, ended by a null header; the ESR
 * record is always in __reserved, never in the extra space, and the kernel
 * writes it only for a fault, whose ESR it has). */
static bool find_esr(const ucontext_t *uc, uint64_t *esr)
{
	const unsigned char *area = (const unsigned char *)uc->uc_mcontext.__reserved;
	size_t len = sizeof(uc->uc_mcontext.__reserved);
	size_t off = 0;
	while (off + sizeof(struct _aarch64_ctx) <= len) {
		struct _aarch64_ctx head;
		memcpy(&head, area + off, sizeof(head));
		if (head.magic == 0 || head.magic == EXTRA_MAGIC)
			return false;
		if (head.size < sizeof(head) || head.size > len - off)
			return false;	/* malformed: do not guess */
		if (head.magic == ESR_MAGIC && head.size >= sizeof(struct esr_context)) {
			struct esr_context rec;
			memcpy(&rec, area + off, sizeof(rec));
			*esr = rec.esr;
			return true;
		}
		off += head.size;
	}
	return false;
}

enum prim_fault_access prim_fault_access(const siginfo_t *si, const void *ucontext)
{
	(void)si;
	uint64_t esr;
	if (!find_esr(ucontext, &esr))
		return PRIM_FAULT_UNKNOWN;
	unsigned ec = (unsigned)(esr >> ESR_EC_SHIFT) & ESR_EC_MASK;
	if (ec == ESR_EC_IABT_LOW)
		return PRIM_FAULT_EXEC;
	if (ec != ESR_EC_DABT_LOW)
		return PRIM_FAULT_UNKNOWN;
	return (esr & ESR_WNR) && !(esr & ESR_CM) ? PRIM_FAULT_WRITE : PRIM_FAULT_READ;
}

uintptr_t prim_direct_call_target(uintptr_t ra)
{
	/* bl imm26: 100101 and a word offset from the instruction itself. */
	uint32_t insn;
	memcpy(&insn, (const void *)(ra - 4), sizeof(insn));
	if ((insn & 0xfc000000u) != 0x94000000u)
		return 0;
	int64_t off = (int64_t)((int32_t)(insn << 6) >> 6) * 4;
	return ra - 4 + (uintptr_t)off;
}

/* svc 0: number in x8, arguments and result in x0..x5; -4095..-1 is
 * -errno. */
long prim_syscall6(long nr, long a0, long a1, long a2, long a3, long a4, long a5)
{
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a0;
	register long x1 __asm__("x1") = a1;
	register long x2 __asm__("x2") = a2;
	register long x3 __asm__("x3") = a3;
	register long x4 __asm__("x4") = a4;
	register long x5 __asm__("x5") = a5;
	__asm__ __volatile__("svc 0"
			     : "+r"(x0)
			     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			     : "memory");
	if ((unsigned long)x0 > -4096UL) {
		errno = (int)-x0;
		return -1;
	}
	return x0;
}
