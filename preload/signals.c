/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * signals -- the application's signal dispositions pass through
 * lib/track/fault_signal.c.
 *
 * The runtime owns SIGSEGV while a write tracker needs it, and SIGBUS while
 * a pool is mapped; fault_signal_sigaction records the application's handler
 * of either (and chains to it for faults that are not ours) and hands every
 * other request to the kernel.  glibc installs handlers from several entry points
 * that call its internal sigaction directly, past any interposed sigaction:
 * each of them is interposed here, with glibc's documented semantics, so
 * that none can replace the tracker's handler or be hidden from it.
 * signal() compiled with -std=c99 (or with _XOPEN_SOURCE) is __sysv_signal.
 */
#include "base/export.h"
#include "real.h"
#include "runtime/interpose.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>

PMT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return fault_signal_sigaction(sig, act, old);
}

/* Install handler for sig with flags; with block_self the signal is masked
 * while its handler runs.  Returns the previous handler. */
static sighandler_t install(int sig, sighandler_t handler, int flags, bool block_self)
{
	if (handler == SIG_ERR || sig <= 0 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction act, old;
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	sigemptyset(&act.sa_mask);
	if (block_self)
		sigaddset(&act.sa_mask, sig);
	act.sa_flags = flags;
	if (fault_signal_sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* BSD semantics, glibc's default: restarting, handler kept, signal masked
 * while it runs. */
PMT_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	return install(sig, handler, SA_RESTART, true);
}

PMT_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return install(sig, handler, SA_RESTART, true);
}

/* System V semantics: the handler is reset to SIG_DFL when the signal is
 * delivered, the signal is not masked while it runs, and system calls it
 * interrupts fail with EINTR. */
PMT_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	return install(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}

PMT_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	return install(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}

/* XSI sigset: SIG_HOLD adds sig to the mask and leaves the disposition;
 * anything else installs it (no flags, empty mask) and takes sig out of
 * the mask.  The result is SIG_HOLD when sig was blocked before the call,
 * else the previous disposition. */
PMT_EXPORT sighandler_t sigset(int sig, sighandler_t disp)
{
	sigset_t one, before;
	sigemptyset(&one);
	if (sig <= 0 || sig >= NSIG || sigaddset(&one, sig) != 0) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction old;
	if (disp == SIG_HOLD) {
		if (pthread_sigmask(SIG_BLOCK, &one, &before) != 0)
			return SIG_ERR;
		if (sigismember(&before, sig))
			return SIG_HOLD;
		if (fault_signal_sigaction(sig, NULL, &old) != 0)
			return SIG_ERR;
		return old.sa_handler;
	}
	if (disp == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction act;
	memset(&act, 0, sizeof(act));
	act.sa_handler = disp;
	sigemptyset(&act.sa_mask);
	if (fault_signal_sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	if (pthread_sigmask(SIG_UNBLOCK, &one, &before) != 0)
		return SIG_ERR;
	return sigismember(&before, sig) ? SIG_HOLD : old.sa_handler;
}

PMT_EXPORT int sigignore(int sig)
{
	return install(sig, SIG_IGN, 0, false) == SIG_ERR ? -1 : 0;
}

/* flag != 0: system calls the handler interrupts fail with EINTR; 0: they
 * restart.  The rest of the disposition stays. */
PMT_EXPORT int siginterrupt(int sig, int flag)
{
	if (sig <= 0 || sig >= NSIG) {
		errno = EINVAL;
		return -1;
	}
	struct sigaction act;
	if (fault_signal_sigaction(sig, NULL, &act) != 0)
		return -1;
	if (flag)
		act.sa_flags &= ~SA_RESTART;
	else
		act.sa_flags |= SA_RESTART;
	return fault_signal_sigaction(sig, &act, NULL);
}

/* An alternate signal stack in the persistent heap is written by the kernel
 * (signal frames): pinned writable while in use (kernel_stacks.h). */
PMT_EXPORT int sigaltstack(const stack_t *ss, stack_t *old)
{
	int r;
	PREFAULT_SYSCALL(r, SYS_sigaltstack, kernel_stack_sigaltstack(REAL(sigaltstack), ss, old),
			 (unsigned long)ss, (unsigned long)old);
	return r;
}
