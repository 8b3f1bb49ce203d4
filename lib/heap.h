/*
 * heap -- the persistent allocator.
 *
 * Owns: allocation inside the shadow range.  All of its metadata (size-class
 * spans, free lists, per-thread cache slots, the name table) lives inside the
 * persistent heap, so an epoch captures it consistently with the user data;
 * every operation runs as a failure-atomic section (fase_enter/fase_leave),
 * so a quiescent point never falls in the middle of one.  Size classes with
 * per-thread caches for small objects; page-aligned page runs for large ones.
 * The runtime's own locks are prim_lock, never pthread.
 */
#ifndef PMT_HEAP_H
#define PMT_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Format a new heap over [base, base+len) (zero-filled memory), or adopt the
 * recovered one found there (fresh == false): validates it, and returns
 * blocks left in dead threads' caches to the shared lists.  Returns 0 or -1
 * with err_get() set (e.g. the range does not hold a heap). */
int heap_init(void *base, size_t len, bool fresh);
bool heap_ready(void);

/* true when p lies in the heap range (whether or not it is allocated). */
bool heap_contains(const void *p);

void *heap_malloc(size_t size);			/* NULL + ENOMEM when full */
void *heap_calloc(size_t n, size_t size);	/* overflow: NULL + ENOMEM */
void *heap_realloc(void *p, size_t size);
void *heap_memalign(size_t align, size_t size);	/* align: power of two */
void heap_free(void *p);
size_t heap_usable_size(const void *p);

/* The name table (names up to PMTHREADS_NAME_MAX - 1 bytes). */
int heap_name_set(const char *name, void *p);	/* 0, or -1 + errno */
void *heap_name_get(const char *name, size_t *usable);
void heap_name_remove_ptr(void *p);
/* Iterate names (for pmthreads-recover info): calls fn for each. */
void heap_name_foreach(void (*fn)(const char *name, void *p, size_t size, void *arg),
		       void *arg);

/* The calling thread is exiting: return its cached blocks. */
void heap_thread_exit(void);

struct heap_stats {
	uint64_t bytes_in_use;
	uint64_t bytes_mapped;	/* high-water mark of pages handed out */
	uint64_t capacity;
};
void heap_get_stats(struct heap_stats *st);

#endif
