/* SPDX-License-Identifier: BSD-3-Clause */
/* kernel_stacks -- heap memory handed to the kernel as a stack.  See
 * kernel_stacks.h. */
#include "runtime/kernel_stacks.h"

#include "base/log.h"
#include "heap/heap.h"
#include "prim/prim.h"
#include "runtime/runtime.h"

#include <errno.h>
#include <string.h>

struct entry {
	enum kernel_stack_kind kind;
	uintptr_t owner;
	uintptr_t addr;
	size_t len;
};

/* From prim_map_any, never malloc: free() calls in here. */
static prim_lock_t lock = PRIM_LOCK_INIT;
PRIM_LOCK_NAMED(lock, stacks, "runtime/kernel_stacks: the heap memory pinned as stacks",
		PRIM_FORK_RESET);
static struct entry *entries;
static size_t n_entries, cap_entries;
atomic_uint kernel_stacks_in_use;

static bool grow(void)
{
	void *items = entries;
	bool ok = prim_array_grow(&items, &cap_entries, n_entries, sizeof(*entries), 32);
	entries = items;
	return ok;
}

int kernel_stack_add(enum kernel_stack_kind kind, uintptr_t owner, void *addr, size_t len)
{
	prim_lock(&lock);
	if (n_entries == cap_entries && !grow()) {
		prim_unlock(&lock);
		err_set_errno(ENOMEM, "cannot record a stack in the persistent heap");
		return -1;
	}
	if (runtime_pin_writable(addr, len) != 0) {
		prim_unlock(&lock);
		return -1;
	}
	entries[n_entries++] = (struct entry){ kind, owner, (uintptr_t)addr, len };
	atomic_store(&kernel_stacks_in_use, (unsigned)n_entries);
	prim_unlock(&lock);
	return 0;
}

void kernel_stack_set_owner(enum kernel_stack_kind kind, void *addr, uintptr_t owner)
{
	prim_lock(&lock);
	for (size_t i = 0; i < n_entries; i++)
		if (entries[i].kind == kind && entries[i].owner == 0 &&
		    entries[i].addr == (uintptr_t)addr) {
			entries[i].owner = owner;
			break;
		}
	prim_unlock(&lock);
}

/* Under lock. */
static void remove_at(size_t i)
{
	runtime_unpin((void *)entries[i].addr, entries[i].len);
	entries[i] = entries[--n_entries];
	atomic_store(&kernel_stacks_in_use, (unsigned)n_entries);
}

void kernel_stack_drop(enum kernel_stack_kind kind, uintptr_t owner, void *addr)
{
	prim_lock(&lock);
	for (size_t i = 0; i < n_entries;) {
		if (entries[i].kind == kind && entries[i].owner == owner &&
		    (addr == NULL || entries[i].addr == (uintptr_t)addr))
			remove_at(i);
		else
			i++;
	}
	prim_unlock(&lock);
}

void kernel_stack_freed(void *p, size_t len)
{
	uintptr_t lo = (uintptr_t)p, hi = lo + len;
	prim_lock(&lock);
	for (size_t i = 0; i < n_entries;) {
		if (entries[i].addr < hi && entries[i].addr + entries[i].len > lo)
			remove_at(i);
		else
			i++;
	}
	prim_unlock(&lock);
}

int kernel_stack_thread_begin(const pthread_attr_t *attr, void **stack)
{
	size_t size = 0;
	*stack = NULL;
	if (attr == NULL || pthread_attr_getstack(attr, stack, &size) != 0 ||
	    !heap_contains(*stack)) {
		*stack = NULL;
		return 0;
	}
	if (kernel_stack_add(KSTACK_THREAD, 0, *stack, size) != 0) {
		*stack = NULL;
		return -1;
	}
	return 0;
}

void kernel_stack_thread_end(void *stack, int r, pthread_t th)
{
	if (stack == NULL)
		return;
	if (r == 0)
		kernel_stack_set_owner(KSTACK_THREAD, stack, (uintptr_t)th);
	else
		kernel_stack_drop(KSTACK_THREAD, 0, stack);
}

int kernel_stack_sigaltstack(int (*real_sigaltstack)(const stack_t *, stack_t *),
			     const stack_t *ss, stack_t *old)
{
	bool pin = ss != NULL && !(ss->ss_flags & SS_DISABLE) && heap_contains(ss->ss_sp);
	if (pin && kernel_stack_add(KSTACK_SIGNAL, 0, ss->ss_sp, ss->ss_size) != 0) {
		errno = ENOMEM;
		return -1;
	}
	void *sp = ss != NULL ? ss->ss_sp : NULL;
	int r = real_sigaltstack(ss, old);
	int saved = errno;
	uintptr_t tid = (uintptr_t)prim_gettid();
	if (r == 0 && ss != NULL &&
	    atomic_load_explicit(&kernel_stacks_in_use, memory_order_relaxed) != 0)
		kernel_stack_drop(KSTACK_SIGNAL, tid, NULL);	/* the one it replaced */
	if (pin) {
		if (r == 0)
			kernel_stack_set_owner(KSTACK_SIGNAL, sp, tid);
		else
			kernel_stack_drop(KSTACK_SIGNAL, 0, sp);
	}
	errno = saved;
	return r;
}

void kernel_stacks_atfork_child(void)
{
	n_entries = 0;
	atomic_store(&kernel_stacks_in_use, 0);
}
