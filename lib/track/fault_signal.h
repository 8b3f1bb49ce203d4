/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_signal -- the process's SIGSEGV disposition while write tracking
 * needs it.
 *
 * Owns: the SIGSEGV handler of the runtime (installed by the first
 * fault_signal_install, the application's disposition put back by the last
 * fault_signal_uninstall); the application's own SIGSEGV disposition in
 * between, which it sets and reads through fault_signal_sigaction (preload/'s
 * sigaction and signal wrappers forward there); and handing every fault the
 * claim function does not take to that disposition as the kernel would have:
 * the application's handler with its mask and flags, or, for the default
 * action, the end of the process by SIGSEGV after a one-line diagnostic.
 *
 * The claim function is the write trackers' (tracker_mprotect.c: first writes
 * to pages the mprotect backend protected, and writes to the pages of the
 * uffd backend's batch guard).
 */
#ifndef PMT_FAULT_SIGNAL_H
#define PMT_FAULT_SIGNAL_H

#include <signal.h>
#include <stdbool.h>

/* Called in our handler for every SIGSEGV the kernel raised for an access
 * (si_code > 0; a SIGSEGV sent with kill() goes to the application), on the
 * faulting thread with every signal blocked; si and ucontext are the
 * handler's.  Returns true when the fault was its own and is resolved (the
 * access is retried on return), false to hand the signal to the
 * application.  Must be async-signal-safe. */
typedef bool (*fault_signal_claim_fn)(const siginfo_t *si, void *ucontext);

/* Install our SIGSEGV handler with claim as the function that may take
 * faults, or count one more user when it is installed already.  Every user
 * passes the same function (else EBUSY).  Returns 0, or -1 with errno set. */
int fault_signal_install(fault_signal_claim_fn claim);
/* One user fewer; the last puts the application's disposition back. */
void fault_signal_uninstall(void);

/* sigaction(2) as the application sees it.  While our handler is installed
 * the application's SIGSEGV disposition is only recorded (and reported back
 * to it): faults that are not claimed are handed to it.  Every other signal,
 * and SIGSEGV while no tracker needs our handler, goes straight to the
 * kernel (SIGBUS never arises from write protection, so the application's
 * SIGBUS handler is the kernel's).  Same contract as sigaction(2). */
int fault_signal_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

#endif
