/* SPDX-License-Identifier: BSD-3-Clause */
/* internal_threads -- the runtime's own threads (the epoch thread, the lazy
 * restorer...): created with every signal blocked and in a runtime scope from
 * their first instruction, on stacks of the runtime's own memory, counted
 * apart from the application's, joined and their stacks given back. */
#include "quiesce/quiesce_internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

/* The runtime's threads run on stacks of its own memory (prim_map_any):
 * counted in its share of RLIMIT_AS and RLIMIT_DATA (runtime/memory_limits.h)
 * where glibc's would come out of the program's.  INTERNAL_STACK bytes each,
 * below them a read-only page that an overflow faults on. */
#define INTERNAL_STACK (8u << 20)
#define INTERNAL_STACKS_MAX 16

static struct internal_threads {
	/* How they are created and joined: set before quiesce_start
	 * (quiesce_set_thread_functions), read after. */
	quiesce_create_fn create;
	quiesce_join_fn join;
	/* How many are alive (atomic): from just before creation to
	 * quiesce_internal_thread_done. */
	atomic_int alive;
	prim_lock_t lock;		/* the slots */
	struct internal_stack {
		pthread_t th;
		unsigned char *map;	/* NULL: the slot is free */
		size_t len;
	} slot[INTERNAL_STACKS_MAX];
	/* The function and argument a new runtime thread starts with
	 * (internal_main), handed over under start.lock: the creator waits
	 * until the thread has taken them (no allocation, which may be the
	 * persistent heap's). */
	struct {
		prim_lock_t lock;
		void *(*fn)(void *);
		void *arg;
		atomic_uint taken;	/* futex */
	} start;
} internal = {
	.create = pthread_create,
	.join = pthread_join,
	.lock = PRIM_LOCK_INIT,
	.start.lock = PRIM_LOCK_INIT,
};
PRIM_LOCK_NAMED(internal.lock, stacks, "quiesce: the runtime's threads' stacks", PRIM_FORK_RESET);
PRIM_LOCK_NAMED(internal.start.lock, start, "quiesce: a runtime thread's start",
		PRIM_FORK_RESET);

void quiesce_set_thread_functions(quiesce_create_fn create, quiesce_join_fn join)
{
	internal.create = create != NULL ? create : pthread_create;
	internal.join = join != NULL ? join : pthread_join;
}

/* A stack in a free slot (its index), or -1: then glibc's. */
static int stack_take(pthread_attr_t *attr)
{
	size_t page = prim_page_size(), len = INTERNAL_STACK + page;
	prim_lock(&internal.lock);
	int k = 0;
	while (k < INTERNAL_STACKS_MAX && internal.slot[k].map != NULL)
		k++;
	unsigned char *map = k < INTERNAL_STACKS_MAX ? prim_map_any(len) : NULL;
	if (map == NULL || prim_protect(map, page, false) != 0 ||
	    pthread_attr_setstack(attr, map + page, INTERNAL_STACK) != 0) {
		if (map != NULL)
			prim_unmap(map, len);
		prim_unlock(&internal.lock);
		return -1;
	}
	internal.slot[k] = (struct internal_stack){ .map = map, .len = len };
	prim_unlock(&internal.lock);
	return k;
}

/* Slot k's stack unmapped (its thread never ran or has been joined); under
 * internal.lock. */
static void stack_give_back(int k)
{
	prim_unmap(internal.slot[k].map, internal.slot[k].len);
	internal.slot[k].map = NULL;
}

/* Every runtime thread's first function: a runtime scope from the first
 * instruction to the last (quiesce_runtime_enter), so that no lock it or a
 * library takes for it is ever a FASE or waits at the gate. */
static void *internal_main(void *unused)
{
	(void)unused;
	struct quiesce_scope s;
	quiesce_runtime_enter(&s);
	void *(*fn)(void *) = internal.start.fn;
	void *arg = internal.start.arg;
	atomic_store_explicit(&internal.start.taken, 1, memory_order_release);
	prim_futex_wake(&internal.start.taken, 1);
	void *ret = fn(arg);
	quiesce_runtime_leave(&s);
	return ret;
}

int quiesce_create_internal_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	/* Except SIGBUS: the write-back's store into a pool page the file
	 * system cannot provide raises it, and the runtime's handler turns
	 * it into an error (nvm.h); blocked, it would end the process. */
	sigdelset(&all, SIGBUS);
	pthread_attr_t attr;
	bool have_attr = pthread_attr_init(&attr) == 0;
	int k = have_attr ? stack_take(&attr) : -1;
	pthread_sigmask(SIG_SETMASK, &all, &old);
	atomic_fetch_add(&internal.alive, 1);
	prim_lock(&internal.start.lock);
	internal.start.fn = fn;
	internal.start.arg = arg;
	atomic_store_explicit(&internal.start.taken, 0, memory_order_relaxed);
	int e = internal.create(th, k >= 0 ? &attr : NULL, internal_main, NULL);
	if (e != 0)
		atomic_fetch_sub(&internal.alive, 1);
	else
		while (atomic_load_explicit(&internal.start.taken, memory_order_acquire) == 0)
			prim_futex_wait(&internal.start.taken, 0, 0);
	prim_unlock(&internal.start.lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (have_attr)
		pthread_attr_destroy(&attr);
	if (k >= 0) {
		prim_lock(&internal.lock);
		if (e == 0)
			internal.slot[k].th = *th;
		else
			stack_give_back(k);
		prim_unlock(&internal.lock);
	}
	return e;
}

int quiesce_join_internal_thread(pthread_t th, void **ret)
{
	int e = internal.join(th, ret);
	if (e != 0)
		return e;
	/* Ended and joined: nothing runs on its stack any more. */
	prim_lock(&internal.lock);
	for (int k = 0; k < INTERNAL_STACKS_MAX; k++)
		if (internal.slot[k].map != NULL && pthread_equal(internal.slot[k].th, th))
			stack_give_back(k);
	prim_unlock(&internal.lock);
	return 0;
}

void quiesce_internal_thread_done(void)
{
	atomic_fetch_sub(&internal.alive, 1);
}

int quiesce_internal_threads_alive(void) { return atomic_load(&internal.alive); }

void quiesce_internal_threads_atfork_child(void)
{
	/* The parent's threads are not here; their stacks stay mapped (the
	 * child's copy of them), their slots are free.  How threads are
	 * created stays. */
	atomic_store(&internal.alive, 0);
	memset(internal.slot, 0, sizeof(internal.slot));
}
