/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * c11_threads -- C11 <threads.h> behaves as its pthread counterpart does.
 *
 * glibc (2.28 in libpthread, 2.34 and later in libc) implements mtx_*, cnd_*
 * and thrd_* with internal calls to its pthread code, which the pthread
 * wrappers never see: without these, a C11 program's critical sections would
 * not be FASEs, and its threads would not be registered.  Each wrapper does
 * what the pthread wrapper of the same operation does (pthread_locks.c,
 * pthread_cond.c, pthread_threads.c, pthread_blocking.c).  The C11 calls
 * report thrd_success, thrd_busy, thrd_timedout or thrd_error instead of an
 * errno, so a level is kept only on thrd_success.
 *
 * thrd_create cannot go through the pthread_create wrapper: glibc marks a
 * C11 thread so that its start routine's int result is what thrd_join
 * returns, so the trampoline here returns int.  thrd_exit is
 * pthread_exit((void *)(intptr_t)res) in glibc, so it goes through the
 * pthread_exit wrapper.  thrd_detach, thrd_sleep, cnd_signal, cnd_broadcast
 * and call_once change no FASE depth and block on no lock the program holds:
 * not wrapped (call_once's routine takes its locks through these wrappers).
 */
#include "base/export.h"
#include "preload.h"
#include "real.h"
#include "runtime/interpose.h"

#include <pthread.h>
#include <stdint.h>
#include <threads.h>

/* glibc's allocator, called directly: the trampoline is runtime memory and
 * never belongs in the persistent heap. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

/* ENTER(m): as pthread_locks.c's, with the wrapper's caller as the site. */
#define ENTER(m) bool counted = fase_enter_lock((m), __builtin_return_address(0))

static inline int acquired(bool counted, const void *m, int r)
{
	if (r != thrd_success)
		fase_acquire_failed(counted, m);
	return r;
}

static inline int released(const void *m, int r)
{
	if (r == thrd_success)
		fase_leave_lock(m);
	return r;
}

PMT_EXPORT int mtx_lock(mtx_t *m)
{
	ENTER(m);
	return acquired(counted, m, REAL(mtx_lock)(m));
}

PMT_EXPORT int mtx_trylock(mtx_t *m)
{
	ENTER(m);
	return acquired(counted, m, REAL(mtx_trylock)(m));
}

PMT_EXPORT int mtx_timedlock(mtx_t *__restrict m, const struct timespec *__restrict t)
{
	ENTER(m);
	return acquired(counted, m, REAL(mtx_timedlock)(m, t));
}

PMT_EXPORT int mtx_unlock(mtx_t *m)
{
	return released(m, REAL(mtx_unlock)(m));
}

/* As pthread_cond_wait: the level is given up while glibc has released the
 * mutex, and taken back without waiting at the gate once it re-acquired it
 * (on every return, timeouts included). */
PMT_EXPORT int cnd_wait(cnd_t *c, mtx_t *m)
{
	bool counted = fase_cond_leave(m);
	int r = REAL(cnd_wait)(c, m);
	if (counted)
		fase_reenter_lock(m, __builtin_return_address(0));
	return r;
}

PMT_EXPORT int cnd_timedwait(cnd_t *__restrict c, mtx_t *__restrict m,
			     const struct timespec *__restrict t)
{
	bool counted = fase_cond_leave(m);
	int r = REAL(cnd_timedwait)(c, m, t);
	if (counted)
		fase_reenter_lock(m, __builtin_return_address(0));
	return r;
}

struct c11_trampoline {
	thrd_start_t start;
	void *arg;
	bool blocks_segv;	/* the creator's view of its mask (fault_signal.h) */
};

static void c11_thread_cleanup(void *unused)
{
	(void)unused;
	preload_thread_exit();
}

static int c11_thread_main(void *p)
{
	struct c11_trampoline t = *(struct c11_trampoline *)p;
	__libc_free(p);
	preload_thread_started(t.blocks_segv);
	int ret;
	pthread_cleanup_push(c11_thread_cleanup, NULL);
	ret = t.start(t.arg);
	pthread_cleanup_pop(1);
	return ret;
}

PMT_EXPORT int thrd_create(thrd_t *th, thrd_start_t start, void *arg)
{
	struct c11_trampoline *t = __libc_malloc(sizeof(*t));
	if (t == NULL)
		return thrd_nomem;
	t->start = start;
	t->arg = arg;
	t->blocks_segv = fault_signal_app_blocked();
	/* Counted before it exists, as pthread_create's (a main thread that
	 * calls thrd_exit must not look like the last one). */
	quiesce_app_thread_added();
	int r = REAL(thrd_create)(th, c11_thread_main, t);
	if (r != thrd_success) {
		quiesce_app_thread_gone();
		__libc_free(t);
	}
	return r;
}

PMT_EXPORT _Noreturn void thrd_exit(int res)
{
	pthread_exit((void *)(intptr_t)res);
}

PMT_EXPORT int thrd_join(thrd_t th, int *res)
{
	if (fase_depth() > 0)
		quiesce_note_blocking_in_fase("thrd_join");
	return REAL(thrd_join)(th, res);
}
