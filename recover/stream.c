/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stream -- reading a whole pool in bounded memory, and saying how far it
 * got.
 *
 * The tool reads the pool through its mapping.  Every page of it that was
 * read stays mapped into the tool, and counts in its resident size, until
 * the mapping goes: reading a pool with 2 GiB in use made a 2 GiB process,
 * killed under a memory limit before it printed anything.  So the commands
 * that read every page give each stretch back once read (tool_release).
 * They must not give back what only the mapping holds: a pool of format 6
 * is mapped private and its log replayed into the mapping, and the pages
 * the replay wrote are the process's own copies, which differ from the
 * file.  /proc/self/pagemap tells the two apart (a page still the file's
 * is a "file page"); only those are dropped, the kernel maps them from the
 * file again should they be read once more.
 *
 * The progress line goes to standard error, and only when that is a
 * terminal: a script reading the output, or a test, never sees it.
 */
#include "tool.h"

#include "prim/prim.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PM_PRESENT (1ULL << 63)
#define PM_FILE (1ULL << 61)	/* a file page or shared anonymous: not our own copy */
#define PAGEMAP_BATCH 512
#define MAP_WINDOW (2u << 20)

static int pagemap_fd = -2;	/* -2 not yet opened; -1 unavailable */

void tool_release(const void *addr, size_t len)
{
	if (pagemap_fd == -2)
		pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pagemap_fd < 0 || len == 0)
		return;	/* no way to tell the copies: keep everything */
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)addr & ~(uintptr_t)(ps - 1);
	uintptr_t end = ((uintptr_t)addr + len + ps - 1) & ~(uintptr_t)(ps - 1);
	uint64_t e[PAGEMAP_BATCH];
	for (uintptr_t a = start; a < end;) {
		size_t n = (end - a) / ps;
		if (n > PAGEMAP_BATCH)
			n = PAGEMAP_BATCH;
		ssize_t got = pread(pagemap_fd, e, n * sizeof(e[0]), (off_t)(a / ps * sizeof(e[0])));
		if (got <= 0)
			return;
		n = (size_t)got / sizeof(e[0]);
		/* Runs of the file's pages, dropped in one call each. */
		size_t i = 0;
		while (i < n) {
			if ((e[i] & (PM_PRESENT | PM_FILE)) != (PM_PRESENT | PM_FILE)) {
				i++;
				continue;
			}
			size_t j = i;
			while (j < n && (e[j] & (PM_PRESENT | PM_FILE)) == (PM_PRESENT | PM_FILE))
				j++;
			(void)madvise((void *)(a + i * ps), (j - i) * ps, MADV_DONTNEED);
			i = j;
		}
		a += n * ps;
	}
}

void tool_release_pages(const struct pool *p, uint64_t first, uint64_t end)
{
	if (end > p->npages)
		end = p->npages;
	if (first >= end)
		return;
	/* Reading a page maps its neighbours too: fault-around, and a
	 * large folio of the page cache (readahead makes them, up to 2 MiB)
	 * mapped whole.  Released only page by page, they stayed: 118 MiB
	 * of them after check had filled its image.  So the range grows to
	 * whole 2 MiB windows, within the pages' copies. */
	uintptr_t data_lo = (uintptr_t)p->data;
	uintptr_t data_hi = (uintptr_t)p->data + 2 * p->npages * p->page_size;
	/* Each copy's range: a plane each, or both side by side (format 6). */
	for (int c = 0; c < (p->copy_step == p->page_size ? 1 : 2); c++) {
		uintptr_t lo = (uintptr_t)pool_copy(p, first, c), hi = (uintptr_t)pool_copy(p, end, c);
		lo = lo & ~(uintptr_t)(MAP_WINDOW - 1);
		hi = (hi + MAP_WINDOW - 1) & ~(uintptr_t)(MAP_WINDOW - 1);
		lo = lo < data_lo ? data_lo : lo;
		hi = hi > data_hi ? data_hi : hi;
		tool_release((const void *)lo, hi - lo);
	}
	/* And their entries of the seq and sum tables: 32 bytes a page, 512
	 * MiB for a TiB in use. */
	size_t entries = (size_t)(end - first) * sizeof(p->seq[0]);
	if (first < p->seq_pages) {
		tool_release(&p->seq[first], entries);
		if (p->sum != NULL)
			tool_release(&p->sum[first], entries);
	}
}

/* ---- progress ----------------------------------------------------------- */

#define PROGRESS_EVERY_NS 200000000ULL

void progress_start(struct progress *pr, const char *what, uint64_t total)
{
	memset(pr, 0, sizeof(*pr));
	pr->on = isatty(STDERR_FILENO) == 1;
	pr->what = what;
	pr->total = total;
	pr->last_ns = prim_now_ns();
}

void progress_step(struct progress *pr, uint64_t done)
{
	if (!pr->on)
		return;
	uint64_t now = prim_now_ns();
	if (now - pr->last_ns < PROGRESS_EVERY_NS)
		return;
	pr->last_ns = now;
	pr->shown = true;
	unsigned pct = pr->total ? (unsigned)(100 * done / pr->total) : 100;
	fprintf(stderr, "\r%s: %3u %% (%llu of %llu)\033[K", pr->what, pct,
		(unsigned long long)done, (unsigned long long)pr->total);
	fflush(stderr);
}

void progress_end(struct progress *pr)
{
	if (pr->shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	pr->shown = false;
}
