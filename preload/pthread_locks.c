/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pthread_locks -- counting the application's locks.
 *
 * Every acquire enters a FASE level before the real acquire (the first level
 * may wait at the gate, which must happen while the thread holds nothing);
 * an acquire that fails or times out gives the level back.  Every successful
 * release leaves one.  EOWNERDEAD from a robust mutex means it was acquired.
 *
 * These run on every lock operation of the application, so the FASE depth
 * bookkeeping is inlined (quiesce.h's fase_enter_lock / fase_leave_lock):
 * the common case is the real lock call plus a few loads and one store to
 * the thread's own record.
 */
#include "base/export.h"
#include "real.h"
#include "runtime/interpose.h"

#include <errno.h>
#include <pthread.h>

/* ENTER(l): the level for lock l, with the wrapper's caller as the site
 * (the stall report names it; PMTHREADS_NOT_FASE matches it). */
#define ENTER(l) bool counted = fase_enter_lock((const void *)(l), __builtin_return_address(0))

static inline int acquired(bool counted, const void *l, int r)
{
	if (r != 0 && r != EOWNERDEAD)
		fase_acquire_failed(counted, l);
	return r;
}

static inline int released(const void *l, int r)
{
	if (r == 0)
		fase_leave_lock(l);
	return r;
}

PMT_EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
	ENTER(m);
	return acquired(counted, m, REAL(mutex_lock)(m));
}

PMT_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
	ENTER(m);
	return acquired(counted, m, REAL(mutex_trylock)(m));
}

PMT_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *t)
{
	ENTER(m);
	return acquired(counted, m, REAL(mutex_timedlock)(m, t));
}

PMT_EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t c, const struct timespec *t)
{
	ENTER(m);
	return acquired(counted, m, REAL(mutex_clocklock)(m, c, t));
}

PMT_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
	return released(m, REAL(mutex_unlock)(m));
}

PMT_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
	ENTER(l);
	return acquired(counted, l, REAL(rwlock_rdlock)(l));
}

PMT_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	ENTER(l);
	return acquired(counted, l, REAL(rwlock_wrlock)(l));
}

PMT_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *l)
{
	ENTER(l);
	return acquired(counted, l, REAL(rwlock_tryrdlock)(l));
}

PMT_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *l)
{
	ENTER(l);
	return acquired(counted, l, REAL(rwlock_trywrlock)(l));
}

PMT_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *t)
{
	ENTER(l);
	return acquired(counted, l, REAL(rwlock_timedrdlock)(l, t));
}

PMT_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *t)
{
	ENTER(l);
	return acquired(counted, l, REAL(rwlock_timedwrlock)(l, t));
}

PMT_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t c,
					  const struct timespec *t)
{
	ENTER(l);
	return acquired(counted, l, REAL(rwlock_clockrdlock)(l, c, t));
}

PMT_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t c,
					  const struct timespec *t)
{
	ENTER(l);
	return acquired(counted, l, REAL(rwlock_clockwrlock)(l, c, t));
}

PMT_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
	return released(l, REAL(rwlock_unlock)(l));
}

PMT_EXPORT int pthread_spin_lock(pthread_spinlock_t *l)
{
	ENTER(l);
	return acquired(counted, (const void *)l, REAL(spin_lock)(l));
}

PMT_EXPORT int pthread_spin_trylock(pthread_spinlock_t *l)
{
	ENTER(l);
	return acquired(counted, (const void *)l, REAL(spin_trylock)(l));
}

PMT_EXPORT int pthread_spin_unlock(pthread_spinlock_t *l)
{
	return released((const void *)l, REAL(spin_unlock)(l));
}
