/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * allocmix -- a program linked against jemalloc that hands every block to
 * every entry point of the malloc family that takes one (test_allocmix.cpp
 * runs it under the preload in both heap modes).
 *
 * Each allocating entry point (C's, glibc's, jemalloc's mallocx) makes
 * blocks of a few sizes; each block is filled, then given to one consumer
 * -- free, realloc up and down, reallocarray, malloc_usable_size, C23's
 * sized frees where something defines them, jemalloc's sallocx, xallocx,
 * rallocx, dallocx, sdallocx -- which must keep its bytes and size it
 * consistently.  A block that reaches another allocator's function crashes
 * the process or fails a check.
 *
 * Prints, per allocating entry point, which allocator served it: "jemalloc"
 * when jemalloc's own count of this thread's allocated bytes grew by the
 * block's size, else "other".  At exit it keeps one block of KEEP_BYTES
 * from each allocating entry point (the test reads the persistent heap's
 * bytes in use from the statistics).
 *
 *   allocmix [native]   native: only the entry points jemalloc defines
 *                       (glibc's pvalloc and reallocarray mix allocators
 *                       when jemalloc serves free; without the preload that
 *                       crashes)
 * Exit 0, or 1 naming the first failed check.
 */
#include <jemalloc/jemalloc.h>

#include <stdbool.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* C23's sized frees: neither Debian 12's glibc nor its jemalloc defines
 * them; the preload does. */
extern void free_sized(void *, size_t) __attribute__((weak));
extern void free_aligned_sized(void *, size_t, size_t) __attribute__((weak));

#define KEEP_BYTES ((size_t)256 << 10)

static const char *step = "start";

static void fail(const char *what)
{
	printf("FAIL: %s: %s\n", step, what);
	exit(1);
}

#define CHECK(cond)                 \
	do {                        \
		if (!(cond))        \
			fail(#cond); \
	} while (0)

static uint64_t je_allocated(void)
{
	uint64_t v = 0;
	size_t len = sizeof(v);
	if (mallctl("thread.allocated", &v, &len, NULL, 0) != 0)
		fail("mallctl thread.allocated");
	return v;
}

enum alloc_kind {
	A_MALLOC, A_CALLOC, A_REALLOC, A_REALLOCARRAY, A_MEMALIGN, A_POSIX_MEMALIGN,
	A_ALIGNED_ALLOC, A_VALLOC, A_PVALLOC, A_MALLOCX, A_MALLOCX_ALIGN_ZERO, A_NKINDS
};
static const char *const alloc_name[A_NKINDS] = {
	"malloc", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign",
	"aligned_alloc", "valloc", "pvalloc", "mallocx", "mallocx(align, zero)"
};
/* the alignment each promises beyond malloc's */
static size_t alloc_align(enum alloc_kind k)
{
	switch (k) {
	case A_MEMALIGN: case A_POSIX_MEMALIGN: case A_ALIGNED_ALLOC: case A_MALLOCX_ALIGN_ZERO:
		return 256;
	case A_VALLOC: case A_PVALLOC:
		return (size_t)getpagesize();
	default:
		return 16;
	}
}

static bool native_has(enum alloc_kind k)
{
	return k != A_PVALLOC && k != A_REALLOCARRAY;
}

static void *alloc(enum alloc_kind k, size_t n)
{
	void *p = NULL;
	switch (k) {
	case A_MALLOC: p = malloc(n); break;
	case A_CALLOC: p = calloc(1, n); break;
	case A_REALLOC: p = realloc(NULL, n); break;
	case A_REALLOCARRAY: p = reallocarray(NULL, n, 1); break;
	case A_MEMALIGN: p = memalign(256, n); break;
	case A_POSIX_MEMALIGN: if (posix_memalign(&p, 256, n) != 0) p = NULL; break;
	case A_ALIGNED_ALLOC: p = aligned_alloc(256, (n + 255) & ~(size_t)255); break;
	case A_VALLOC: p = valloc(n); break;
	case A_PVALLOC: p = pvalloc(n); break;
	case A_MALLOCX: p = mallocx(n, 0); break;
	case A_MALLOCX_ALIGN_ZERO: p = mallocx(n, MALLOCX_ALIGN(256) | MALLOCX_ZERO); break;
	default: break;
	}
	CHECK(p != NULL);
	CHECK(((uintptr_t)p & (alloc_align(k) - 1)) == 0);
	if (k == A_CALLOC || k == A_MALLOCX_ALIGN_ZERO)
		for (size_t i = 0; i < n; i++)
			CHECK(((unsigned char *)p)[i] == 0);
	return p;
}

static void fill(void *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		((unsigned char *)p)[i] = (unsigned char)(i * 31 + seed);
}

static void same(const void *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (((const unsigned char *)p)[i] != (unsigned char)(i * 31 + seed))
			fail("contents changed");
}

enum use_kind {
	U_FREE, U_REALLOC_UP, U_REALLOC_DOWN, U_REALLOCARRAY, U_USABLE, U_FREE_SIZED,
	U_FREE_ALIGNED_SIZED, U_SALLOCX, U_XALLOCX, U_RALLOCX, U_RALLOCX_ALIGN_ZERO, U_DALLOCX,
	U_SDALLOCX, U_NUSES
};
static const char *const use_name[U_NUSES] = {
	"free", "realloc up", "realloc down", "reallocarray", "malloc_usable_size", "free_sized",
	"free_aligned_sized", "sallocx", "xallocx", "rallocx", "rallocx(align, zero)", "dallocx",
	"sdallocx"
};

/* p (n bytes filled with seed, from kind k) given to use u, then freed. */
static void use(enum use_kind u, void *p, size_t n, unsigned seed, enum alloc_kind k)
{
	size_t usable = malloc_usable_size(p);
	CHECK(usable >= n);
	CHECK(sallocx(p, 0) == usable);
	switch (u) {
	case U_FREE:
		free(p);
		return;
	case U_REALLOC_UP:
		p = realloc(p, 3 * n + 5000);
		CHECK(p != NULL);
		same(p, n, seed);
		CHECK(malloc_usable_size(p) >= 3 * n + 5000);
		break;
	case U_REALLOC_DOWN:
		p = realloc(p, n / 2 + 1);
		CHECK(p != NULL);
		same(p, n / 2 + 1, seed);
		break;
	case U_REALLOCARRAY:
		p = reallocarray(p, 2, n);
		CHECK(p != NULL);
		same(p, n, seed);
		break;
	case U_USABLE:
		/* the whole usable size belongs to the block */
		memset(p, 0xa5, usable);
		CHECK(malloc_usable_size(p) == usable);
		break;
	case U_FREE_SIZED:
		if (free_sized == NULL)
			break;
		free_sized(p, n);
		return;
	case U_FREE_ALIGNED_SIZED:
		if (free_aligned_sized == NULL)
			break;
		free_aligned_sized(p, alloc_align(k), n);
		return;
	case U_SALLOCX:
		CHECK(sallocx(p, 0) >= n);
		break;
	case U_XALLOCX: {
		size_t now = xallocx(p, n, 0, 0);
		CHECK(now >= n);
		CHECK(malloc_usable_size(p) == now);
		same(p, n, seed);
		break;
	}
	case U_RALLOCX:
		p = rallocx(p, 2 * n + 100, 0);
		CHECK(p != NULL);
		same(p, n, seed);
		CHECK(sallocx(p, 0) >= 2 * n + 100);
		break;
	case U_RALLOCX_ALIGN_ZERO: {
		size_t big = 4 * n + 8192;
		p = rallocx(p, big, MALLOCX_ALIGN(4096) | MALLOCX_ZERO);
		CHECK(p != NULL);
		CHECK(((uintptr_t)p & 4095) == 0);
		same(p, n, seed);
		/* bytes beyond the old usable size are new, and zero */
		for (size_t i = usable; i < big; i++)
			CHECK(((unsigned char *)p)[i] == 0);
		break;
	}
	case U_DALLOCX:
		dallocx(p, 0);
		return;
	case U_SDALLOCX:
		sdallocx(p, n, 0);
		return;
	default:
		break;
	}
	free(p);
}

int main(int argc, char **argv)
{
	bool native = argc > 1 && strcmp(argv[1], "native") == 0;
	static const size_t sizes[] = { 24, 3000, 100000 };
	unsigned seed = 1;
	for (int k = 0; k < A_NKINDS; k++) {
		if (native && !native_has((enum alloc_kind)k))
			continue;
		/* which allocator serves it: one fresh block of a size every
		 * allocator counts exactly (a page multiple) */
		uint64_t before = je_allocated();
		step = alloc_name[k];
		void *probe = alloc((enum alloc_kind)k, 65536);
		uint64_t grew = je_allocated() - before;
		printf("%s: %s\n", alloc_name[k], grew >= 65536 ? "jemalloc" : "other");
		free(probe);
		for (int u = 0; u < U_NUSES; u++) {
			for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
				char what[96];
				snprintf(what, sizeof(what), "%s %zu bytes, then %s", alloc_name[k],
					 sizes[s], use_name[u]);
				step = what;
				void *p = alloc((enum alloc_kind)k, sizes[s]);
				fill(p, sizes[s], ++seed);
				use((enum use_kind)u, p, sizes[s], seed, (enum alloc_kind)k);
			}
		}
	}
	/* The statistics and tuning calls take no block; each must answer. */
	step = "statistics";
	struct mallinfo2 m2 = mallinfo2();
	(void)m2;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	struct mallinfo m = mallinfo();
#pragma GCC diagnostic pop
	(void)m;
	CHECK(mallopt(M_TRIM_THRESHOLD, 1 << 20) == 1);
	(void)malloc_trim(0);
	malloc_stats();
	FILE *devnull = fopen("/dev/null", "w");
	CHECK(devnull != NULL);
	CHECK(malloc_info(0, devnull) == 0);
	fclose(devnull);
	CHECK(nallocx(3000, 0) >= 3000);
	CHECK(nallocx(100, MALLOCX_ALIGN(4096)) >= 100);
	/* A block mallocx serves, sized as nallocx said. */
	void *p = mallocx(3000, 0);
	CHECK(p != NULL && sallocx(p, 0) == nallocx(3000, 0));
	dallocx(p, 0);
	/* Kept to the end: the test finds them in the persistent heap in
	 * malloc mode. */
	step = "kept blocks";
	for (int k = 0; k < A_NKINDS; k++) {
		if (native && !native_has((enum alloc_kind)k))
			continue;
		void *keep = alloc((enum alloc_kind)k, KEEP_BYTES);
		memset(keep, k, KEEP_BYTES);
	}
	printf("ok\n");
	return 0;
}
