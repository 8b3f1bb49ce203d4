/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * malloc_next -- the allocator the program has without us (malloc_next.h).
 *
 * The wrappers used to call glibc's __libc_* entry points, which need no
 * dlsym.  A program linked against jemalloc then got glibc's blocks from
 * our malloc and handed them to jemalloc's malloc_usable_size, which we did
 * not wrap the same way (redis-server died at start-up).  Now every
 * wrapper forwards to the definition the program would have reached: the
 * next one in lookup order, from the object that defines the next malloc.
 */
#include "malloc_next.h"

#include "runtime/interpose.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static struct malloc_next next_table;
enum { NEXT_NONE, NEXT_WRITING, NEXT_READY };
static atomic_int next_state;
static __thread bool resolving __attribute__((tls_model("initial-exec")));

bool malloc_next_resolving(void) { return resolving; }

/* name's next definition, when base (the next malloc's object) defines it
 * (base NULL: wherever it is). */
static void *next_sym(const char *name, const void *base)
{
	void *f = dlsym(RTLD_NEXT, name);
	if (f == NULL || base == NULL)
		return f;
	Dl_info info;
	if (dladdr(f, &info) == 0 || info.dli_fbase != base)
		return NULL;
	return f;
}

static __attribute__((noinline)) const struct malloc_next *resolve(void)
{
	struct malloc_next t;
	memset(&t, 0, sizeof(t));
	resolving = true;
	t.malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	Dl_info info;
	memset(&info, 0, sizeof(info));
	const void *base = NULL;
	if (t.malloc != NULL && dladdr((void *)t.malloc, &info) != 0)
		base = info.dli_fbase;
	if (t.malloc == NULL || base == NULL) {
		/* libpmthreads is last in lookup order (linked, not
		 * preloaded, by a program with no allocator after it):
		 * glibc's own entry points. */
		t.malloc = __libc_malloc;
		t.calloc = __libc_calloc;
		t.realloc = __libc_realloc;
		t.free = __libc_free;
		t.memalign = __libc_memalign;
	} else {
#define NEXT_FN(field, name) *(void **)&t.field = next_sym(name, base)
		NEXT_FN(calloc, "calloc");
		NEXT_FN(realloc, "realloc");
		NEXT_FN(free, "free");
		NEXT_FN(memalign, "memalign");
		NEXT_FN(posix_memalign, "posix_memalign");
		NEXT_FN(aligned_alloc, "aligned_alloc");
		NEXT_FN(usable_size, "malloc_usable_size");
		NEXT_FN(free_sized, "free_sized");
		NEXT_FN(free_aligned_sized, "free_aligned_sized");
		NEXT_FN(mallocx, "mallocx");
		NEXT_FN(rallocx, "rallocx");
		NEXT_FN(xallocx, "xallocx");
		NEXT_FN(sallocx, "sallocx");
		NEXT_FN(dallocx, "dallocx");
		NEXT_FN(sdallocx, "sdallocx");
		NEXT_FN(nallocx, "nallocx");
	}
	base = NULL;
	NEXT_FN(mallinfo, "mallinfo");
	NEXT_FN(mallinfo2, "mallinfo2");
	NEXT_FN(malloc_stats, "malloc_stats");
	NEXT_FN(malloc_info, "malloc_info");
#undef NEXT_FN
	resolving = false;
	if (t.calloc == NULL || t.realloc == NULL || t.free == NULL)
		runtime_fatal("the allocator that defines malloc (%s) lacks calloc, realloc or free",
			      info.dli_fname != NULL ? info.dli_fname : "?");
	int none = NEXT_NONE;
	if (atomic_compare_exchange_strong(&next_state, &none, NEXT_WRITING)) {
		next_table = t;
		atomic_store_explicit(&next_state, NEXT_READY, memory_order_release);
	} else {
		/* another thread found the same; it is copying it */
		while (atomic_load_explicit(&next_state, memory_order_acquire) != NEXT_READY)
			runtime_cpu_relax();
	}
	return &next_table;
}

const struct malloc_next *malloc_next(void)
{
	if (__builtin_expect(atomic_load_explicit(&next_state, memory_order_acquire) == NEXT_READY,
			     1))
		return &next_table;
	return resolve();
}

void *malloc_next_aligned(size_t align, size_t n)
{
	const struct malloc_next *a = malloc_next();
	if (align <= 16)
		return a->malloc(n);
	if (a->memalign != NULL)
		return a->memalign(align, n);
	if (a->posix_memalign != NULL) {
		void *p;
		int saved = errno;
		int e = a->posix_memalign(&p, align, n);
		if (e != 0) {
			errno = e;
			return NULL;
		}
		errno = saved;
		return p;
	}
	if (a->aligned_alloc != NULL)
		return a->aligned_alloc(align, (n + align - 1) & ~(align - 1));
	errno = ENOMEM;
	return NULL;
}

/* dlsym asks for little (an error string, a TLS block): 64 KiB is plenty. */
#define BOOT_BYTES ((size_t)64 << 10)
#define BOOT_HEADER 16
static _Alignas(64) unsigned char boot_arena[BOOT_BYTES];
static atomic_size_t boot_used;

void *malloc_boot_alloc(size_t align, size_t n)
{
	if (align < 16)
		align = 16;
	size_t start = atomic_load_explicit(&boot_used, memory_order_relaxed);
	for (;;) {
		uintptr_t base = (uintptr_t)boot_arena;
		uintptr_t p = (base + start + BOOT_HEADER + align - 1) & ~(uintptr_t)(align - 1);
		size_t end = p - base + n;
		if (p - base > BOOT_BYTES || n > BOOT_BYTES - (p - base)) {
			errno = ENOMEM;
			return NULL;
		}
		if (atomic_compare_exchange_weak(&boot_used, &start, end)) {
			memcpy((void *)(p - sizeof(size_t)), &n, sizeof(n));
			return (void *)p;
		}
	}
}

bool malloc_boot_contains(const void *p)
{
	return (uintptr_t)p - (uintptr_t)boot_arena < BOOT_BYTES;
}

size_t malloc_boot_size(const void *p)
{
	size_t n;
	memcpy(&n, (const char *)p - sizeof(size_t), sizeof(n));
	return n;
}
