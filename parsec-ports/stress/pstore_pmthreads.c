/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pstore_pmthreads.c -- the storage layer over the pmthreads persistent heap
 * (the "ported" build): nodes from nvmalloc, the root registered under a name.
 * The pool is the runtime's (PMTHREADS_POOL); this file never flushes or
 * fences anything -- durability comes from the runtime's quiescent points.
 */
#include "pstore.h"

#include <pmthreads.h>
#include <stdio.h>
#include <stdlib.h>

void pstore_die(const char *msg)
{
    const char *why = pmthreads_errormsg();
    fprintf(stderr, "pstore (pmthreads): %s%s%s\n", msg, *why ? ": " : "", why);
    exit(1);
}

const char *pstore_backend(void)
{
    return "pmthreads";
}

void *pstore_open(const char *path, const char *root_name, size_t root_size)
{
    (void)path;
    /* A root from an earlier run (crashed or not) is used as it is; the
     * structure decides from its own "initialised" mark whether it is whole. */
    void *root = nvrecover(NULL, root_size, root_name);
    if (root != NULL) {
        if (pmthreads_heap_offset() != 0)
            pstore_die("the heap came back at another address; "
                       "the stress structures store raw pointers");
        return root;
    }
    root = nvmalloc(root_size, root_name);
    if (root == NULL)
        pstore_die("nvmalloc of the root failed");
    return root;
}

void pstore_close(void)
{
    /* The structure stays in the pool for the next run. */
}

void *pstore_alloc(size_t size)
{
    void *p = nvmalloc(size, NULL);
    if (p == NULL)
        pstore_die("nvmalloc failed (is PMTHREADS_POOL_SIZE large enough?)");
    return p;
}
