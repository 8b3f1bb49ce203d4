/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * linkage -- where this library stands among the process's loaded objects.
 *
 * Owns: two questions start-up asks of the dynamic linker.  Whether the
 * program uses the API: a program that calls a function of pmthreads.h
 * (linked, or through weak references as examples/bank.c does) has its name
 * in the dynamic string table (DT_STRTAB) of one of its objects.  Whether
 * the program's lock calls reach this library's wrappers: they do only when
 * the library comes before the runtime that defines the lock functions in
 * the global lookup order.  Under LD_PRELOAD it always does; a program
 * linked with -lpmthreads after -lgomp (or with another library preloaded
 * before us) calls libgomp's GOMP_critical_start directly, and its critical
 * sections are not FASEs.
 */
#ifndef PMT_LINKAGE_H
#define PMT_LINKAGE_H

#include <stdbool.h>

/* Some loaded object other than this library names a function of
 * pmthreads.h or nvrecovery.h; true when that cannot be told. */
bool linkage_program_uses_api(void);

/* The first definition of one entry point per lock family (pthread, C11,
 * OpenMP) is not in the C library or an OpenMP runtime.  A family whose
 * locks are not seen is said once, with the fix.  A definition in any other
 * object (the program's own function of that name, a sanitizer's
 * interceptor that forwards to the next definition) is left alone: it may
 * well reach us. */
bool linkage_locks_reach_us(void);

#endif
