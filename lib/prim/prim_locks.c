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

void prim_locks_fork_prepare(void)
{
	size_t n;
	const struct prim_lock_kind *k = prim_lock_kinds(&n);
	for (unsigned rank = PRIM_FORK_RESET + 1; rank < PRIM_FORK_RANKS; rank++)
		for (size_t j = 0; j < n; j++) {
			if (k[j].rank != rank)
				continue;
			prim_lock_t *l;
			for (size_t i = 0; (l = k[j].each(i)) != NULL; i++)
				prim_lock(l);
		}
}

void prim_locks_fork_parent(void)
{
	size_t n;
	const struct prim_lock_kind *k = prim_lock_kinds(&n);
	for (unsigned rank = PRIM_FORK_RANKS - 1; rank > PRIM_FORK_RESET; rank--)
		for (size_t j = n; j-- > 0;) {
			if (k[j].rank != rank)
				continue;
			prim_lock_t *l;
			for (size_t i = 0; (l = k[j].each(i)) != NULL; i++)
				prim_unlock(l);
		}
}

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
