/* SPDX-License-Identifier: BSD-3-Clause */
/* nvm pmem backend -- cache-line flush + drain through libpmem.  Durable only
 * when the mapping is persistent memory (DAX with MAP_SYNC), or emulated with
 * PMEM_IS_PMEM_FORCE=1 on /dev/shm for benchmarks.  See nvm.h.
 *
 * libpmem is loaded with dlopen when a pool first needs it, never linked:
 * its constructor takes a pthread TSD key (for its error messages) and loads
 * libndctl, libdaxctl and their dependencies.  A linked libpmem would take
 * that key from every program before main, so a program creating
 * PTHREAD_KEYS_MAX keys would get EAGAIN one key early; a pool on an
 * ordinary file (the msync backend) never loads it at all. */
#include "persist/nvm_backend.h"

#include "base/log.h"
#include "prim/prim.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <libpmem.h>

/* The functions of libpmem this backend calls (their prototypes from
 * libpmem.h, so a mismatch is a compile error). */
static struct {
	__typeof__(pmem_flush) *flush;
	__typeof__(pmem_drain) *drain;
	__typeof__(pmem_memcpy) *memcpy_;
	__typeof__(pmem_is_pmem) *is_pmem;
} fn;
static atomic_bool loaded;
static prim_lock_t load_lock = PRIM_LOCK_INIT;
/* Taken while a pool opens (under the runtime's start-up lock, which fork
 * waits for): never held at a fork, and a child opens no pool. */
PRIM_LOCK_NAMED(load_lock, libpmem_load, "persist/nvm_pmem: loading libpmem", PRIM_FORK_RESET);

#define LIBPMEM_SONAME "libpmem.so.1"

static int load_libpmem(void)
{
	if (atomic_load_explicit(&loaded, memory_order_acquire))
		return 0;
	prim_lock(&load_lock);
	int rc = 0;
	if (!atomic_load(&loaded)) {
		void *h = dlopen(LIBPMEM_SONAME, RTLD_NOW | RTLD_LOCAL);
		if (h == NULL) {
			err_set("cannot load %s for a pool on persistent memory (%s); install "
				"Debian's libpmem1 package, or set PMTHREADS_NVM=msync", LIBPMEM_SONAME,
				dlerror());
			rc = -1;
		} else {
			fn.flush = (__typeof__(fn.flush))dlsym(h, "pmem_flush");
			fn.drain = (__typeof__(fn.drain))dlsym(h, "pmem_drain");
			fn.memcpy_ = (__typeof__(fn.memcpy_))dlsym(h, "pmem_memcpy");
			fn.is_pmem = (__typeof__(fn.is_pmem))dlsym(h, "pmem_is_pmem");
			if (fn.flush == NULL || fn.drain == NULL || fn.memcpy_ == NULL ||
			    fn.is_pmem == NULL) {
				err_set("%s lacks pmem_flush, pmem_drain, pmem_memcpy or "
					"pmem_is_pmem; reinstall Debian's libpmem1 package",
					LIBPMEM_SONAME);
				rc = -1;
			} else {
				atomic_store_explicit(&loaded, true, memory_order_release);
			}
		}
	}
	prim_unlock(&load_lock);
	return rc;
}

int nvm_pmem_detect(const void *addr, size_t len, bool *is_pmem)
{
	*is_pmem = false;
	/* Without MAP_SYNC (which the caller tried first) a mapping of a
	 * regular file is persistent memory to libpmem only when
	 * PMEM_IS_PMEM_FORCE says so: its other test, Device DAX, needs a
	 * character device, which is never a pool.  So libpmem is asked, and
	 * loaded, only when that variable is set. */
	if (getenv("PMEM_IS_PMEM_FORCE") == NULL)
		return 0;
	if (load_libpmem() != 0)
		return -1;
	*is_pmem = fn.is_pmem(addr, len) != 0;
	return 0;
}

static void pmem_backend_flush(struct nvm *n, const void *addr, size_t len)
{
	(void)n;
	fn.flush(addr, len);
}

static void pmem_backend_fence(struct nvm *n)
{
	(void)n;
	fn.drain();
}

/* Non-temporal stores bypass the cache, so the written lines need no
 * separate flush; pmem_drain's fence orders them. */
static void pmem_backend_copy_flush(struct nvm *n, void *dst, const void *src, size_t len)
{
	(void)n;
	fn.memcpy_(dst, src, len, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN);
}

static void pmem_backend_unmap(struct nvm *n) { (void)n; }

static const struct nvm_ops pmem_ops = {
	.name = "pmem",
	.flush = pmem_backend_flush,
	.fence = pmem_backend_fence,
	.unmap = pmem_backend_unmap,
	.copy_flush = pmem_backend_copy_flush,
	.memory_like = true,
};

int nvm_pmem_init(struct nvm *n)
{
	if (load_libpmem() != 0)
		return -1;
	n->ops = &pmem_ops;
	n->impl = NULL;
	return 0;
}
