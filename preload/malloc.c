/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * malloc -- the C allocator, served from the persistent heap in malloc mode.
 *
 * With PMTHREADS_HEAP=malloc every allocation comes from heap_malloc once the
 * heap is ready.  Otherwise (nvmalloc mode, before the runtime is up, while
 * runtime_init runs on this thread -- libpmem and dlsym allocate then -- or
 * when it failed) it comes from the allocator the program has without us
 * (malloc_next.h: glibc's, or jemalloc's in a program linked with it), and
 * so does every other entry point: a block is never handed to another
 * allocator's function.  Calls that take a block decide by address: inside
 * the heap range it is the heap's, in the boot arena the arena's (never
 * freed), anything else the next allocator's.  A realloc of such a block in
 * malloc mode moves it into the heap.
 */
#include "base/export.h"
#include "malloc_next.h"
#include "preload.h"
#include "runtime/interpose.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

bool preload_malloc_mode;

static __thread unsigned libc_alloc_depth __attribute__((tls_model("initial-exec")));

void preload_libc_alloc_begin(void) { libc_alloc_depth++; }
void preload_libc_alloc_end(void) { libc_alloc_depth--; }

/* glibc starts threads of its own without pthread_create: the SIGEV_THREAD
 * timer helper runs with every signal blocked and mallocs for each
 * expiration.  Under the mprotect tracker an allocation writes heap pages
 * that may be read-only, and a write fault with SIGSEGV blocked ends the
 * process (the kernel cannot deliver it).  Such a thread allocates from
 * the next allocator while it blocks SIGSEGV (its blocks are runtime bookkeeping, not
 * program state); the timer's callback threads unblock everything before
 * the program's function runs, and allocate from the heap.  One system
 * call per allocation, in those threads only. */
static bool segv_deliverable(void)
{
	if (__builtin_expect(preload_known_thread, 1))
		return true;
	sigset_t cur;
	return pthread_sigmask(SIG_BLOCK, NULL, &cur) != 0 || !sigismember(&cur, SIGSEGV);
}

/* The runtime's own code (its threads, its handlers: quiesce_in_runtime)
 * allocates from the next allocator too: a heap operation is a FASE of the
 * program's state, and libunwind's allocations in the FASE checker's report
 * would otherwise run one inside a fault handler while an epoch collects. */
static inline bool from_heap(void)
{
	return __builtin_expect(preload_malloc_mode, 0) && heap_ready() && !runtime_in_init() &&
	       libc_alloc_depth == 0 && !quiesce_in_runtime() && segv_deliverable();
}

/* Two kinds of malloc call stay outside the heap (in the next allocator),
 * told apart by the caller's address (free() tells their blocks apart by
 * address as always):
 *
 * stdio buffers.  glibc allocates a stream's buffer with malloc in
 * _IO_file_doallocate and fills it with its own internal read(2), which no
 * wrapper of ours sees.  With the mprotect tracker a clean heap page is
 * read-only, so that read failed with EFAULT: every stdio read of a fresh
 * stream saw an error or EOF -- e.g. getpwnam() found no user (memcached -u
 * root: "can't find the user root").  [stdio_lo, stdio_lo + stdio_len) is
 * that function's code.
 *
 * The dynamic loader's: thread descriptors' DTVs and dynamic TLS blocks.  A
 * detached thread frees its own stack in start_thread after glibc has
 * blocked all its signals, and that frees the DTVs of cached stacks beyond
 * the cache limit (_dl_deallocate_tls).  Freeing a heap block writes heap
 * metadata; with the mprotect tracker the page may be read-only, and a
 * write fault with SIGSEGV blocked kills the process.  Neither is program
 * state (a thread's TLS is meaningless after a restart, like its stack).
 * [ldso_lo, ldso_hi) spans ld.so's executable segments.
 *
 * Both found once by preload_malloc_init (left empty if they cannot be). */
static uintptr_t stdio_lo, stdio_len;
static uintptr_t ldso_lo, ldso_hi;

static int find_ldso(struct dl_phdr_info *info, size_t size, void *base)
{
	(void)size;
	if (info->dlpi_addr != (ElfW(Addr))base)
		return 0;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph->p_memsz > hi)
			hi = a + ph->p_memsz;
	}
	if (lo < hi) {
		ldso_lo = lo;
		ldso_hi = hi;
	}
	return 1;
}

void preload_malloc_init(void)
{
	unsigned long base = getauxval(AT_BASE);
	if (base != 0)
		dl_iterate_phdr(find_ldso, (void *)base);
	void *f = dlsym(RTLD_NEXT, "_IO_file_doallocate");
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	if (f == NULL || dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL)
		return;
	stdio_lo = (uintptr_t)f;
	stdio_len = sym->st_size;
}

bool malloc_from_heap(void) { return from_heap(); }

static inline bool glibc_caller(const void *caller)
{
	uintptr_t c = (uintptr_t)caller;
	return __builtin_expect(c - stdio_lo < stdio_len || (c >= ldso_lo && c < ldso_hi), 0);
}

/* An allocation that does not go to the heap: the boot arena's while the
 * next allocator is being looked up on this thread, else the next one's. */
static void *next_malloc(size_t n)
{
	if (__builtin_expect(malloc_next_resolving(), 0))
		return malloc_boot_alloc(16, n);
	return malloc_next()->malloc(n);
}

