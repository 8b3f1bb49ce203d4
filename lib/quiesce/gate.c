/* SPDX-License-Identifier: BSD-3-Clause */
/* gate -- the records (one per thread, in slabs), the gate and the FASE
 * levels: the slow halves of the inline fast paths in quiesce.h (a thread's
 * first record, waiting while an epoch is due), a condition wait's lock
 * released and re-acquired, and the membarrier(2) registration that lets the fast path
 * skip its fence.  The epoch thread's side of the gate is attempt.c. */
#include "quiesce/quiesce_internal.h"

#include "base/log.h"

#include <stdatomic.h>
#include <stddef.h>

/* What the fast path in quiesce.h reads (declared there). */
__thread struct quiesce_thread quiesce_self __attribute__((tls_model("initial-exec")));
/* The gate; threads wait on it with a futex. */
atomic_uint quiesce_gate = GATE_OPEN;
/* When membarrier(2) is unavailable fase_enter pays a full fence instead.
 * Until quiesce_init or the first quiesce_start has registered it, fence.
 * Only ever goes from 1 to 0 while other threads may run
 * (quiesce_fence_settle): 0 means this process is registered, so the epoch
 * thread's membarrier covers every thread whatever it read. */
atomic_uint quiesce_need_fence = 1;

struct quiesce_records quiesce_records = { .lock = PRIM_LOCK_INIT };
/* A slab half added when the process was copied is the child's to lose. */
PRIM_LOCK_NAMED(quiesce_records.lock, slabs, "quiesce: adding a slab of thread records",
		PRIM_FORK_RESET);

/* ---- records ---- */

/* Whether every record is in use (under quiesce_records.lock). */
static bool records_full(void)
{
	QUIESCE_FOR_EACH_REC(r)
		if (atomic_load(&r->in_use) == 0)
			return false;
	return true;
}

static struct quiesce_rec *claim_record(void)
{
	for (;;) {
		QUIESCE_FOR_EACH_REC(r) {
			unsigned free_ = 0;
			if (atomic_load_explicit(&r->in_use, memory_order_relaxed) == 0 &&
			    atomic_compare_exchange_strong(&r->in_use, &free_, 1)) {
				atomic_fetch_add(&quiesce_records.registered, 1);
				atomic_store_explicit(&r->tid, (int)prim_gettid(), memory_order_relaxed);
				return r;
			}
		}
		/* All taken: add a slab, unless another thread just did. */
		prim_lock(&quiesce_records.lock);
		struct slab *head = atomic_load(&quiesce_records.slabs);
		if (records_full()) {
			struct slab *n = prim_map_any(sizeof(struct slab));
			if (n == NULL)
				log_fatal("cannot map memory for thread records");
			atomic_store_explicit(&n->next, head, memory_order_relaxed);
			atomic_store_explicit(&quiesce_records.slabs, n, memory_order_release);
		}
		prim_unlock(&quiesce_records.lock);
	}
}

static inline struct quiesce_rec *my_record(void)
{
	/* A claimed record has depth 0, like quiesce_self.depth of a thread
	 * without one. */
	struct quiesce_rec *r = quiesce_self.rec;
	if (__builtin_expect(r == NULL, 0))
		quiesce_self.rec = r = claim_record();
	return r;
}

void quiesce_thread_start(void)
{
	if (quiesce_self.runtime == 0)
		(void)my_record();
}

void quiesce_thread_exit(void)
{
	struct quiesce_rec *r = quiesce_self.rec;
	if (r == NULL || quiesce_self.runtime != 0)
		return;
	quiesce_self.rec = NULL;
	quiesce_self.depth = 0;
	quiesce_self.n_excluded = 0;
	/* A thread that exits holding locks holds them forever; counting them
	 * would stall every later epoch until abandonment. */
	atomic_store_explicit(&r->depth, 0, memory_order_release);
	atomic_store_explicit(&r->in_use, 0, memory_order_release);
	unsigned was_registered = atomic_fetch_sub(&quiesce_records.registered, 1);
	PMT_ASSERT(was_registered > 0);
	if (atomic_load_explicit(&quiesce_gate, memory_order_relaxed) == GATE_CLOSING)
		fase_wake_epoch();
}

unsigned quiesce_registered_threads(void) { return atomic_load(&quiesce_records.registered); }

unsigned quiesce_busy_threads(void)
{
	unsigned busy = 0;
	QUIESCE_FOR_EACH_REC(r)
		if (atomic_load_explicit(&r->depth, memory_order_acquire) != 0)
			busy++;
	return busy;
}

/* ---- the application side ---- */

static void wait_for_open(void)
{
	unsigned s;
	while ((s = atomic_load_explicit(&quiesce_gate, memory_order_acquire)) != GATE_OPEN)
		prim_futex_wait(&quiesce_gate, s, 0);
}

