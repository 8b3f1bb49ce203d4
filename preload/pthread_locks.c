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
 * bookkeeping is inlined (quiesce.h's fase_enter_fast / fase_leave_fast):
 * the common case is the real lock call plus a few loads and one store to
 * the thread's own record.
 */
#include "base/export.h"
#include "quiesce/quiesce.h"
#include "real.h"

#include <errno.h>
#include <pthread.h>

static inline int acquired(int r)
{
	if (r != 0 && r != EOWNERDEAD)
		fase_leave_fast();
	return r;
}

static inline int released(int r)
{
	if (r == 0)
		fase_leave_fast();
	return r;
}

PMT_EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
	fase_enter_fast();
	return acquired(REAL(mutex_lock)(m));
}

PMT_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
	fase_enter_fast();
	return acquired(REAL(mutex_trylock)(m));
}

PMT_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *t)
{
	fase_enter_fast();
	return acquired(REAL(mutex_timedlock)(m, t));
}

PMT_EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t c, const struct timespec *t)
{
	fase_enter_fast();
	return acquired(REAL(mutex_clocklock)(m, c, t));
}

PMT_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
	return released(REAL(mutex_unlock)(m));
}

PMT_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
	fase_enter_fast();
	return acquired(REAL(rwlock_rdlock)(l));
}

PMT_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	fase_enter_fast();
	return acquired(REAL(rwlock_wrlock)(l));
}

PMT_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *l)
{
	fase_enter_fast();
	return acquired(REAL(rwlock_tryrdlock)(l));
}

PMT_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *l)
{
	fase_enter_fast();
	return acquired(REAL(rwlock_trywrlock)(l));
}

PMT_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *t)
{
	fase_enter_fast();
	return acquired(REAL(rwlock_timedrdlock)(l, t));
}

PMT_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *t)
{
	fase_enter_fast();
	return acquired(REAL(rwlock_timedwrlock)(l, t));
}

PMT_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t c,
					  const struct timespec *t)
{
	fase_enter_fast();
	return acquired(REAL(rwlock_clockrdlock)(l, c, t));
}

PMT_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t c,
					  const struct timespec *t)
{
	fase_enter_fast();
	return acquired(REAL(rwlock_clockwrlock)(l, c, t));
}

PMT_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
	return released(REAL(rwlock_unlock)(l));
}

PMT_EXPORT int pthread_spin_lock(pthread_spinlock_t *l)
{
	fase_enter_fast();
	return acquired(REAL(spin_lock)(l));
}

PMT_EXPORT int pthread_spin_trylock(pthread_spinlock_t *l)
{
	fase_enter_fast();
	return acquired(REAL(spin_trylock)(l));
}

PMT_EXPORT int pthread_spin_unlock(pthread_spinlock_t *l)
{
	return released(REAL(spin_unlock)(l));
}
