/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pthread_cond -- condition waits release and re-acquire their mutex.
 *
 * The wait leaves one FASE level before the mutex is released inside glibc
 * and re-enters it with fase_reenter after glibc has re-acquired it: the
 * thread then already holds the mutex and must not wait at the gate for an
 * epoch that has not started (a thread that epoch waits for may be blocked
 * on this very mutex).  Every return path re-acquires the mutex (timeouts
 * too), and an early EINVAL never released it, so the level is always taken
 * back.
 *
 * A wait is a cancellation point.  A thread cancelled in it unwinds with the
 * mutex re-acquired (POSIX: before the first cleanup handler runs), past
 * this wrapper's return: a cleanup handler of ours, innermost, takes the
 * level back then, so the program's own handlers that unlock the mutex give
 * back exactly the levels it holds (else the thread would count one level
 * short while it still held the mutex, and an epoch could start inside its
 * critical section).
 *
 * glibc keeps two versions of pthread_cond_wait/timedwait: GLIBC_2.3.2 (the
 * current condition variable) and GLIBC_2.2.5 (for binaries built against the
 * old layout).  Both are exported here, each forwarding to its own version;
 * versions.map declares the version nodes.  pthread_cond_clockwait has only
 * one.
 */
#include "base/export.h"
#include "real.h"
#include "runtime/interpose.h"

#include <pthread.h>

static void reenter_on_cancel(void *m)
{
	fase_reenter_lock(m, NULL);
}

static void nothing_on_cancel(void *m)
{
	(void)m;
}

/* The wait between leaving the level and taking it back; `wait` is the
 * call.  A mutex PMTHREADS_NOT_FASE excludes took no level: none is left
 * or taken back. */
#define COND_WAIT(r, m, wait)                                                          \
	do {                                                                           \
		bool counted_ = fase_cond_leave(m);                                    \
		pthread_cleanup_push(counted_ ? reenter_on_cancel : nothing_on_cancel, \
				     (void *)(m));                                     \
		(r) = (wait);                                                          \
		pthread_cleanup_pop(0);                                                \
		if (counted_)                                                          \
			fase_reenter_lock((m), __builtin_return_address(0));           \
	} while (0)

PMT_EXPORT int pmt_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
__asm__(".symver pmt_cond_wait, pthread_cond_wait@@GLIBC_2.3.2");
int pmt_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	int r;
	COND_WAIT(r, m, REAL(cond_wait)(c, m));
	return r;
}

PMT_EXPORT int pmt_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
				  const struct timespec *t);
__asm__(".symver pmt_cond_timedwait, pthread_cond_timedwait@@GLIBC_2.3.2");
int pmt_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
{
	int r;
	COND_WAIT(r, m, REAL(cond_timedwait)(c, m, t));
	return r;
}

PMT_EXPORT int pmt_cond_wait_old(pthread_cond_t *c, pthread_mutex_t *m);
__asm__(".symver pmt_cond_wait_old, pthread_cond_wait@GLIBC_2.2.5");
int pmt_cond_wait_old(pthread_cond_t *c, pthread_mutex_t *m)
{
	int r;
	COND_WAIT(r, m, REAL(cond_wait_old)(c, m));
	return r;
}

PMT_EXPORT int pmt_cond_timedwait_old(pthread_cond_t *c, pthread_mutex_t *m,
				      const struct timespec *t);
__asm__(".symver pmt_cond_timedwait_old, pthread_cond_timedwait@GLIBC_2.2.5");
int pmt_cond_timedwait_old(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
{
	int r;
	COND_WAIT(r, m, REAL(cond_timedwait_old)(c, m, t));
	return r;
}

PMT_EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk,
				      const struct timespec *t)
{
	int r;
	COND_WAIT(r, m, REAL(cond_clockwait)(c, m, clk, t));
	return r;
}