void fase_enter(void) { fase_enter_fast(); }

/* The 0 -> 1 transition when the fast path could not finish it: the thread
 * is unregistered (r NULL), the gate is not open, or fences are needed. */
void fase_enter_slow(struct quiesce_rec *r, const void *lock, const void *site)
{
	if (r == NULL) {
		/* Unregistered, so depth is 0 (the fast path took d != 0); never
		 * in a runtime scope, whose record is always set. */
		r = my_record();
		atomic_store_explicit(&r->lock, (uintptr_t)lock, memory_order_relaxed);
		atomic_store_explicit(&r->site, (uintptr_t)site, memory_order_relaxed);
		quiesce_self.depth = 1;
		atomic_store_explicit(&r->depth, 1, memory_order_relaxed);
	}
	/* depth is 1 here. */
	PMT_ASSERT(quiesce_self.depth == 1 && atomic_load(&r->depth) == 1);
	for (;;) {
		/* As in fase_enter_fast: the store must be visible before the
		 * gate is read; without membarrier only a full fence does it. */
		if (atomic_load_explicit(&quiesce_need_fence, memory_order_relaxed))
			atomic_thread_fence(memory_order_seq_cst);
		else
			atomic_signal_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&quiesce_gate, memory_order_acquire) == GATE_OPEN)
			return;
		/* An epoch is due: back off so it can start, wait, retry. */
		quiesce_self.depth = 0;
		atomic_store_explicit(&r->depth, 0, memory_order_release);
		fase_wake_epoch();
		wait_for_open();
		/* A new FASE: an abandoned attempt may have marked the old
		 * one's record before this thread backed off. */
		atomic_store_explicit(&r->lock, (uintptr_t)lock, memory_order_relaxed);
		quiesce_self.depth = 1;
		atomic_store_explicit(&r->depth, 1, memory_order_relaxed);
	}
}

void fase_wake_epoch(void)
{
	atomic_fetch_add(&quiesce_epoch.wake_word, 1);
	prim_futex_wake(&quiesce_epoch.wake_word, 1);
}

void fase_reenter(void)
{
	fase_reenter_lock(NULL, __builtin_return_address(0));
}

void fase_reenter_lock(const void *lock, const void *site)
{
	if (quiesce_self.runtime != 0) {
		/* The private record: a level, never the gate. */
		fase_enter_site(lock, site);
		return;
	}
	struct quiesce_rec *r = my_record();
	unsigned d = quiesce_self.depth;
	PMT_ASSERT(d + 1 != 0);
	quiesce_self.depth = d + 1;
	if (d != 0) {
		atomic_store_explicit(&r->depth, d + 1, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&r->lock, (uintptr_t)lock, memory_order_relaxed);
	atomic_store_explicit(&r->site, (uintptr_t)site, memory_order_relaxed);
	atomic_store_explicit(&r->depth, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&quiesce_gate, memory_order_acquire) == GATE_OPEN)
		return;
	/* CLOSING: the epoch thread scans under quiesce_epoch.lock, so once we
	 * hold it any later scan sees our depth and waits for us -- we keep the
	 * mutex and proceed.  RUNNING: the epoch thread holds the lock until
	 * the gate reopens, so taking it waits the epoch out without waiting
	 * for any application lock. */
	prim_lock(&quiesce_epoch.lock);
	prim_unlock(&quiesce_epoch.lock);
}

void fase_leave(void) { fase_leave_fast(); }

/* The other half of fase_reenter_lock: a condition wait releases lock.  An
 * excluded lock (not_fase.c) took no level and leaves none.  Here, beside
 * fase_wake_epoch, so that the leave's wake-up is inlined as in fase_leave. */
bool fase_cond_leave(const void *lock)
{
	for (unsigned i = 0; i < quiesce_self.n_excluded; i++)
		if (quiesce_self.excluded[i] == lock)
			return false;
	fase_leave_fast();
	return true;
}

void fase_pass_gate(void)
{
	if (quiesce_self.depth != 0)
		return;
	fase_enter_fast();
	fase_leave_fast();
}

unsigned fase_depth(void)
{
	/* In a scope the record only looks busy (runtime_rec). */
	return quiesce_self.runtime != 0 ? quiesce_self.app_depth : quiesce_self.depth;
}

/* ---- membarrier ---- */

/* Never sets quiesce_need_fence while it is 0: a thread may have taken the
 * fast path on that value without a fence, which only the registration makes
 * safe. */
bool quiesce_fence_settle(void)
{
	if (atomic_load(&quiesce_need_fence) != 0 && prim_membarrier_register())
		atomic_store(&quiesce_need_fence, 0);
	return atomic_load(&quiesce_need_fence) == 0;
}

void quiesce_init(void)
{
	(void)quiesce_fence_settle();
}
