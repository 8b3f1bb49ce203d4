/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ompfase -- FASE depth follows OpenMP's mutual exclusion: critical sections
 * (unnamed and named), the lock and nest-lock API (set, test, unset), the
 * atomic sections a compiler implements with a lock, ordered regions,
 * reductions, and the threads of the runtime's team.
 *
 * Built with GCC (libgomp) and, where clang is installed, with clang
 * (libomp).  The probe is pmthreads_sync() as in c11fase.c: EDEADLK exactly
 * when the calling thread is inside a FASE.  Run under the preload with
 * PMTHREADS_HEAP=malloc; the first check that fails makes the exit status
 * 1; SIGALRM after 60 s ends a run that hangs.
 */
#include "fase_probe.h"

#include <errno.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifndef __clang__
/* What GCC emits around an atomic update it cannot do with one instruction
 * (libgomp's ABI; a long double += is one). */
void GOMP_atomic_start(void);
void GOMP_atomic_end(void);
#endif

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, ms % 1000 * 1000000L };
	nanosleep(&t, NULL);
}

/* A user-defined reduction: the runtime combines the threads' copies, then
 * one thread at a time merges into the shared variable -- under
 * GOMP_atomic_start with GCC, after __kmpc_reduce returned 1 (or inside
 * __kmpc_critical) with clang.  The merges into the shared one are
 * counted, with those made inside a FASE. */
struct tally {
	long n;
};
static struct tally shared_tally;
static int merges_into_shared, merges_in_fase;

static void tally_merge(struct tally *out, const struct tally *in)
{
	if (out == &shared_tally) {
		merges_into_shared++;
		merges_in_fase += in_fase();
	}
	out->n += in->n;
}
#pragma omp declare reduction(tally : struct tally : tally_merge(&omp_out, &omp_in)) \
	initializer(omp_priv = (struct tally){ 0 })

int main(void)
{
	if (pmthreads_sync == NULL) {
		fprintf(stderr, "ompfase: run it under pmthreads (LD_PRELOAD, PMTHREADS_HEAP=malloc)\n");
		return 2;
	}
	alarm(60);
	int inside;

	expect("outside any lock", !in_fase());
#pragma omp critical
	inside = in_fase();
	expect("an unnamed critical section is a FASE", inside);
	expect("which ends with it", !in_fase());
#pragma omp critical(probe)
	inside = in_fase();
	expect("a named critical section is a FASE", inside);
	expect("which ends with it", !in_fase());

#ifndef __clang__
	GOMP_atomic_start();
	inside = in_fase();
	GOMP_atomic_end();
	expect("an atomic section taken as a lock is a FASE", inside);
	expect("which ends with it", !in_fase());
#endif
	/* Whatever the compiler emits for it, it ends balanced. */
	static long double acc;
#pragma omp parallel for num_threads(2)
	for (int i = 0; i < 1000; i++) {
#pragma omp atomic
		acc += 1.0L;
	}
	expect("atomic updates of a long double leave no FASE behind",
	       !in_fase() && acc == 1000.0L);

	omp_lock_t l;
	omp_init_lock(&l);
	omp_set_lock(&l);
	expect("omp_set_lock enters a FASE", in_fase());
	omp_unset_lock(&l);
	expect("omp_unset_lock leaves it", !in_fase());
	expect("omp_test_lock on a free lock succeeds", omp_test_lock(&l) != 0);
	expect("and enters a FASE", in_fase());
	omp_unset_lock(&l);
	expect("omp_unset_lock leaves it", !in_fase());

	/* omp_test_lock failing: thread 1 holds the lock. */
	int busy = -1, after = -1;
#pragma omp parallel num_threads(2)
	{
		if (omp_get_thread_num() == 1)
			omp_set_lock(&l);
#pragma omp barrier
		if (omp_get_thread_num() == 0)
			busy = omp_test_lock(&l);
#pragma omp barrier
		if (omp_get_thread_num() == 1)
			omp_unset_lock(&l);
#pragma omp barrier
		if (omp_get_thread_num() == 0)
			after = in_fase();
	}
	expect("omp_test_lock on a lock another thread holds fails", busy == 0);
	expect("and leaves no FASE behind", after == 0 && !in_fase());
	omp_destroy_lock(&l);

	omp_nest_lock_t n;
	omp_init_nest_lock(&n);
	omp_set_nest_lock(&n);
	omp_set_nest_lock(&n);
	omp_unset_nest_lock(&n);
	expect("a nest lock set twice, unset once: still a FASE", in_fase());
	omp_unset_nest_lock(&n);
	expect("unset twice: none", !in_fase());
	expect("omp_test_nest_lock on a free nest lock returns 1", omp_test_nest_lock(&n) == 1);
	expect("and enters a FASE", in_fase());
	omp_unset_nest_lock(&n);
	expect("omp_unset_nest_lock leaves it", !in_fase());
	int nest_busy = -1;
#pragma omp parallel num_threads(2)
	{
		if (omp_get_thread_num() == 1)
			omp_set_nest_lock(&n);
#pragma omp barrier
		if (omp_get_thread_num() == 0)
			nest_busy = omp_test_nest_lock(&n);
#pragma omp barrier
		if (omp_get_thread_num() == 1)
			omp_unset_nest_lock(&n);
	}
	expect("omp_test_nest_lock held by another thread fails without a FASE",
	       nest_busy == 0 && !in_fase());
	omp_destroy_nest_lock(&n);

	/* ordered: inside, a FASE; many turns while epochs are due do not
	 * deadlock with the gate. */
	int ordered_inside = 1, ordered_iters = 0;
#pragma omp parallel for ordered schedule(static, 1) num_threads(2) reduction(+ : ordered_iters)
	for (int i = 0; i < 400; i++) {
#pragma omp ordered
		{
			if (i % 100 == 0 && !in_fase())
				ordered_inside = 0;
			ordered_iters++;
		}
	}
	expect("an ordered region is a FASE", ordered_inside == 1 && ordered_iters == 400);
	expect("which ends with it", !in_fase());

#pragma omp parallel for num_threads(2) reduction(tally : shared_tally)
	for (int i = 0; i < 1000; i++)
		shared_tally.n++;
	expect("a reduction merges into the shared variable inside a FASE",
	       shared_tally.n == 1000 && merges_into_shared >= 1 &&
		       merges_in_fase == merges_into_shared);
	expect("and leaves no FASE behind", !in_fase());

	/* A critical section in a team thread holds the epoch up: the thread is
	 * registered and its lock seen. */
	atomic_int entered = 0, released = 0;
	int waited = -1;
#pragma omp parallel num_threads(2)
	{
		if (omp_get_thread_num() == 1) {
#pragma omp critical
			{
				atomic_store(&entered, 1);
				sleep_ms(200);
				atomic_store(&released, 1);
			}
		} else {
			while (!atomic_load(&entered))
				sleep_ms(1);
			waited = !in_fase() && atomic_load(&released);
		}
	}
	expect("a quiescent point waits for a team thread's critical section", waited == 1);

	printf("%s\n", failures == 0 ? "ompfase: all passed" : "ompfase: FAILED");
	return failures == 0 ? 0 : 1;
}
