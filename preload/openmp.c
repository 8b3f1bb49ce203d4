/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * openmp -- OpenMP's mutual exclusion counts as the program's locks.
 *
 * GCC's libgomp and LLVM's libomp take their own futex locks for critical
 * sections, atomic sections done with a lock, the lock API and ordered
 * regions; none of that goes through a pthread call.  The entry points the
 * compiler emits and the program calls are interposed here: GCC's GOMP_*
 * (which libomp also exports, for GCC-built code), the omp_*_lock API (both
 * runtimes), and LLVM's __kmpc_critical / __kmpc_ordered.  Each acquire is a
 * FASE level taken before the real call, as for a pthread mutex
 * (pthread_locks.c); a test that fails gives it back; each release leaves
 * one.  A nest lock is a recursive mutex: every set is a level.
 *
 * An ordered region is a turn, not a lock: the thread whose turn comes first
 * may be the one waiting at the gate, so the wait for the turn happens
 * outside the FASE (fase_pass_gate, then fase_reenter once the turn is ours).
 *
 * A barrier takes no lock.  Inside a critical section OpenMP forbids one, but
 * a thread may reach one holding a pthread lock: counted like
 * pthread_barrier_wait (pthread_blocking.c).
 *
 * Threads of either runtime are started with pthread_create, which is
 * interposed (pthread_threads.c): they are registered like any other.
 *
 * A libomp reduction: __kmpc_reduce(_nowait) returns 1 to the thread that
 * must combine into the shared variables (under a lock the runtime took, or
 * as the last thread of a tree barrier whose other threads wait for it), and
 * that thread then calls __kmpc_end_reduce(_nowait).  Its combine is a FASE:
 * the gate is passed before the call (the others may wait in the barrier for
 * this thread, so it must not wait at the gate inside a FASE), the level is
 * taken on 1 and given back before the end call, whose blocking version
 * waits in a barrier for the team after releasing the lock.  GCC's
 * reductions use GOMP_atomic_start or atomic instructions.
 *
 * The runtime is found on the first call (real_openmp), not at load: it may
 * be dlopen'd after us.  Not interposed, and so not FASEs (pmthreads(7)):
 * the Fortran lock API (omp_set_lock_ ...) and doacross waits (ordered
 * depend).  The nest-lock functions forward to the runtime's
 * default version (libgomp's OMP_3.0 layout): a binary built against the
 * OMP_1.0 nest locks of GCC before 4.4 is not supported.
 */
#include "base/export.h"
#include "real.h"
#include "runtime/interpose.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The next definition of name, of type type, found on the first call. */
#define NEXT_OMP(type, name)                                                 \
	({                                                                   \
		static void *slot_;                                          \
		(type)real_openmp(&slot_, name);                             \
	})

typedef void (*void_fn)(void);
typedef void (*ptr_fn)(void *);
typedef int (*test_fn)(void *);
typedef bool (*bool_fn)(void);
typedef void (*kmpc_crit_fn)(void *, int32_t, void *);
typedef void (*kmpc_crit_hint_fn)(void *, int32_t, void *, uint32_t);
typedef void (*kmpc_gtid_fn)(void *, int32_t);
typedef int32_t (*kmpc_reduce_fn)(void *, int32_t, int32_t, size_t, void *,
				  void (*)(void *, void *), void *);

/* Levels this thread took in __kmpc_reduce(_nowait) and has not yet given
 * back in the end call. */
static __thread unsigned reduce_levels __attribute__((tls_model("initial-exec")));

static inline void blocking(const char *call)
{
	if (fase_depth() > 0)
		quiesce_note_blocking_in_fase(call);
}

/* -- GCC's entry points (GOMP_1.0 / GOMP_4.0; libomp exports them too) -- */

PMT_EXPORT void GOMP_critical_start(void)
{
	fase_enter_fast();
	NEXT_OMP(void_fn, "GOMP_critical_start")();
}

PMT_EXPORT void GOMP_critical_end(void)
{
	NEXT_OMP(void_fn, "GOMP_critical_end")();
	fase_leave_fast();
}

PMT_EXPORT void GOMP_critical_name_start(void **pptr)
{
	fase_enter_fast();
	NEXT_OMP(ptr_fn, "GOMP_critical_name_start")(pptr);
}

PMT_EXPORT void GOMP_critical_name_end(void **pptr)
{
	NEXT_OMP(ptr_fn, "GOMP_critical_name_end")(pptr);
	fase_leave_fast();
}

PMT_EXPORT void GOMP_atomic_start(void)
{
	fase_enter_fast();
	NEXT_OMP(void_fn, "GOMP_atomic_start")();
}

PMT_EXPORT void GOMP_atomic_end(void)
{
	NEXT_OMP(void_fn, "GOMP_atomic_end")();
	fase_leave_fast();
}

PMT_EXPORT void GOMP_ordered_start(void)
{
	fase_pass_gate();
	NEXT_OMP(void_fn, "GOMP_ordered_start")();
	fase_reenter();
}

PMT_EXPORT void GOMP_ordered_end(void)
{
	NEXT_OMP(void_fn, "GOMP_ordered_end")();
	fase_leave();
}

PMT_EXPORT void GOMP_barrier(void)
{
	blocking("GOMP_barrier");
	NEXT_OMP(void_fn, "GOMP_barrier")();
}

PMT_EXPORT bool GOMP_barrier_cancel(void)
{
	blocking("GOMP_barrier_cancel");
	return NEXT_OMP(bool_fn, "GOMP_barrier_cancel")();
}

/* -- the lock API (omp_lock_t / omp_nest_lock_t, passed by address) -- */

PMT_EXPORT void omp_set_lock(void *l)
{
	fase_enter_fast();
	NEXT_OMP(ptr_fn, "omp_set_lock")(l);
}

PMT_EXPORT int omp_test_lock(void *l)
{
	fase_enter_fast();
	int r = NEXT_OMP(test_fn, "omp_test_lock")(l);
	if (r == 0)
		fase_leave_fast();
	return r;
}

PMT_EXPORT void omp_unset_lock(void *l)
{
	NEXT_OMP(ptr_fn, "omp_unset_lock")(l);
	fase_leave_fast();
}

PMT_EXPORT void omp_set_nest_lock(void *l)
{
	fase_enter_fast();
	NEXT_OMP(ptr_fn, "omp_set_nest_lock")(l);
}

/* Returns the new nesting count, 0 when another thread holds the lock. */
PMT_EXPORT int omp_test_nest_lock(void *l)
{
	fase_enter_fast();
	int r = NEXT_OMP(test_fn, "omp_test_nest_lock")(l);
	if (r == 0)
		fase_leave_fast();
	return r;
}

PMT_EXPORT void omp_unset_nest_lock(void *l)
{
	NEXT_OMP(ptr_fn, "omp_unset_nest_lock")(l);
	fase_leave_fast();
}

/* -- LLVM's entry points (libomp; clang emits these) -- */

PMT_EXPORT void __kmpc_critical(void *loc, int32_t gtid, void *crit)
{
	fase_enter_fast();
	NEXT_OMP(kmpc_crit_fn, "__kmpc_critical")(loc, gtid, crit);
}

PMT_EXPORT void __kmpc_critical_with_hint(void *loc, int32_t gtid, void *crit, uint32_t hint)
{
	fase_enter_fast();
	NEXT_OMP(kmpc_crit_hint_fn, "__kmpc_critical_with_hint")(loc, gtid, crit, hint);
}

PMT_EXPORT void __kmpc_end_critical(void *loc, int32_t gtid, void *crit)
{
	NEXT_OMP(kmpc_crit_fn, "__kmpc_end_critical")(loc, gtid, crit);
	fase_leave_fast();
}

PMT_EXPORT void __kmpc_ordered(void *loc, int32_t gtid)
{
	fase_pass_gate();
	NEXT_OMP(kmpc_gtid_fn, "__kmpc_ordered")(loc, gtid);
	fase_reenter();
}

PMT_EXPORT void __kmpc_end_ordered(void *loc, int32_t gtid)
{
	NEXT_OMP(kmpc_gtid_fn, "__kmpc_end_ordered")(loc, gtid);
	fase_leave();
}

PMT_EXPORT void __kmpc_barrier(void *loc, int32_t gtid)
{
	blocking("__kmpc_barrier");
	NEXT_OMP(kmpc_gtid_fn, "__kmpc_barrier")(loc, gtid);
}

static int32_t reduce_entered(int32_t r)
{
	if (r == 1) {
		fase_reenter();
		reduce_levels++;
	}
	return r;
}

static void reduce_leave(void)
{
	if (reduce_levels > 0) {
		reduce_levels--;
		fase_leave();
	}
}

PMT_EXPORT int32_t __kmpc_reduce_nowait(void *loc, int32_t gtid, int32_t nvars, size_t size,
					void *data, void (*func)(void *, void *), void *lck)
{
	fase_pass_gate();
	return reduce_entered(NEXT_OMP(kmpc_reduce_fn, "__kmpc_reduce_nowait")(loc, gtid, nvars, size,
										 data, func, lck));
}

PMT_EXPORT int32_t __kmpc_reduce(void *loc, int32_t gtid, int32_t nvars, size_t size, void *data,
				 void (*func)(void *, void *), void *lck)
{
	fase_pass_gate();
	return reduce_entered(NEXT_OMP(kmpc_reduce_fn, "__kmpc_reduce")(loc, gtid, nvars, size, data,
									  func, lck));
}

PMT_EXPORT void __kmpc_end_reduce_nowait(void *loc, int32_t gtid, void *lck)
{
	reduce_leave();
	NEXT_OMP(kmpc_crit_fn, "__kmpc_end_reduce_nowait")(loc, gtid, lck);
}

PMT_EXPORT void __kmpc_end_reduce(void *loc, int32_t gtid, void *lck)
{
	reduce_leave();
	NEXT_OMP(kmpc_crit_fn, "__kmpc_end_reduce")(loc, gtid, lck);
}
