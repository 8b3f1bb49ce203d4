/* SPDX-License-Identifier: BSD-3-Clause */
/* prim_probe -- real faults decoded by lib/prim/, for test_prim.cpp (prim.h
 * is C only). */
#ifndef PMT_TESTS_PRIM_PROBE_H
#define PMT_TESTS_PRIM_PROBE_H

#ifdef __cplusplus
extern "C" {
#endif

enum probe_access { PROBE_READ, PROBE_WRITE, PROBE_EXEC };

/* Make an access of kind what that faults (a read of a PROT_NONE page, a
 * write to a PROT_READ page, a call into a page without PROT_EXEC) with
 * SIGUSR1 blocked, and return what prim_fault_access said in the SIGSEGV
 * handler: "read", "write", "exec", "unknown"; "none" when nothing faulted.
 * *usr1_blocked: whether prim_interrupted_sigmask had SIGUSR1. */
const char *probe_fault(enum probe_access what, int *usr1_blocked);

#ifdef __cplusplus
}
#endif

#endif
