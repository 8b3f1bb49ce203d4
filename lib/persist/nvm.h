/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm -- persistence primitives: the only code that flushes or fences.
 *
 * Owns: mapping a pool file and making ranges of it durable.  Backends are
 * sibling files behind struct nvm_ops:
 *   nvm_pmem.c   libpmem cache-line flush + drain (real pmem, or
 *                PMEM_IS_PMEM_FORCE=1 on /dev/shm)
 *   nvm_msync.c  an ordinary file: flush records the range, fence msyncs it
 *                (real durability on SSDs and disks)
 *   nvm_sim.c    the strict persistence simulator for crash tests (nvm_sim.h): a
 *                separate "media" image that only fenced flushes reach;
 *                crash injection after the k-th primitive
 * An optional emulated write latency (PMTHREADS_NVM_LATENCY_NS per flushed
 * line) applies to every backend.
 *
 * Contract for users (persist.c, pool.c): a store to the mapping is durable
 * only after nvm_flush() covering it and a later nvm_fence().  8-byte aligned
 * stores are atomic with respect to crashes; nothing larger is.
 */
#ifndef PMT_NVM_H
#define PMT_NVM_H

#include "base/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NVM_LINE 64

struct nvm;

struct nvm_ops {
	const char *name;
	/* Begin write-back of the lines covering [addr, addr+len). */
	void (*flush)(struct nvm *n, const void *addr, size_t len);
	/* Make every line flushed so far durable. */
	void (*fence)(struct nvm *n);
	void (*unmap)(struct nvm *n);
	/* Store len bytes from src at dst (inside the mapping) and begin their
	 * write-back, as one primitive.  NULL: memcpy then flush.  The pmem
	 * backend uses non-temporal stores here. */
	void (*copy_flush)(struct nvm *n, void *dst, const void *src, size_t len);
};

struct nvm_stats {
	uint64_t flushes;	/* nvm_flush / nvm_copy_flush calls */
	uint64_t lines_flushed;	/* 64-byte lines covered */
	uint64_t fences;
	uint64_t errors;		/* write-backs that failed (msync: EIO...) */
};

struct nvm {
	const struct nvm_ops *ops;
	void *base;		/* the mapping of the whole file */
	size_t len;
	int fd;			/* the pool's fd (owned by pool, not closed here) */
	unsigned latency_ns;	/* emulated extra latency per flushed line */
	struct nvm_stats stats;
	void *impl;		/* backend state */
	bool read_only;		/* mapped PROT_READ: flush/fence are bugs */
};

struct nvm_sim_options;	/* nvm_sim.h */

/* Map len bytes of the open pool file fd (path for messages) with the
 * backend chosen by kind (NVM_AUTO: pmem when the file is on a DAX file
 * system (MAP_SYNC mapping succeeds) or pmem_is_pmem() says so, e.g. with
 * PMEM_IS_PMEM_FORCE=1; msync otherwise; NVM_SIM: the simulator, configured
 * by sim, may be NULL).  fd must be open read-write.
 * Returns 0, or -1 with err_get() set. */
int nvm_map(struct nvm **out, int fd, const char *path, size_t len, enum nvm_kind kind,
	    unsigned latency_ns, const struct nvm_sim_options *sim);
/* Map len bytes of fd read-only (PROT_READ, shared): for tools that only
 * inspect a pool.  flush/fence on it abort.  Returns 0 or -1 with err_get(). */
int nvm_map_readonly(struct nvm **out, int fd, const char *path, size_t len);
void nvm_unmap(struct nvm *n);

void nvm_flush(struct nvm *n, const void *addr, size_t len);
void nvm_fence(struct nvm *n);
/* Store src[0..len) at dst in the mapping and begin its write-back (one
 * primitive; durable after the next nvm_fence). */
void nvm_copy_flush(struct nvm *n, void *dst, const void *src, size_t len);

#endif
