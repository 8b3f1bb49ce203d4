/* SPDX-License-Identifier: BSD-3-Clause */
/* prim_locks_test -- the runtime's named locks, held on demand by a test.
 * See prim_locks_test.h. */
#include "prim/prim_locks_test.h"

#include "prim/prim.h"

/* Exported from the tests' build of the preload, where the program under
 * test looks them up. */
#define HOOK __attribute__((visibility("default")))

static const struct prim_lock_kind *kind(size_t k)
{
	size_t n;
	const struct prim_lock_kind *all = prim_lock_kinds(&n);
	return k < n ? &all[k] : NULL;
}

HOOK size_t prim_test_lock_kinds(void)
{
	size_t n;
	(void)prim_lock_kinds(&n);
	return n;
}

HOOK const char *prim_test_lock_what(size_t k)
{
	const struct prim_lock_kind *r = kind(k);
	return r != NULL ? r->what : NULL;
}

HOOK int prim_test_lock_rank(size_t k)
{
	const struct prim_lock_kind *r = kind(k);
	return r != NULL ? (int)r->rank : -1;
}

HOOK bool prim_test_lock_take(size_t k, size_t i)
{
	const struct prim_lock_kind *r = kind(k);
	prim_lock_t *l = r != NULL ? r->each(i) : NULL;
	if (l == NULL)
		return false;
	prim_lock(l);
	return true;
}

HOOK void prim_test_lock_release(size_t k, size_t i)
{
	const struct prim_lock_kind *r = kind(k);
	prim_lock_t *l = r != NULL ? r->each(i) : NULL;
	if (l != NULL)
		prim_unlock(l);
}

HOOK bool prim_test_locks_free(size_t *k, size_t *i)
{
	size_t n;
	const struct prim_lock_kind *all = prim_lock_kinds(&n);
	for (size_t j = 0; j < n; j++) {
		prim_lock_t *l;
		for (size_t x = 0; (l = all[j].each(x)) != NULL; x++)
			if (atomic_load(&l->state) != 0) {
				*k = j;
				*i = x;
				return false;
			}
	}
	return true;
}
