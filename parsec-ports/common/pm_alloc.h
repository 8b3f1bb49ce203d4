/*
 * pm_alloc.h -- where a workload's shared state comes from.
 *
 * Native build: PM_ALLOC is zeroed malloc memory, so running the unmodified
 * binary with PMTHREADS_HEAP=malloc already makes that state persistent.
 * Ported build (-DPMTHREADS_PORTED, linked with libpmthreads): PM_ALLOC is
 * nvmalloc under a name, and PM_RECOVER finds that named object again after a
 * crash so the workload can resume from its progress cursor.  Keeping every
 * workload's shared state behind these few macros is what makes the ported
 * form a compile-time switch rather than a second copy of the program.
 */
#ifndef PARSEC_PORTS_PM_ALLOC_H
#define PARSEC_PORTS_PM_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef PMTHREADS_PORTED
#include <pmthreads.h>

static inline void *pm_alloc_or_die(size_t size, const char *name)
{
    void *p = nvmalloc(size, name);
    if (p == NULL) {
        fprintf(stderr, "nvmalloc(%zu, %s) failed: %s\n", size,
                name ? name : "(anonymous)", pmthreads_errormsg());
        exit(1);
    }
    return p;
}

#define PM_ALLOC(size, name) pm_alloc_or_die((size), (name))
#define PM_FREE(ptr) nvfree(ptr)
/* The named object from the recovered heap, or NULL (fresh pool, clean exit). */
#define PM_RECOVER(size, name) (crashed() ? nvrecover(NULL, (size), (name)) : NULL)
#define PM_PORTED 1

#else

static inline void *pm_alloc_or_die(size_t size, const char *name)
{
    void *p = calloc(1, size ? size : 1);
    if (p == NULL) {
        fprintf(stderr, "out of memory allocating %zu bytes for %s\n", size,
                name ? name : "(anonymous)");
        exit(1);
    }
    return p;
}

#define PM_ALLOC(size, name) pm_alloc_or_die((size), (name))
#define PM_FREE(ptr) free(ptr)
#define PM_RECOVER(size, name) ((void)(size), (void)(name), (void *)NULL)
#define PM_PORTED 0

#endif

#endif /* PARSEC_PORTS_PM_ALLOC_H */
