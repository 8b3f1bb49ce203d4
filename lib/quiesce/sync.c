/* SPDX-License-Identifier: BSD-3-Clause */
/* sync -- durability waits: pmthreads_sync (an epoch requested and waited
 * for, bounded by the sync timeout, which measures a stall), epochs on
 * demand (output commit), and the numbers of the quiescent points reached and
 * made durable. */
#include "quiesce/quiesce_internal.h"

#include "base/log.h"

#include <errno.h>
#include <stdatomic.h>

int quiesce_sync(void)
{
	struct quiesce_epoch *e = &quiesce_epoch;
	if (fase_depth() != 0) {
		err_set("pmthreads_sync called while holding a lock: no quiescent point can "
			"be reached until it is released");
		errno = EDEADLK;
		return -1;
	}
	if (!atomic_load(&e->running)) {
		err_set("pmthreads_sync: no epoch thread is running");
		errno = ESRCH;
		return -1;
	}
	prim_lock(&quiesce_counters.lock);
	quiesce_counters.counts.syncs++;
	prim_unlock(&quiesce_counters.lock);
	unsigned mine = atomic_fetch_add(&e->requested, 1) + 1;
	fase_wake_epoch();
	/* The timeout measures a stall: time in which no quiescent point is
	 * reached while the epoch thread is not working either.  A write-back
	 * under way, however slow (a device, an emulated latency, a batch of
	 * a whole heap), is progress and is waited for; its failure is an
	 * error of its own (EIO, through the caller). */
	uint64_t timeout = quiesce_stall_sync_timeout_ns();
	uint64_t points = atomic_load(&e->pauses), since = prim_now_ns();
	for (;;) {
		unsigned s = atomic_load_explicit(&e->served, memory_order_acquire);
		if ((int)(s - mine) >= 0)
			return 0;
		if (!atomic_load(&e->running) || atomic_load(&e->stopping)) {
			err_set("pmthreads_sync: the epoch thread stopped");
			errno = ESRCH;
			return -1;
		}
		uint64_t now = prim_now_ns(), p = atomic_load(&e->pauses);
		if (p != points || atomic_load(&e->working)) {
			points = p;
			since = now;
		} else if (now - since >= timeout) {
			prim_lock(&quiesce_counters.lock);
			quiesce_counters.counts.sync_timeouts++;
			prim_unlock(&quiesce_counters.lock);
			/* The report is out before this returns (the program may
			 * exit next). */
			if (quiesce_stall_report_now())
				err_set("pmthreads_sync: no quiescent point for %llu ms: a thread "
					"holds a lock (see the stall report on standard error; "
					"PMTHREADS_SYNC_TIMEOUT_MS sets the bound)",
					(unsigned long long)(timeout / 1000000));
			else
				err_set("pmthreads_sync: no quiescent point for %llu ms, and no thread "
					"was seen holding a lock: the epoch thread did not get to run "
					"(an overloaded machine?); PMTHREADS_SYNC_TIMEOUT_MS sets the "
					"bound", (unsigned long long)(timeout / 1000000));
			errno = ETIMEDOUT;
			return -1;
		}
		uint64_t left = timeout - (now - since);
		prim_futex_wait(&e->served, s, left < 100000000ULL ? left : 100000000ULL);
	}
}

void quiesce_request_epoch(void)
{
	/* Like quiesce_sync's request, without the wait: the epoch thread
	 * starts an epoch at once while requested != served.  The wake-up
	 * costs a system call, so only when no request is pending already
	 * (a pending one is served by an epoch that closes the gate after
	 * this bump was made, or by an earlier one that leaves requested !=
	 * served behind it, which the loop sees). */
	unsigned before = atomic_fetch_add(&quiesce_epoch.requested, 1);
	if (before == atomic_load(&quiesce_epoch.served))
		fase_wake_epoch();
}

uint64_t quiesce_pauses(void) { return atomic_load(&quiesce_epoch.pauses); }
uint64_t quiesce_durable_pause(void) { return atomic_load(&quiesce_epoch.durable_pause); }
uint64_t quiesce_current_pause(void) { return atomic_load(&quiesce_epoch.pauses); }

bool quiesce_in_final_epoch(void) { return atomic_load(&quiesce_epoch.in_final_attempt); }

bool quiesce_epoch_awaited(void)
{
	return atomic_load_explicit(&quiesce_epoch.attempt_awaited, memory_order_relaxed);
}
