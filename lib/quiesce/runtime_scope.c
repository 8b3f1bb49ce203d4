/* SPDX-License-Identifier: BSD-3-Clause */
/* runtime_scope -- the runtime's own code on a thread (quiesce.h: its
 * threads, its handlers, its exit): the thread's record swapped for a private
 * one whose depth never comes near 0, so that the lock wrappers' unchanged
 * fast path counts no FASE the epoch thread's scan sees and never reads the
 * gate.  Thread-local stores only: async-signal-safe. */
#include "quiesce/quiesce_internal.h"

#include <stdatomic.h>

/* A thread's record inside a runtime scope: never in a slab, so the scan
 * never sees it, and its depth starts far from 0, so the lock fast path only
 * moves it (heap operations in the epoch procedure, a library's locks in a
 * handler) and never reaches the gate. */
#define RUNTIME_REC_DEPTH (1u << 30)

void quiesce_runtime_enter(struct quiesce_scope *s)
{
	/* What this scope found, whatever an interrupted enter or leave had
	 * done of its own steps: restored as found. */
	s->rec = quiesce_self.rec;
	s->depth = quiesce_self.depth;
	s->runtime = quiesce_self.runtime;
	s->app_depth = quiesce_self.app_depth;
	atomic_signal_fence(memory_order_seq_cst);
	if (s->runtime == 0) {
		/* The outermost scope: the application's depth is what the
		 * thread has now, unless an enter this interrupts has already
		 * swapped the record (and set app_depth). */
		if (s->rec != &quiesce_self.runtime_rec)
			quiesce_self.app_depth = s->depth;
		atomic_store_explicit(&quiesce_self.runtime_rec.depth, RUNTIME_REC_DEPTH,
				      memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		quiesce_self.rec = &quiesce_self.runtime_rec;
		quiesce_self.depth = RUNTIME_REC_DEPTH;
	}
	/* Last: until here a handler that interrupts sees runtime == 0 and
	 * makes its own switch, which it undoes before returning. */
	atomic_signal_fence(memory_order_seq_cst);
	quiesce_self.runtime = s->runtime + 1;
	atomic_signal_fence(memory_order_seq_cst);
}

void quiesce_runtime_leave(const struct quiesce_scope *s)
{
	atomic_signal_fence(memory_order_seq_cst);
	/* First: from here a handler that interrupts switches for itself. */
	quiesce_self.runtime = s->runtime;
	atomic_signal_fence(memory_order_seq_cst);
	if (s->runtime == 0) {
		quiesce_self.depth = s->depth;
		quiesce_self.rec = s->rec;
		/* An enter interrupted half-way had swapped the record. */
		if (s->rec == &quiesce_self.runtime_rec)
			atomic_store_explicit(&quiesce_self.runtime_rec.depth, s->depth,
					      memory_order_relaxed);
	}
	quiesce_self.app_depth = s->app_depth;
	atomic_signal_fence(memory_order_seq_cst);
}

unsigned quiesce_runtime_depth(void) { return quiesce_self.runtime; }

void quiesce_runtime_become_app(void)
{
	struct quiesce_scope fresh = { 0 };
	quiesce_runtime_leave(&fresh);
}
