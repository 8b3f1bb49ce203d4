/* SPDX-License-Identifier: BSD-3-Clause */
/* not_fase -- PMTHREADS_NOT_FASE: the call sites whose locks the user said
 * are no critical section, asked of the classifier once per site and cached
 * by address; the locks such sites hold, per thread (they take no level;
 * fase_cond_leave in gate.c leaves none for them either). */
#include "quiesce/quiesce_internal.h"

#include <stdatomic.h>
#include <stdint.h>

/* Nonzero once a classifier is installed: the fast path in quiesce.h asks
 * fase_excluded_acquire then (declared there). */
atomic_uint quiesce_exclusions;

/* The classifier's answers by call site: open addressing, lock-free
 * (a site is claimed with a CAS, its verdict published after it). */
#define SITE_SLOTS 1024

/* The classifier of call sites and its answers.  A fork child keeps them
 * (the child runs the same code). */
static struct sites {
	_Atomic(quiesce_site_fn) fn;	/* atomic */
	struct {
		_Atomic uintptr_t site;	/* claimed with a CAS */
		atomic_uchar verdict;	/* published (release) after it */
	} cache[SITE_SLOTS];
} sites;

enum { VERDICT_UNKNOWN = 0, VERDICT_COUNTS = 1, VERDICT_EXCLUDED = 2 };

void quiesce_set_site_classifier(quiesce_site_fn fn)
{
	atomic_store(&sites.fn, fn);
	atomic_store(&quiesce_exclusions, fn != NULL);
}

/* The slot a site's probe starts at. */
static unsigned site_home(uintptr_t site)
{
	return (unsigned)((site * 0x9e3779b97f4a7c15ULL) >> 54) % SITE_SLOTS;
}

static unsigned site_verdict(uintptr_t site)
{
	unsigned h = site_home(site);
	for (unsigned i = 0; i < SITE_SLOTS; i++) {
		unsigned at = (h + i) % SITE_SLOTS;
		uintptr_t k = atomic_load_explicit(&sites.cache[at].site, memory_order_acquire);
		if (k == site)
			return atomic_load_explicit(&sites.cache[at].verdict, memory_order_acquire);
		if (k == 0)
			return VERDICT_UNKNOWN;
	}
	return VERDICT_UNKNOWN;
}

static void site_remember(uintptr_t site, unsigned verdict)
{
	unsigned h = site_home(site);
	for (unsigned i = 0; i < SITE_SLOTS; i++) {
		unsigned at = (h + i) % SITE_SLOTS;
		uintptr_t k = 0;
		if (atomic_compare_exchange_strong(&sites.cache[at].site, &k, site) || k == site) {
			atomic_store_explicit(&sites.cache[at].verdict, (unsigned char)verdict,
					      memory_order_release);
			return;
		}
	}
	/* Full: asked again next time. */
}

bool fase_excluded_acquire(const void *lock, const void *site)
{
	quiesce_site_fn fn = atomic_load_explicit(&sites.fn, memory_order_acquire);
	/* The runtime's own locks are no FASE anyway, and must not take the
	 * program's entries of excluded[]. */
	if (fn == NULL || lock == NULL || quiesce_self.classifying || quiesce_self.runtime != 0)
		return false;
	unsigned v = site_verdict((uintptr_t)site);
	if (v == VERDICT_UNKNOWN) {
		/* The classifier may take locks of its own (the dynamic
		 * loader's): those count as usual rather than recurse. */
		quiesce_self.classifying = true;
		bool excluded = fn(site);
		quiesce_self.classifying = false;
		v = excluded ? VERDICT_EXCLUDED : VERDICT_COUNTS;
		if (site_verdict((uintptr_t)site) == VERDICT_UNKNOWN) {
			site_remember((uintptr_t)site, v);
			if (excluded)
				atomic_fetch_add_explicit(&quiesce_counters.not_fase_sites, 1,
							  memory_order_relaxed);
		}
	}
	if (v != VERDICT_EXCLUDED || quiesce_self.n_excluded == QUIESCE_MAX_EXCLUDED)
		return false;
	quiesce_self.excluded[quiesce_self.n_excluded++] = lock;
	return true;
}

bool fase_excluded_release(const void *lock)
{
	unsigned n = quiesce_self.n_excluded;
	for (unsigned i = n; i-- > 0;)
		if (quiesce_self.excluded[i] == lock) {
			quiesce_self.excluded[i] = quiesce_self.excluded[n - 1];
			quiesce_self.n_excluded = n - 1;
			return true;
		}
	return false;
}
