/*
 * pstore_native.c -- the storage layer over the ordinary C heap.  Nothing
 * survives the process by itself; under LD_PRELOAD=libpmthreads.so with
 * PMTHREADS_HEAP=malloc these calloc calls land in the persistent heap.
 */
#include "pstore.h"

#include <stdio.h>
#include <stdlib.h>

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
    void *p = calloc(1, size);
    if (p == NULL)
        pstore_die("out of memory");
    return p;
}
