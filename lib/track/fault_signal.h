/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_signal -- the process's SIGSEGV and SIGBUS dispositions while the
 * runtime needs them.
 *
 * Owns: the runtime's handler of each (installed by the first
 * fault_signal_install_for of the signal, the application's disposition put
 * back by the last fault_signal_uninstall_for); the application's own
 * disposition in between, which it sets and reads through
 * fault_signal_sigaction (preload/'s sigaction and signal wrappers forward
 * there); and handing every fault the claim function does not take to that
 * disposition as the kernel would have: the application's handler with its
 * mask and flags, or, for the default action, the end of the process by the
 * signal after a one-line diagnostic.
 *
 * SIGSEGV's claim function is the mprotect write tracker's
 * (tracker_mprotect.c: first writes to the pages it protected; the uffd
 * backend takes no signal).  SIGBUS's is the pool mapping's (nvm.h: a store
 * of the write-back whose page the file system cannot provide).
 */
#ifndef PMT_FAULT_SIGNAL_H
#define PMT_FAULT_SIGNAL_H

#include <signal.h>
#include <stdbool.h>

/* Called in our handler for every SIGSEGV (SIGBUS) the kernel raised for an
 * access (si_code > 0; a signal sent with kill() goes to the application), on the
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
/* The same for sig, SIGSEGV or SIGBUS (else -1 with EINVAL); the two above
 * are these for SIGSEGV.  A SIGBUS reaches the handler only on a thread
 * that does not block it: a fault with its signal blocked ends the process
 * (the kernel's rule). */
int fault_signal_install_for(int sig, fault_signal_claim_fn claim);
void fault_signal_uninstall_for(int sig);

/* sigaction(2) as the application sees it.  While our handler of SIGSEGV or
 * SIGBUS is installed the application's disposition of it is only recorded
 * (and reported back to it): faults that are not claimed are handed to it.
 * Every other signal, and either of the two while nothing needs our
 * handler, goes straight to the kernel.  Same contract as sigaction(2). */
int fault_signal_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* pthread_sigmask(3) as the application sees it, over real (libc's).
 * SIGSEGV is never blocked: a write fault taken with it blocked ends the
 * process (the kernel forces the default action), and the mprotect tracker
 * takes a write fault at a thread's first write to each heap page.  Programs
 * block "every signal" around thread creation (xz, zstd) or in worker
 * threads, so the request is honoured for every other signal, and SIGSEGV's
 * blocked state is kept per thread as the application asked for it and
 * reported back in old; a fault that is not the tracker's, taken while the
 * application believes SIGSEGV blocked, ends the process as the kernel
 * would have.  (The same for the masks of signal handlers: sigaction drops
 * SIGSEGV from sa_mask.)  Returns 0 or an error number. */
int fault_signal_sigmask(int how, const sigset_t *set, sigset_t *old,
			 int (*real)(int, const sigset_t *, sigset_t *));
/* Whether the application believes SIGSEGV blocked in this thread.  A new
 * thread inherits its creator's mask from the kernel and this view from
 * preload/'s pthread_create, which passes it on. */
bool fault_signal_app_blocked(void);
void fault_signal_set_app_blocked(bool blocked);
/* The libc pthread_sigmask under the interposed one (preload/ hands it over
 * once resolved; the default is whatever pthread_sigmask the link binds). */
void fault_signal_use_sigmask(int (*real)(int, const sigset_t *, sigset_t *));
/* mask without SIGSEGV (for masks a call installs for its own duration:
 * sigsuspend, ppoll, pselect, epoll_pwait). */
void fault_signal_filter_mask(sigset_t *mask);

#endif
