/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvrecovery.h -- NVthreads' programming interface over libpmthreads, so that
 * a program written for NVthreads builds and recovers unchanged:
 *
 *	bool isCrashed(void);
 *	void *nvmalloc(size_t size, char *name);
 *	unsigned long nvrecover(void *dest, size_t size, char *name);
 *	void nvcheckpoint(void);
 *
 * with NVthreads' prototypes, for C and C++, and the headers NVthreads'
 * own nvrecovery.h made visible.  The names are macros for functions of
 * pmthreads' own (pmthreads_crashed, pmthreads_nvthreads_*): libpmthreads
 * exports none of NVthreads' short names, and pmthreads.h, which this header
 * includes first, keeps its own nvmalloc and nvrecover.  A file that
 * includes this header (before or after pmthreads.h) gets NVthreads'
 * meaning of nvmalloc and nvrecover; every pmthreads_* function stays
 * available.  See pmthreads.h(3), section NVTHREADS PROGRAMS.
 */
#ifndef PMTHREADS_NVRECOVERY_H
#define PMTHREADS_NVRECOVERY_H

#include <pmthreads.h>

/* What NVthreads programs find through NVthreads' header. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#ifdef __cplusplus
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>
#endif

#define isCrashed pmthreads_crashed
#define nvmalloc pmthreads_nvthreads_malloc
#define nvrecover pmthreads_nvthreads_recover
#define nvcheckpoint pmthreads_nvthreads_checkpoint

#ifdef __cplusplus
extern "C" {
#endif

/*
 * isCrashed -- true when the previous run did not exit cleanly and this run
 * recovered its heap (pmthreads_crashed()).
 */
bool isCrashed(void);

/*
 * nvmalloc -- a zeroed object of size bytes from the persistent heap, bound
 * to name (at most 127 bytes).  When the previous run had an object of that
 * name, it is kept for nvrecover: for the whole run, nvrecover(dest, size,
 * name) copies the data the name had when the run started.  NULL when the
 * heap is full or the name is too long (pmthreads_errormsg() says which).
 */
void *nvmalloc(size_t size, char *name);

/*
 * nvrecover -- copy exactly size bytes of the object that had name when this
 * run started into dest.  Returns 0, or (unsigned long)-1 when no object had
 * that name or it is smaller than size (as nvmalloc was asked for it).  Once
 * the data has been copied into the object nvmalloc(size, name) returned in
 * this run, the old object is freed.
 */
unsigned long nvrecover(void *dest, size_t size, char *name);

/*
 * nvcheckpoint -- return once everything the calling thread wrote to the
 * persistent heap is durable (pmthreads_sync()).  Called while holding a lock
 * it cannot: the writes become durable with the first epoch after the
 * outermost critical section ends (a warning says so once).
 */
void nvcheckpoint(void);

#ifdef __cplusplus
}
#endif

#endif /* PMTHREADS_NVRECOVERY_H */
