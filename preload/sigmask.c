/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmask -- the application's signal masks pass through
 * lib/track/fault_signal.c, which keeps SIGSEGV unblocked (a write fault
 * with it blocked would end the process) and reports it as the application
 * set it.
 */
#include "base/export.h"
#include "preload.h"
#include "real.h"
#include "track/fault_signal.h"

#include <errno.h>
#include <signal.h>

PMT_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return fault_signal_sigmask(how, set, old, REAL(sigmask));
}

PMT_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	int e = fault_signal_sigmask(how, set, old, REAL(sigmask));
	if (e != 0) {
		errno = e;
		return -1;
	}
	return 0;
}

PMT_EXPORT int sigsuspend(const sigset_t *mask)
{
	sigset_t m = *mask;
	fault_signal_filter_mask(&m);
	return REAL(sigsuspend)(&m);
}