static void *next_aligned(size_t align, size_t n)
{
	if (__builtin_expect(malloc_next_resolving(), 0))
		return malloc_boot_alloc(align, n);
	return malloc_next_aligned(align, n);
}

PMT_EXPORT void *malloc(size_t n)
{
	if (from_heap() && !glibc_caller(__builtin_return_address(0)))
		return heap_malloc(n);
	return next_malloc(n);
}

PMT_EXPORT void *calloc(size_t n, size_t size)
{
	if (from_heap() && !glibc_caller(__builtin_return_address(0)))
		return heap_calloc(n, size);
	if (__builtin_expect(malloc_next_resolving(), 0)) {
		size_t bytes;
		if (__builtin_mul_overflow(n, size, &bytes)) {
			errno = ENOMEM;
			return NULL;
		}
		return malloc_boot_alloc(16, bytes);
	}
	return malloc_next()->calloc(n, size);
}

/* A block given back (freed, or moved by realloc) is no longer a stack the
 * kernel writes (kernel_stacks.h). */
static inline void stack_memory_released(void *p)
{
	if (__builtin_expect(atomic_load_explicit(&kernel_stacks_in_use, memory_order_relaxed) != 0,
			     0))
		kernel_stack_freed(p, heap_usable_size(p));
}

PMT_EXPORT void free(void *p)
{
	if (p == NULL)
		return;
	if (heap_contains(p)) {
		stack_memory_released(p);
		heap_free(p);
	} else if (!malloc_boot_contains(p)) {
		malloc_next()->free(p);
	}
}

/* The usable size of a block outside the heap. */
static size_t next_usable_size(void *p)
{
	if (malloc_boot_contains(p))
		return malloc_boot_size(p);
	size_t (*usable)(void *) = malloc_next()->usable_size;
	return usable != NULL ? usable(p) : 0;
}

/* Old (a block outside the heap, not NULL) moved into dst, a new block of
 * n bytes (NULL: the allocation failed, old stays); old is freed. */
static void *moved(void *old, void *dst, size_t n)
{
	if (dst == NULL)
		return NULL;
	size_t have = next_usable_size(old);
	memcpy(dst, old, have < n ? have : n);
	free(old);
	return dst;
}

PMT_EXPORT void *realloc(void *p, size_t n)
{
	if (heap_contains(p)) {
		stack_memory_released(p);
		return heap_realloc(p, n);
	}
	bool heap = from_heap() && !glibc_caller(__builtin_return_address(0));
	if (p != NULL && malloc_boot_contains(p)) {
		if (n == 0)
			return NULL;
		return moved(p, heap ? heap_malloc(n) : next_malloc(n), n);
	}
	if (!heap)
		return p == NULL ? next_malloc(n) : malloc_next()->realloc(p, n);
	if (p == NULL)
		return heap_malloc(n);
	if (n == 0) {
		malloc_next()->free(p);
		return NULL;
	}
	return moved(p, heap_malloc(n), n);
}

PMT_EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, size, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, bytes);
}

static void *aligned(size_t align, size_t n)
{
	return from_heap() ? heap_memalign(align, n) : next_aligned(align, n);
}

PMT_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	if (align < sizeof(void *) || (align & (align - 1)) != 0)
		return EINVAL;
	int saved = errno;
	void *p = aligned(align, n);
	if (p == NULL)
		return ENOMEM;
	errno = saved;
	*out = p;
	return 0;
}

PMT_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (align == 0 || (align & (align - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	return aligned(align, n);
}

PMT_EXPORT void *memalign(size_t align, size_t n)
{
	/* glibc rounds a non-power-of-two alignment up; so do we. */
	if (align & (align - 1)) {
		size_t a = 1;
		while (a < align)
			a <<= 1;
		align = a;
	}
	return aligned(align == 0 ? 1 : align, n);
}

PMT_EXPORT void *valloc(size_t n)
{
	return aligned((size_t)getpagesize(), n);
}

PMT_EXPORT void *pvalloc(size_t n)
{
	size_t page = (size_t)getpagesize();
	size_t rounded;
	if (__builtin_add_overflow(n, page - 1, &rounded)) {
		errno = ENOMEM;
		return NULL;
	}
	rounded &= ~(page - 1);
	return aligned(page, rounded == 0 ? page : rounded);
}

PMT_EXPORT size_t malloc_usable_size(void *p)
{
	if (p == NULL)
		return 0;
	if (heap_contains(p))
		return heap_usable_size(p);
	return next_usable_size(p);
}

/* C23's sized frees: the size is a hint the heap does not need. */
PMT_EXPORT void free_sized(void *p, size_t size)
{
	const struct malloc_next *a;
	if (p == NULL || heap_contains(p) || malloc_boot_contains(p) ||
	    (a = malloc_next())->free_sized == NULL)
		free(p);
	else
		a->free_sized(p, size);
}

PMT_EXPORT void free_aligned_sized(void *p, size_t align, size_t size)
{
	const struct malloc_next *a;
	if (p == NULL || heap_contains(p) || malloc_boot_contains(p) ||
	    (a = malloc_next())->free_aligned_sized == NULL)
		free(p);
	else
		a->free_aligned_sized(p, align, size);
}
