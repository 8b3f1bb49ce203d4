/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm backends -- the constructors nvm.c dispatches to.  Private to the nvm
 * module (nvm*.c); everything else uses nvm.h.
 *
 * Each init takes a struct nvm whose base/len/fd are set (the file is
 * already mapped read-write and shared), sets ops and impl, and returns 0 or
 * -1 with err_get() set.  ops->unmap frees impl but does not munmap base.
 */
#ifndef PMT_NVM_BACKEND_H
#define PMT_NVM_BACKEND_H

#include "persist/nvm.h"

#include <errno.h>

int nvm_pmem_init(struct nvm *n);
/* Whether libpmem takes [addr, addr+len) (mapped without MAP_SYNC) for
 * persistent memory; loads libpmem only when it may say yes.  Returns 0, or
 * -1 with err_get() set when libpmem cannot be loaded. */
int nvm_pmem_detect(const void *addr, size_t len, bool *is_pmem);
int nvm_msync_init(struct nvm *n);
int nvm_sim_init(struct nvm *n, const struct nvm_sim_options *o);
/* n mapped private and read-write (nvm_log.h): replays the log into it.
 * sim: a simulated device (tests).  read_only: nothing is ever written. */
struct nvm_log_region;
int nvm_log_init(struct nvm *n, const struct nvm_log_region *r, const struct nvm_sim_options *sim,
		 bool read_only);

/* flush and fence of a read-only mapping, never called (nvm_flush and
 * nvm_fence refuse one first): the ops of every backend's read-only map. */
void nvm_readonly_flush(struct nvm *n, const void *addr, size_t len);
void nvm_readonly_fence(struct nvm *n);

/* A backend's fence failed with errno err: keep the first error (nvm.h). */
static inline void nvm_latch_error(struct nvm *n, int err)
{
	n->stats.errors++;
	if (n->error == 0)
		n->error = err != 0 ? err : EIO;
}

/* The (line-aligned) first line and line count covering [addr, addr+len). */
static inline uintptr_t nvm_line_down(const void *addr)
{
	return (uintptr_t)addr & ~(uintptr_t)(NVM_LINE - 1);
}
static inline size_t nvm_lines(const void *addr, size_t len)
{
	if (len == 0)
		return 0;
	uintptr_t first = nvm_line_down(addr);
	uintptr_t last = nvm_line_down((const char *)addr + len - 1);
	return (size_t)((last - first) / NVM_LINE + 1);
}

#endif
