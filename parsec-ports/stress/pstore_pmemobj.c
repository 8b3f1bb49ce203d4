/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pstore_pmemobj.c -- the storage layer over a PMDK libpmemobj pool, the
 * baseline a programmer would otherwise pick: explicit undo-log transactions
 * (see pstore.h), nodes from pmemobj_tx_zalloc, the pool's root object as the
 * structure's root.
 *
 * Pool file: the path given, else a fresh one under /dev/shm that is removed
 * at close.  Size: STRESS_POOL_SIZE in MiB (default 256).  Run with
 * PMEM_IS_PMEM_FORCE=1 on /dev/shm so libpmemobj flushes cache lines instead of
 * calling msync, as it would on real persistent memory.
 */
#include "pstore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STRESS_LAYOUT "pmthreads-stress"
/* Type number of every node allocation (the structures use one node type). */
#define STRESS_NODE_TYPE 1

PMEMobjpool *pstore_pool;
uintptr_t pstore_base;
static char temporary_pool[256];

void pstore_die(const char *msg)
{
    fprintf(stderr, "pstore (pmemobj): %s: %s\n", msg, pmemobj_errormsg());
    exit(1);
}

const char *pstore_backend(void)
{
    return "pmemobj";
}

static size_t pool_size(void)
{
    const char *s = getenv("STRESS_POOL_SIZE");
    long mib = s ? strtol(s, NULL, 10) : 256;
    if (mib < 16)
        mib = 16; /* above PMEMOBJ_MIN_POOL with room for the structure */
    return (size_t)mib << 20;
}

void *pstore_open(const char *path, const char *root_name, size_t root_size)
{
    (void)root_name;
    if (path == NULL) {
        snprintf(temporary_pool, sizeof temporary_pool,
                 "/dev/shm/pmthreads-stress-%ld.pool", (long)getpid());
        unlink(temporary_pool);
        path = temporary_pool;
    }
    pstore_pool = pmemobj_open(path, STRESS_LAYOUT);
    if (pstore_pool == NULL) {
        if (errno != ENOENT)
            pstore_die(path);
        pstore_pool = pmemobj_create(path, STRESS_LAYOUT, pool_size(), 0600);
        if (pstore_pool == NULL)
            pstore_die(path);
    }
    pstore_base = (uintptr_t)pstore_pool;
    PMEMoid root = pmemobj_root(pstore_pool, root_size);
    if (OID_IS_NULL(root))
        pstore_die("pmemobj_root failed");
    return pmemobj_direct(root);
}

void pstore_close(void)
{
    if (pstore_pool != NULL)
        pmemobj_close(pstore_pool);
    pstore_pool = NULL;
    if (temporary_pool[0] != '\0')
        unlink(temporary_pool);
}

void *pstore_alloc(size_t size)
{
    PMEMoid oid = pmemobj_tx_zalloc(size, STRESS_NODE_TYPE);
    if (OID_IS_NULL(oid))
        pstore_die("pmemobj_tx_zalloc failed");
    return pmemobj_direct(oid);
}
