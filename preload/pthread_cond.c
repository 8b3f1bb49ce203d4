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
 * glibc keeps two versions of pthread_cond_wait/timedwait: GLIBC_2.3.2 (the
 * current condition variable) and GLIBC_2.2.5 (for binaries built against the
 * old layout).  Both are exported here, each forwarding to its own version;
 * versions.map declares the version nodes.  pthread_cond_clockwait has only
 * one.
 */
#include "base/export.h"
#include "quiesce/quiesce.h"
#include "real.h"

#include <pthread.h>

PMT_EXPORT int pmt_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
__asm__(".symver pmt_cond_wait, pthread_cond_wait@@GLIBC_2.3.2");
int pmt_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	fase_leave();
	int r = REAL(cond_wait)(c, m);
	fase_reenter();
	return r;
}

PMT_EXPORT int pmt_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
				  const struct timespec *t);
__asm__(".symver pmt_cond_timedwait, pthread_cond_timedwait@@GLIBC_2.3.2");
int pmt_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
{
	fase_leave();
	int r = REAL(cond_timedwait)(c, m, t);
	fase_reenter();
	return r;
}

PMT_EXPORT int pmt_cond_wait_old(pthread_cond_t *c, pthread_mutex_t *m);
__asm__(".symver pmt_cond_wait_old, pthread_cond_wait@GLIBC_2.2.5");
int pmt_cond_wait_old(pthread_cond_t *c, pthread_mutex_t *m)
{
	fase_leave();
	int r = REAL(cond_wait_old)(c, m);
	fase_reenter();
	return r;
}

PMT_EXPORT int pmt_cond_timedwait_old(pthread_cond_t *c, pthread_mutex_t *m,
				      const struct timespec *t);
__asm__(".symver pmt_cond_timedwait_old, pthread_cond_timedwait@GLIBC_2.2.5");
int pmt_cond_timedwait_old(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
{
	fase_leave();
	int r = REAL(cond_timedwait_old)(c, m, t);
	fase_reenter();
	return r;
}

PMT_EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk,
				      const struct timespec *t)
{
	fase_leave();
	int r = REAL(cond_clockwait)(c, m, clk, t);
	fase_reenter();
	return r;
}
