/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernel_stacks -- persistent-heap memory the program hands to the kernel as
 * a stack.
 *
 * Owns: which ranges of the heap are thread stacks (pthread_attr_setstack
 * with malloc'd memory) or alternate signal stacks (sigaltstack), and
 * keeping each writable under the mprotect tracker (runtime_pin_writable)
 * from before the kernel may first write it until it is released: a
 * thread's stack when the thread is joined, an alternate stack when its
 * thread replaces or disables it, either when the program frees the memory
 * (a detached thread's stack).  A range the program keeps using for
 * something else after the kernel is done with it only stays writable, and
 * persisted at every epoch, until then: nothing is lost.
 *
 * An entry is (kind, owner, address): the owner is the pthread_t of the
 * thread running on the stack, or the thread id of the thread whose
 * alternate stack it is; 0 while the call that hands it over has not
 * returned.
 */
#ifndef PMT_KERNEL_STACKS_H
#define PMT_KERNEL_STACKS_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kernel_stack_kind { KSTACK_THREAD, KSTACK_SIGNAL };

/* Pin [addr, addr+len) and record it as (kind, owner, addr).  Returns 0, or
 * -1 with err_get() set (the range is then not pinned). */
int kernel_stack_add(enum kernel_stack_kind kind, uintptr_t owner, void *addr, size_t len);
/* The entry (kind, 0, addr) now belongs to owner. */
void kernel_stack_set_owner(enum kernel_stack_kind kind, void *addr, uintptr_t owner);
/* Unpin and forget the entries of kind held by owner (with addr NULL), or
 * only the one at addr. */
void kernel_stack_drop(enum kernel_stack_kind kind, uintptr_t owner, void *addr);
/* The program freed [p, p+len): unpin and forget every entry overlapping
 * it.  Callers test kernel_stacks_in_use first (free's fast path). */
void kernel_stack_freed(void *p, size_t len);
extern atomic_uint kernel_stacks_in_use __attribute__((visibility("hidden")));

/* pthread_create with attr: a stack the program allocated in the heap
 * (pthread_attr_setstack) must be writable before the kernel and the new
 * thread first write it.  kernel_stack_thread_begin pins it and returns it
 * in *stack (NULL when attr names none in the heap); 0, or -1 when it cannot
 * be pinned (the creation then fails with EAGAIN).  After the creation,
 * kernel_stack_thread_end gives the stack to the thread th, or with r != 0
 * (the creation failed) unpins it. */
int kernel_stack_thread_begin(const pthread_attr_t *attr, void **stack);
void kernel_stack_thread_end(void *stack, int r, pthread_t th);

/* sigaltstack(ss, old) through the real function: an alternate stack in the
 * heap is pinned from before it is set until its thread replaces or
 * disables it (then the one it replaced is unpinned). */
int kernel_stack_sigaltstack(int (*real_sigaltstack)(const stack_t *, stack_t *),
			     const stack_t *ss, stack_t *old);

/* After fork() in the child: no tracker, nothing pinned, nothing recorded. */
void kernel_stacks_atfork_child(void);

#endif
