/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * malloc_next -- the allocator the program has without us, which the malloc
 * wrappers (malloc.c, malloc_extra.c) forward to.
 *
 * Owns: the next definition of each malloc-family entry point in lookup
 * order -- glibc's, or that of an allocator the program links (jemalloc,
 * tcmalloc, mimalloc) -- kept only when the object that defines the next
 * `malloc` defines it too, so that every block the program gets outside the
 * persistent heap comes from one allocator and goes back to it; and the
 * small arena that serves allocations made while that lookup runs (dlsym
 * may allocate), whose blocks are recognised by address and never freed.
 */
#ifndef PMT_PRELOAD_MALLOC_NEXT_H
#define PMT_PRELOAD_MALLOC_NEXT_H

#include <malloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct malloc_next {
	/* The allocator's own entry points: NULL when its object does not
	 * define the name (the wrapper then builds it from the others). */
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	void *(*memalign)(size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	size_t (*usable_size)(void *);
	void (*free_sized)(void *, size_t);
	void (*free_aligned_sized)(void *, size_t, size_t);
	/* jemalloc's extended interface (flags: MALLOCX_LG_ALIGN, _ZERO, ...) */
	void *(*mallocx)(size_t, int);
	void *(*rallocx)(void *, size_t, int);
	size_t (*xallocx)(void *, size_t, size_t, int);
	size_t (*sallocx)(const void *, int);
	void (*dallocx)(void *, int);
	void (*sdallocx)(void *, size_t, int);
	size_t (*nallocx)(size_t, int);
	/* Statistics: no block crosses them, so these are simply the next
	 * definitions (glibc's when the allocator has none, as the program
	 * would get them natively). */
	struct mallinfo (*mallinfo)(void);
	struct mallinfo2 (*mallinfo2)(void);
	void (*malloc_stats)(void);
	int (*malloc_info)(int, FILE *);
};

/* The table, looked up on the first call (from any thread, lock-free: a
 * lock held across dlsym could deadlock against the loader's lock). */
const struct malloc_next *malloc_next(void);

/* True while this thread looks the table up: its allocations must come from
 * the boot arena. */
bool malloc_next_resolving(void);

/* Blocks of the size and alignment (a power of two; 0 or up to 16: 16) from
 * the next allocator, with whichever of its aligned entry points it has;
 * NULL + ENOMEM when it has none. */
void *malloc_next_aligned(size_t align, size_t n);

/* The boot arena: align as above, zero-filled, NULL + ENOMEM when full. */
void *malloc_boot_alloc(size_t align, size_t n);
bool malloc_boot_contains(const void *p);
size_t malloc_boot_size(const void *p);

/* malloc.c's choice for an allocation made now by the caller of the wrapper
 * (PMTHREADS_HEAP=malloc, heap ready, not one of the cases that stay in
 * the next allocator). */
bool malloc_from_heap(void);

#endif
