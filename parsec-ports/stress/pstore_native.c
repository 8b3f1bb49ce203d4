/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pstore_native.c -- the storage layer over the ordinary C heap.  Nothing
 * survives the process by itself; under LD_PRELOAD=libpmthreads.so with
 * PMTHREADS_HEAP=malloc these calloc calls land in the persistent heap.
 */
#include "pstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pstore_die(const char *msg)
{
    fprintf(stderr, "pstore (native): %s\n", msg);
    exit(1);
}

const char *pstore_backend(void)
{
    return "native";
}

void *pstore_open(const char *path, const char *root_name, size_t root_size)
{
    (void)path;
    (void)root_name;
    return pstore_alloc(root_size);
}

void pstore_close(void)
{
    /* The nodes are left to process exit: freeing a large structure node by
     * node would only add time to every run. */
}

void *pstore_alloc(size_t size)
{
    /* Whole cache lines, as the other two backends' allocators give: with
     * calloc's 16-byte granularity one node's lock can share a line with
     * its neighbour's values, and a native baseline slowed down by false
     * sharing would flatter the others. */
    size_t rounded = (size + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded);
    if (p == NULL)
        pstore_die("out of memory");
    memset(p, 0, rounded);
    return p;
}
