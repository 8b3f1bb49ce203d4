/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * signals -- the application's signal dispositions pass through the tracker.
 *
 * The mprotect tracker owns SIGSEGV while it is attached; tracker_sigaction
 * records the application's SIGSEGV handler (and chains to it for faults
 * that are not first writes) and hands every other request to the kernel.
 * signal() is sigaction with glibc's BSD semantics (SA_RESTART, handler not
 * reset).
 */
#include "base/export.h"
#include "track/tracker.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

PMT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return tracker_sigaction(sig, act, old);
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
	if (tracker_sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}
