/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * export -- symbol visibility.  lib/ and preload/ are compiled with
 * -fvisibility=hidden; only the public API (pmthreads.h) and the interposed
 * libc/pthread symbols are exported from libpmthreads.so.
 */
#ifndef PMT_EXPORT_H
#define PMT_EXPORT_H

#define PMT_EXPORT __attribute__((visibility("default")))

#endif
