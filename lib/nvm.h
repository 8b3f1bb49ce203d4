/*
 * nvm -- persistence primitives: the only code that flushes or fences.
 *
 * Owns: mapping a pool file and making ranges of it durable.  Backends are
 * sibling files behind struct nvm_ops:
 *   nvm_pmem.c   libpmem cache-line flush + drain (real pmem, or
 *                PMEM_IS_PMEM_FORCE=1 on /dev/shm)
 *   nvm_msync.c  an ordinary file: flush records the range, fence msyncs it
 *                (real durability on SSDs and disks)
 *   nvm_sim.c    the strict persistence simulator for crash tests: a
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

#include "config.h"

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
};

struct nvm_stats {
	uint64_t flushes;	/* nvm_flush calls */
	uint64_t lines_flushed;	/* 64-byte lines covered */
	uint64_t fences;
};

struct nvm {
	const struct nvm_ops *ops;
	void *base;		/* the mapping of the whole file */
	size_t len;
	int fd;			/* the pool's fd (owned by pool, not closed here) */
	unsigned latency_ns;	/* emulated extra latency per flushed line */
	struct nvm_stats stats;
	void *impl;		/* backend state */
};

/* Simulator controls, for tests (nvm_sim.c). */
struct nvm_sim_options {
	uint64_t seed;		/* randomness for which torn lines survive */
	uint64_t crash_after;	/* crash after this many primitives (flush or
				 * fence); 0 = never */
	/* Called at the simulated crash after the surviving image has been
	 * written to the file; must not return.  NULL: _exit(NVM_SIM_CRASH_EXIT). */
	void (*on_crash)(void *arg);
	void *on_crash_arg;
};
#define NVM_SIM_CRASH_EXIT 86

/* Map len bytes of the open pool file fd (path for messages) with the
 * backend chosen by kind (NVM_AUTO: pmem when pmem_is_pmem() says so, msync
 * otherwise; NVM_SIM: the simulator, configured by sim, may be NULL).
 * Returns 0, or -1 with err_get() set. */
int nvm_map(struct nvm **out, int fd, const char *path, size_t len, enum nvm_kind kind,
	    unsigned latency_ns, const struct nvm_sim_options *sim);
void nvm_unmap(struct nvm *n);

void nvm_flush(struct nvm *n, const void *addr, size_t len);
void nvm_fence(struct nvm *n);

/* Simulator only: crash now (apply the random survival of unfenced lines to
 * the file and call on_crash).  Count of primitives issued so far. */
__attribute__((noreturn)) void nvm_sim_crash(struct nvm *n);
uint64_t nvm_sim_primitives(const struct nvm *n);

#endif
