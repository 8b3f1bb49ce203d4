/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * c11fase -- FASE depth follows what each C11 <threads.h> call did.
 *
 * Run under the preload with the runtime started (PMTHREADS_HEAP=malloc).
 * The probe is pmthreads_sync(), which fails with EDEADLK exactly when the
 * calling thread is inside a FASE, and otherwise returns once an epoch has
 * reached a quiescent point (no thread inside a FASE).  Each check prints
 * one line; the first that fails prints why and exits 1.  A SIGALRM after
 * 60 s ends a run that hangs (an epoch that can never start).
 */
#include "fase_probe.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

static struct timespec in_ms(long ms)
{
	struct timespec t;
	timespec_get(&t, TIME_UTC);
	t.tv_nsec += ms * 1000000L;
	t.tv_sec += t.tv_nsec / 1000000000L;
	t.tv_nsec %= 1000000000L;
	return t;
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, ms % 1000 * 1000000L };
	thrd_sleep(&t, NULL);
}

static mtx_t m, timed, rec;
static cnd_t c;
static atomic_int holder_state;	/* 1: holds the lock; 2: may release it */
static int go;

/* Holds lock until main says so (holder_state 2). */
static int holder(void *lock)
{
	mtx_lock(lock);
	atomic_store(&holder_state, 1);
	while (atomic_load(&holder_state) != 2)
		sleep_ms(1);
	mtx_unlock(lock);
	return 0;
}

static int waiter_result;

/* Waits on c inside a FASE, then checks it is inside one again. */
static int waiter(void *unused)
{
	(void)unused;
	mtx_lock(&m);
	atomic_store(&holder_state, 1);
	while (!go)
		cnd_wait(&c, &m);
	waiter_result = in_fase();
	mtx_unlock(&m);
	return in_fase() ? 1 : 42;
}

static atomic_int released;

/* Holds m for 200 ms, then notes that it let go. */
static int slow_holder(void *unused)
{
	(void)unused;
	mtx_lock(&m);
	atomic_store(&holder_state, 1);
	sleep_ms(200);
	atomic_store(&released, 1);
	mtx_unlock(&m);
	return 0;
}

/* Exits with m2 still locked: its FASE must end with it. */
static int exits_locked(void *lock)
{
	mtx_lock(lock);
	thrd_exit(7);
}

int main(void)
{
	if (pmthreads_sync == NULL) {
		fprintf(stderr, "c11fase: run it under pmthreads (LD_PRELOAD, PMTHREADS_HEAP=malloc)\n");
		return 2;
	}
	alarm(60);
	mtx_init(&m, mtx_plain);
	mtx_init(&timed, mtx_timed);
	mtx_init(&rec, mtx_plain | mtx_recursive);
	cnd_init(&c);

	expect("outside any lock", !in_fase());
	mtx_lock(&m);
	expect("mtx_lock enters a FASE", in_fase());
	mtx_unlock(&m);
	expect("mtx_unlock leaves it", !in_fase());

	expect("mtx_trylock on a free mutex succeeds", mtx_trylock(&m) == thrd_success);
	expect("and enters a FASE", in_fase());
	mtx_unlock(&m);

	thrd_t t;
	atomic_store(&holder_state, 0);
	thrd_create(&t, holder, &m);
	while (atomic_load(&holder_state) != 1)
		sleep_ms(1);
	expect("mtx_trylock on a held mutex is busy", mtx_trylock(&m) == thrd_busy);
	atomic_store(&holder_state, 2);
	thrd_join(t, NULL);
	expect("and leaves no FASE behind", !in_fase());

	atomic_store(&holder_state, 0);
	thrd_create(&t, holder, &timed);
	while (atomic_load(&holder_state) != 1)
		sleep_ms(1);
	struct timespec soon = in_ms(50);
	expect("mtx_timedlock on a held mutex times out", mtx_timedlock(&timed, &soon) == thrd_timedout);
	atomic_store(&holder_state, 2);
	thrd_join(t, NULL);
	expect("and leaves no FASE behind", !in_fase());
	soon = in_ms(1000);
	expect("mtx_timedlock on a free mutex succeeds", mtx_timedlock(&timed, &soon) == thrd_success);
	expect("and enters a FASE", in_fase());
	mtx_unlock(&timed);
	expect("mtx_unlock leaves it", !in_fase());

	mtx_lock(&rec);
	mtx_lock(&rec);
	mtx_unlock(&rec);
	expect("a recursive mutex locked twice, unlocked once: still a FASE", in_fase());
	mtx_unlock(&rec);
	expect("unlocked twice: none", !in_fase());

	mtx_lock(&m);
	soon = in_ms(20);
	expect("cnd_timedwait times out", cnd_timedwait(&c, &m, &soon) == thrd_timedout);
	expect("and has taken the FASE back with the mutex", in_fase());
	mtx_unlock(&m);
	expect("mtx_unlock leaves it", !in_fase());

	/* A thread waiting in cnd_wait holds no lock: an epoch can start. */
	atomic_store(&holder_state, 0);
	thrd_create(&t, waiter, NULL);
	while (atomic_load(&holder_state) != 1)
		sleep_ms(1);
	mtx_lock(&m);	/* the waiter is inside cnd_wait once this succeeds */
	mtx_unlock(&m);
	expect("a quiescent point is reached while a thread waits in cnd_wait", !in_fase());
	mtx_lock(&m);
	go = 1;
	cnd_signal(&c);
	mtx_unlock(&m);
	int res = 0;
	expect("thrd_join succeeds", thrd_join(t, &res) == thrd_success);
	expect("the woken waiter is inside a FASE again", waiter_result == 1);
	expect("and leaves it at mtx_unlock (thrd_join returns its 42)", res == 42);

	/* A lock held by a thread from thrd_create holds the epoch up. */
	atomic_store(&holder_state, 0);
	thrd_create(&t, slow_holder, NULL);
	while (atomic_load(&holder_state) != 1)
		sleep_ms(1);
	expect("a quiescent point waits for a C11 thread's mtx_unlock",
	       !in_fase() && atomic_load(&released) == 1);
	thrd_join(t, NULL);

	/* A C11 thread that exits holding a mutex ends its FASE. */
	mtx_t m2;
	mtx_init(&m2, mtx_plain);
	thrd_create(&t, exits_locked, &m2);
	res = 0;
	thrd_join(t, &res);
	expect("thrd_exit returns its result to thrd_join", res == 7);
	expect("a thread that exited holding a mutex does not hold epochs up", !in_fase());

	printf("%s\n", failures == 0 ? "c11fase: all passed" : "c11fase: FAILED");
	return failures == 0 ? 0 : 1;
}
