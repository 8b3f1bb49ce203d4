/* SPDX-License-Identifier: BSD-3-Clause */
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
#define PM_RECOVER(size, name) (pmthreads_crashed() ? nvrecover(NULL, (size), (name)) : NULL)
/* The ported form resumes over its recovered input: it stays in the heap. */
#define PM_INPUT_ALLOC(size, name) pm_alloc_or_die((size), (name))
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

/*
 * The input of a program whose original maps its input file (Phoenix's
 * histogram, linear_regression, matrix_multiply, string_match and
 * word_count mmap their files): anonymous mapped memory, filled by the
 * generator, which stands in for the file.  Like the original's mapping it is
 * not malloc memory, so under PMTHREADS_HEAP=malloc it is not persisted
 * either -- a persistence runtime has no reason to copy a program's input
 * file.  Zeroed; never freed (the process ends with it).
 */
#include <sys/mman.h>

static inline void *pm_input_or_die(size_t size, const char *name)
{
    void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "out of memory mapping %zu bytes for %s\n", size,
                name ? name : "(anonymous)");
        exit(1);
    }
    return p;
}

#define PM_INPUT_ALLOC(size, name) pm_input_or_die((size), (name))

#endif

#endif /* PARSEC_PORTS_PM_ALLOC_H */
