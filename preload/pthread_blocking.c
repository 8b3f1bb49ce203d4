/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pthread_blocking -- joins, barrier waits and semaphore waits.
 *
 * These take no lock the program releases, so they change no FASE depth: a
 * thread blocked in them outside a FASE never delays an epoch.  One blocked
 * in them while holding a lock keeps every epoch from starting until it
 * returns (quiesce abandons and retries the attempts meanwhile); the
 * wrappers note that case so the stats and PMTHREADS_VERBOSE=1 say why
 * epochs were abandoned.  pthread_tryjoin_np and sem_trywait never block
 * and are not wrapped.
 */
#include "base/export.h"
#include "real.h"
#include "runtime/interpose.h"

#include <pthread.h>
#include <semaphore.h>

static inline void note(const char *call)
{
	if (fase_depth() > 0)
		quiesce_note_blocking_in_fase(call);
}

/* A joined thread no longer runs on its stack: one the program gave it from
 * the heap need not stay pinned (kernel_stacks.h). */
static inline int joined(pthread_t th, int r)
{
	if (r == 0 && atomic_load_explicit(&kernel_stacks_in_use, memory_order_relaxed) != 0)
		kernel_stack_drop(KSTACK_THREAD, (uintptr_t)th, NULL);
	return r;
}

PMT_EXPORT int pthread_join(pthread_t th, void **ret)
{
	note("pthread_join");
	return joined(th, REAL(join)(th, ret));
}

PMT_EXPORT int pthread_timedjoin_np(pthread_t th, void **ret, const struct timespec *abstime)
{
	note("pthread_timedjoin_np");
	return joined(th, REAL(timedjoin_np)(th, ret, abstime));
}

PMT_EXPORT int pthread_clockjoin_np(pthread_t th, void **ret, clockid_t clock,
				    const struct timespec *abstime)
{
	note("pthread_clockjoin_np");
	return joined(th, REAL(clockjoin_np)(th, ret, clock, abstime));
}

PMT_EXPORT int pthread_barrier_wait(pthread_barrier_t *b)
{
	note("pthread_barrier_wait");
	return REAL(barrier_wait)(b);
}

PMT_EXPORT int sem_wait(sem_t *s)
{
	note("sem_wait");
	return REAL(sem_wait)(s);
}

PMT_EXPORT int sem_timedwait(sem_t *s, const struct timespec *abstime)
{
	note("sem_timedwait");
	return REAL(sem_timedwait)(s, abstime);
}

PMT_EXPORT int sem_clockwait(sem_t *s, clockid_t clock, const struct timespec *abstime)
{
	note("sem_clockwait");
	return REAL(sem_clockwait)(s, clock, abstime);
}
