/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syscall_outputs -- where each system call writes into the program's
 * memory.
 *
 * Owns: the account of lib/runtime/syscall_outputs.tab (one line per x86-64
 * system call: its user-space outputs and their sizes, or why it has none),
 * turned into C at build time by gen_syscall_outputs.py.  The same table
 * gives preload/ its generated wrappers (each describes its libc function
 * as the system call it makes) and the test syscall_outputs_test.  The
 * policy applied to the ranges found here is prefault.h's.
 */
#ifndef PMT_SYSCALL_OUTPUTS_H
#define PMT_SYSCALL_OUTPUTS_H

#include <stdbool.h>
#include <stddef.h>

/* Told of one range [addr, addr+len) the kernel may write. */
typedef void (*syscall_outputs_fn)(void *ctx, void *addr, size_t len);

/* Call fn for every range system call nr with arguments a[0..5] may write
 * into user memory (pointers the caller gave; nested ones -- iovecs, a
 * message's name and control data -- are read from the caller's memory, as
 * the kernel will).  Returns false when nr writes none (fn not called). */
bool syscall_outputs(long nr, const unsigned long a[6], syscall_outputs_fn fn, void *ctx);

/* The bytes ioctl request req writes at its argument: _IOC_SIZE for an
 * _IOR/_IOWR request, the table's size for a legacy one, else 0. */
size_t syscall_outputs_ioctl(unsigned long req);

#endif
