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
 * signal after a one-line diagnostic.  And, once preload/ routes the
 * program's masks here, SIGSEGV's blocking, emulated per thread (below).
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

/* The runtime's scope around everything the handler does for the runtime
 * (quiesce.h's quiesce_runtime_enter; runtime/startup.c sets it before any
 * tracker or pool exists): inside calls claim(si, ucontext) and returns what
 * it returns.  A claim may reach code that takes locks (the FASE checker's
 * report unwinds with libunwind), which must never wait at the gate of an
 * epoch that waits for this handler.  Without one (NULL, the default: a
 * test of track/ alone) the claim is called directly. */
typedef bool (*fault_signal_inside_fn)(fault_signal_claim_fn claim, const siginfo_t *si,
				       void *ucontext);
void fault_signal_set_inside(fault_signal_inside_fn inside);

/*
 * Ending signals: those whose default action ends the process without a core
 * dump (signal(7)): SIGHUP, SIGINT, SIGTERM, SIGPIPE, SIGALRM, SIGUSR1,
 * SIGUSR2, SIGIO, SIGPROF, SIGVTALRM, SIGPWR, SIGSTKFLT.  (SIGKILL cannot be
 * caught; SIGQUIT, SIGABRT, SIGXCPU, SIGXFSZ and the faults dump core: they
 * are crashes.  The real-time signals are left alone: a program that dies by
 * one is rare, and glibc reserves the first two.)  Once
 * fault_signal_set_ending is called, the kernel holds our handler for each of
 * them while the application's disposition is SIG_DFL -- the one it started
 * with or set since -- and the application's own action otherwise (a handler
 * it installs, SIG_IGN).  The application reads what it set, SIG_DFL
 * included, through fault_signal_sigaction.  Our handler calls end(sig) (the
 * runtime's final epoch, which end waits for with a bound) and then ends the
 * process by sig as the default action would: SIG_DFL put back, sig raised
 * and unblocked, so the wait status is "killed by sig".  A fork child, which
 * has no epoch thread, ends at once; an exec'ed image starts with SIG_DFL
 * (the kernel resets caught signals).  Masks are not touched.
 */
typedef void (*fault_signal_end_fn)(int sig);
void fault_signal_set_ending(fault_signal_end_fn end);

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
 * handler, goes to the kernel -- once preload/ has taken the masks
 * (fault_signal_take_masks), a handler whose sa_mask holds SIGSEGV through
 * a trampoline that emulates that blocking.  Same contract as
 * sigaction(2); the action read back is exactly the one set. */
int fault_signal_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* ---- SIGSEGV blocking, emulated ----
 * A write fault taken with SIGSEGV blocked ends the process (the kernel
 * forces the default action), and the mprotect tracker takes one at a
 * thread's first write to each heap page -- in signal handlers too, and in
 * threads that block "every signal" (xz, zstd, HotSpot's handlers).  So once
 * preload/ has taken the masks, SIGSEGV is never blocked in any mask the
 * kernel holds: not by pthread_sigmask, not by a handler's sa_mask or its
 * delivery (our handlers run with SA_NODEFER), not for the duration of
 * sigsuspend/ppoll/pselect/epoll_pwait.  What the program asked for is kept
 * per thread and is all it ever observes: the masks it reads back, a
 * handler's ucontext, sigpending.  A SIGSEGV sent to a thread (kill, raise,
 * sigqueue) while it "blocks" it is held pending by us and sent again, with
 * its siginfo, when the thread unblocks it (or taken by sigwait); a fault
 * that is not the tracker's, taken while it "blocks" SIGSEGV, ends the
 * process as the kernel would have.  Not emulated: a SIGSEGV sent to the
 * process waits for the thread that took it rather than going to another
 * thread; signalfd does not see one held by us. */

/* preload/ hands over libc's pthread_sigmask and from now on routes every
 * mask of the program through here: our SIGSEGV handler stays installed
 * for the rest of the process, and a SIGSEGV blocked at start (inherited
 * through exec) becomes this thread's emulated state.  Idempotent. */
void fault_signal_take_masks(int (*real)(int, const sigset_t *, sigset_t *));

/* pthread_sigmask(3) as the application sees it, over real (libc's):
 * SIGSEGV's blocked state emulated, the rest passed on, old the mask as the
 * application set it; unblocking delivers a SIGSEGV held pending.  Returns
 * 0 or an error number. */
int fault_signal_sigmask(int how, const sigset_t *set, sigset_t *old,
			 int (*real)(int, const sigset_t *, sigset_t *));
/* Whether the application believes SIGSEGV blocked in this thread.  A new
 * thread inherits its creator's mask from the kernel and this view from
 * preload/'s pthread_create, which passes it on. */
bool fault_signal_app_blocked(void);
void fault_signal_set_app_blocked(bool blocked);

/* sigpending(2): adds SIGSEGV to set when one is held pending for this
 * thread. */
void fault_signal_pending(sigset_t *set);
/* For sigwait, sigwaitinfo, sigtimedwait: when set holds SIGSEGV and one is
 * held pending, takes it (its siginfo into info, when not NULL) and
 * returns true; the wait must then return it without waiting. */
bool fault_signal_take_pending(const sigset_t *set, siginfo_t *info);

/* A call that installs a signal mask for its own duration (sigsuspend,
 * ppoll, pselect, epoll_pwait): fault_signal_call_begin sets c->mask to
 * what the kernel gets (NULL for NULL) and makes the mask's SIGSEGV the
 * thread's emulated state until fault_signal_call_end.  It returns false
 * when the mask unblocks a SIGSEGV held pending: that is delivered at once
 * (the handler runs under the call's mask) and the call must fail with
 * EINTR without running; fault_signal_call_end is not called then. */
struct fault_signal_call {
	const sigset_t *mask;
	sigset_t filtered;
	bool blocked_before;
	unsigned held_before;
};
bool fault_signal_call_begin(struct fault_signal_call *c, const sigset_t *mask);
/* Whether a SIGSEGV sent during the call was held pending (it interrupted
 * the call, which natively it would not have), once per such signal. */
bool fault_signal_call_held(struct fault_signal_call *c);
void fault_signal_call_end(struct fault_signal_call *c);

/* siglongjmp/longjmp is leaving a signal handler, or may be: saved_mask is
 * the mask the jump restores (NULL when it restores none).  A jump out of a
 * handler we ran leaves SIGSEGV as it was when the outermost such handler
 * was entered (sigsetjmp saved the kernel's mask, which never holds it);
 * a jump that restores no mask keeps the handler's.  Delivers a SIGSEGV
 * held pending when that unblocks it. */
void fault_signal_before_jump(const sigset_t *saved_mask);

/* Around execve: the new image inherits the mask, so SIGSEGV is really
 * blocked across the call when the program blocks it (and unblocked again
 * when the call fails). */
void fault_signal_before_exec(void);
void fault_signal_after_exec(void);

#endif
