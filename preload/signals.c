/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * signals -- the application's signal dispositions pass through
 * lib/track/fault_signal.c.
 *
 * The runtime owns SIGSEGV while a write tracker needs it;
 * fault_signal_sigaction records the application's SIGSEGV handler (and
 * chains to it for faults that are not the tracker's) and hands every other
 * request to the kernel.
 * signal() is sigaction with glibc's BSD semantics (SA_RESTART, handler not
 * reset).
 */
#include "base/export.h"
#include "track/fault_signal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

PMT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return fault_signal_sigaction(sig, act, old);
}

PMT_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	if (handler == SIG_ERR || sig <= 0 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction act, old;
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, sig);
	act.sa_flags = SA_RESTART;
	if (fault_signal_sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}
