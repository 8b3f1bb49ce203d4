/* SPDX-License-Identifier: BSD-3-Clause */
/* nvm pmem backend -- cache-line flush + drain through libpmem.  Durable only
 * when the mapping is persistent memory (DAX with MAP_SYNC), or emulated with
 * PMEM_IS_PMEM_FORCE=1 on /dev/shm for benchmarks.  See nvm.h. */
#include "persist/nvm_backend.h"

#include <libpmem.h>

static void pmem_backend_flush(struct nvm *n, const void *addr, size_t len)
{
	(void)n;
	pmem_flush(addr, len);
}

static void pmem_backend_fence(struct nvm *n)
{
	(void)n;
	pmem_drain();
}

/* Non-temporal stores bypass the cache, so the written lines need no
 * separate flush; pmem_drain's fence orders them. */
static void pmem_backend_copy_flush(struct nvm *n, void *dst, const void *src, size_t len)
{
	(void)n;
	pmem_memcpy(dst, src, len, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN);
}

static void pmem_backend_unmap(struct nvm *n) { (void)n; }

static const struct nvm_ops pmem_ops = {
	.name = "pmem",
	.flush = pmem_backend_flush,
	.fence = pmem_backend_fence,
	.unmap = pmem_backend_unmap,
	.copy_flush = pmem_backend_copy_flush,
};

int nvm_pmem_init(struct nvm *n)
{
	n->ops = &pmem_ops;
	n->impl = NULL;
	return 0;
}
