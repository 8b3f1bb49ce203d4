/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmask -- the application's signal masks, its pending and awaited
 * signals and its jumps out of signal handlers pass through
 * lib/track/fault_signal.c, which keeps SIGSEGV unblocked in every mask the
 * kernel holds (a write fault with it blocked would end the process) and
 * emulates the blocking the program asked for.  glibc's sighold and sigrelse
 * change the mask with its internal call, past pthread_sigmask: they are
 * interposed here too.
 */
#include "base/export.h"
#include "preload.h"
#include "real.h"
#include "runtime/interpose.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>

/* The kernel writes the old set (rt_sigprocmask's, lib/runtime/syscall_outputs.tab). */
static int sigmask_pinned(int how, const sigset_t *set, sigset_t *old)
{
	int r;
	PREFAULT_SYSCALL(r, SYS_rt_sigprocmask, fault_signal_sigmask(how, set, old, REAL(sigmask)),
			 (unsigned long)how, (unsigned long)set, (unsigned long)old, 8);
	return r;
}

PMT_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return sigmask_pinned(how, set, old);
}

PMT_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	int e = sigmask_pinned(how, set, old);
	if (e != 0) {
		errno = e;
		return -1;
	}
	return 0;
}

/* XSI: sig added to / taken out of the mask. */
static int change_one(int how, int sig)
{
	sigset_t one;
	sigemptyset(&one);
	if (sigaddset(&one, sig) != 0)
		return -1;	/* EINVAL */
	return sigprocmask(how, &one, NULL);
}

PMT_EXPORT int sighold(int sig)
{
	return change_one(SIG_BLOCK, sig);
}

PMT_EXPORT int sigrelse(int sig)
{
	return change_one(SIG_UNBLOCK, sig);
}

PMT_EXPORT int sigsuspend(const sigset_t *mask)
{
	struct fault_signal_call c;
	if (!fault_signal_call_begin(&c, mask)) {
		errno = EINTR;
		return -1;
	}
	int r, e;
	do {
		/* A SIGSEGV the mask blocks, held by us, woke the call:
		 * natively it would not have. */
		r = REAL(sigsuspend)(c.mask);
		e = errno;
	} while (r != 0 && e == EINTR && fault_signal_call_held(&c));
	fault_signal_call_end(&c);
	errno = e;
	return r;
}

PMT_EXPORT int sigpending(sigset_t *set)
{
	int r;
	PREFAULT_SYSCALL(r, SYS_rt_sigpending, REAL(sigpending)(set), (unsigned long)set, 8);
	if (r == 0)
		fault_signal_pending(set);
	return r;
}

/* glibc reports a signal sent with tgkill (raise) as sent with kill. */
static int held_segv(siginfo_t *info, siginfo_t *held)
{
	if (info != NULL) {
		*info = *held;
		if (info->si_code == SI_TKILL)
			info->si_code = SI_USER;
	}
	return SIGSEGV;
}

PMT_EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	siginfo_t held;
	if (fault_signal_take_pending(set, &held))
		return held_segv(info, &held);
	int r;
	PREFAULT_SYSCALL(r, SYS_rt_sigtimedwait, REAL(sigwaitinfo)(set, info), (unsigned long)set,
			 (unsigned long)info, 0, 8);
	return r;
}

PMT_EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *t)
{
	siginfo_t held;
	if (fault_signal_take_pending(set, &held))
		return held_segv(info, &held);
	int r;
	PREFAULT_SYSCALL(r, SYS_rt_sigtimedwait, REAL(sigtimedwait)(set, info, t),
			 (unsigned long)set, (unsigned long)info, (unsigned long)t, 8);
	return r;
}

PMT_EXPORT int sigwait(const sigset_t *set, int *sig)
{
	if (fault_signal_take_pending(set, NULL)) {
		*sig = SIGSEGV;
		return 0;
	}
	return REAL(sigwait)(set, sig);
}

/* The mask a jump to env restores, or NULL (glibc's jmp_buf records
 * whether sigsetjmp saved one). */
static const sigset_t *restored_mask(struct __jmp_buf_tag *env)
{
	return env->__mask_was_saved ? (const sigset_t *)&env->__saved_mask : NULL;
}

PMT_EXPORT __attribute__((noreturn)) void siglongjmp(sigjmp_buf env, int val)
{
	fault_signal_before_jump(restored_mask(env));
	REAL(siglongjmp)(env, val);
}

PMT_EXPORT __attribute__((noreturn)) void longjmp(jmp_buf env, int val)
{
	fault_signal_before_jump(restored_mask(env));
	REAL(longjmp)(env, val);
}

PMT_EXPORT __attribute__((noreturn)) void _longjmp(jmp_buf env, int val)
{
	fault_signal_before_jump(restored_mask(env));
	REAL(_longjmp)(env, val);
}

/* What _FORTIFY_SOURCE builds call for longjmp and siglongjmp. */
PMT_EXPORT __attribute__((noreturn)) void __longjmp_chk(sigjmp_buf env, int val)
{
	fault_signal_before_jump(restored_mask(env));
	REAL(longjmp_chk)(env, val);
}
