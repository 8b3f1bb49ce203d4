/* SPDX-License-Identifier: BSD-3-Clause */
/* prim_locks -- the runtime's locks, named where they are defined
 * (PRIM_LOCK_NAMED, PRIM_LOCK_KIND), and what fork does to each.  See
 * prim.h. */
#include "prim/prim.h"

#include <stddef.h>

/* The linker's bounds of the section the records go into.  Weak: a program
 * linked with none of the runtime's locks has no such section. */
extern const struct prim_lock_kind __start_pmt_locks[]
	__attribute__((weak, visibility("hidden")));
extern const struct prim_lock_kind __stop_pmt_locks[]
	__attribute__((weak, visibility("hidden")));

const struct prim_lock_kind *prim_lock_kinds(size_t *n)
{
	*n = __start_pmt_locks == NULL ? 0 : (size_t)(__stop_pmt_locks - __start_pmt_locks);
	return __start_pmt_locks;
}

/* Every lock of a fork rank: taken in ascending rank, or released in the
 * reverse order. */
static void ranked(bool take)
{
	size_t n;
	const struct prim_lock_kind *k = prim_lock_kinds(&n);
	for (unsigned step = 1; step < PRIM_FORK_RANKS; step++) {
		unsigned rank = take ? step : PRIM_FORK_RANKS - step;
		for (size_t x = 0; x < n; x++) {
			const struct prim_lock_kind *r = &k[take ? x : n - 1 - x];
			if (r->rank != rank)
				continue;
			prim_lock_t *l;
			for (size_t i = 0; (l = r->each(i)) != NULL; i++) {
				if (take)
					prim_lock(l);
				else
					prim_unlock(l);
			}
		}
	}
}

void prim_locks_fork_prepare(void) { ranked(true); }
void prim_locks_fork_parent(void) { ranked(false); }

void prim_locks_atfork_child(void)
{
	/* Only the forking thread exists: whatever held a lock of rank 0 is
	 * gone, and the locks of a rank are this thread's own.  Written only
	 * where held: the heap's are in tracked memory, where every store is
	 * a write the tracker sees. */
	size_t n;
	const struct prim_lock_kind *k = prim_lock_kinds(&n);
	for (size_t j = 0; j < n; j++) {
		prim_lock_t *l;
		for (size_t i = 0; (l = k[j].each(i)) != NULL; i++)
			if (atomic_load_explicit(&l->state, memory_order_relaxed) != 0)
				atomic_store_explicit(&l->state, 0, memory_order_relaxed);
	}
}
