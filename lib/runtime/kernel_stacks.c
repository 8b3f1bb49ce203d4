/* SPDX-License-Identifier: BSD-3-Clause */
/* kernel_stacks -- heap memory handed to the kernel as a stack.  See
 * kernel_stacks.h. */
#include "runtime/kernel_stacks.h"

#include "base/log.h"
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
static struct entry *entries;
static size_t n_entries, cap_entries;
atomic_uint kernel_stacks_in_use;

static bool grow(void)
{
	size_t cap = cap_entries == 0 ? 32 : cap_entries * 2;
	struct entry *e = prim_map_any(cap * sizeof(*e));
	if (e == NULL)
		return false;
	if (entries != NULL) {
		memcpy(e, entries, n_entries * sizeof(*e));
		prim_unmap(entries, cap_entries * sizeof(*entries));
	}
	entries = e;
	cap_entries = cap;
	return true;
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

void kernel_stacks_atfork_child(void)
{
	lock = (prim_lock_t)PRIM_LOCK_INIT;
	n_entries = 0;
	atomic_store(&kernel_stacks_in_use, 0);
}
