/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * image -- the pool's consistent heap image in the tool's own memory, so it
 * can be examined (the heap's name table, its structures).
 *
 * The image used to be copied whole before anything was printed: a pool
 * with 2 GiB in use took 2 GiB of memory and half a minute, though the heap
 * module reads little more than its metadata.  Now the image is reserved
 * inaccessible and filled on demand: the first access to a block of
 * IMAGE_BLOCK_PAGES pages faults, and the SIGSEGV handler copies the
 * block's consistent page copies from the pool and makes it readable.  A
 * block only read can be given back and read again later; the first write
 * to one (heap adoption moves blocks between lists) makes it writable and
 * keeps it.  So the memory held is what the heap module looked at, at most
 * IMAGE_CLEAN_MAX bytes of it read-only, plus what it changed.
 *
 * The copy goes at the recorded shadow base when that range is free, where
 * pointers the program stored in its heap point into the copy.  The tool is
 * single-threaded while an image exists; the handler passes faults outside
 * the image to the disposition it replaced.
 */
#include "tool.h"

#include "prim/prim.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

enum block_state { BLOCK_ABSENT = 0, BLOCK_READ = 1, BLOCK_WRITTEN = 2 };

/* The image the handler fills (one at a time) and the disposition it
 * replaced. */
static struct image *filling;
static struct sigaction replaced;

int64_t image_last_used_page(const struct pool *p)
{
	for (uint64_t i = p->seq_pages; i > 0; i--)
		if (pool_valid_copy(p, i - 1) >= 0)
			return (int64_t)(i - 1);
	return -1;
}

static unsigned char *block_addr(const struct image *img, size_t b)
{
	return img->base + b * img->block_bytes;
}

static size_t block_len(const struct image *img, size_t b)
{
	size_t off = b * img->block_bytes;
	return img->len - off < img->block_bytes ? img->len - off : img->block_bytes;
}

/* Give back the oldest read-only block when the ring is full.  A block
 * written since it was filled is no longer in the ring's charge. */
static void make_room(struct image *img)
{
	while (img->ring_n == img->ring_cap) {
		size_t b = img->ring[img->ring_head];
		img->ring_head = (img->ring_head + 1) % img->ring_cap;
		img->ring_n--;
		if (img->state[b] != BLOCK_READ)
			continue;
		(void)madvise(block_addr(img, b), block_len(img, b), MADV_DONTNEED);
		(void)mprotect(block_addr(img, b), block_len(img, b), PROT_NONE);
		img->state[b] = BLOCK_ABSENT;
	}
}

static void fill_block(struct image *img, size_t b, bool write)
{
	unsigned char *a = block_addr(img, b);
	size_t len = block_len(img, b);
	const struct pool *p = img->pool;
	(void)mprotect(a, len, PROT_READ | PROT_WRITE);
	uint64_t first = (uint64_t)(a - img->base) / p->page_size;
	uint64_t end = first + len / p->page_size;
	for (uint64_t i = first; i < end && i < p->seq_pages; i++) {
		int c = pool_valid_copy(p, i);
		if (c < 0)
			continue;	/* zeros, as the fresh memory is */
		memcpy(img->base + i * p->page_size, pool_copy(p, i, c), p->page_size);
		img->pages_restored++;
	}
	/* The pool's pages just read are the file's: not worth keeping. */
	tool_release_pages(p, first, end);
	if (write) {
		img->state[b] = BLOCK_WRITTEN;
		return;
	}
	(void)mprotect(a, len, PROT_READ);
	make_room(img);
	img->state[b] = BLOCK_READ;
	img->ring[(img->ring_head + img->ring_n++) % img->ring_cap] = (uint32_t)b;
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	struct image *img = filling;
	uintptr_t a = (uintptr_t)si->si_addr;
	if (img != NULL && si->si_code > 0 && a >= (uintptr_t)img->base &&
	    a < (uintptr_t)img->base + img->len) {
		size_t b = (a - (uintptr_t)img->base) / img->block_bytes;
		/* UNKNOWN (a build that cannot decode the frame): taken as a
		 * write, so the block is kept, never given back changed. */
		bool write = prim_fault_access(si, uc) != PRIM_FAULT_READ;
		if (img->state[b] == BLOCK_ABSENT) {
			fill_block(img, b, write);
			return;
		}
		if (img->state[b] == BLOCK_READ) {
			(void)mprotect(block_addr(img, b), block_len(img, b),
				       PROT_READ | PROT_WRITE);
			img->state[b] = BLOCK_WRITTEN;
			return;
		}
	}
	/* Not the image's: the fault is raised again under the disposition
	 * this handler replaced (the default: the process dies as it would
	 * have). */
	(void)sig;
	sigaction(SIGSEGV, &replaced, NULL);
}

int image_load(const struct pool *p, struct image *img)
{
	memset(img, 0, sizeof(*img));
	img->pool = p;
	img->len = (size_t)(p->npages * p->page_size);
	img->block_bytes = IMAGE_BLOCK_PAGES * p->page_size;
	img->nblocks = (img->len + img->block_bytes - 1) / img->block_bytes;
	img->ring_cap = IMAGE_CLEAN_MAX / img->block_bytes;
	void *base = prim_map_fixed((void *)(uintptr_t)p->shadow_base, img->len);
	if (base == NULL)
		base = prim_map_any(img->len);
	/* One byte per block, touched only where the heap module looks. */
	img->state = prim_map_any(img->nblocks);
	img->ring = prim_map_any(img->ring_cap * sizeof(*img->ring));
	if (base == NULL || img->state == NULL || img->ring == NULL ||
	    mprotect(base, img->len, PROT_NONE) != 0) {
		tool_error("cannot reserve %zu bytes of address space for the heap image: %s "
			   "(raise the address-space limit, ulimit -v)",
			   img->len, strerror(errno));
		if (base != NULL)
			prim_unmap(base, img->len);
		img->base = NULL;
		image_free(img);
		return -1;
	}
	img->base = base;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	filling = img;
	sigaction(SIGSEGV, &sa, &replaced);
	return 0;
}

void image_free(struct image *img)
{
	if (filling == img) {
		sigaction(SIGSEGV, &replaced, NULL);
		filling = NULL;
	}
	if (img->base != NULL)
		prim_unmap(img->base, img->len);
	if (img->state != NULL)
		prim_unmap(img->state, img->nblocks);
	if (img->ring != NULL)
		prim_unmap(img->ring, img->ring_cap * sizeof(*img->ring));
	img->base = NULL;
	img->state = NULL;
	img->ring = NULL;
}
