/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mapreduce.h -- a small shared-memory map-reduce runtime in the style of
 * Phoenix (Ranger et al., HPCA 2007; Yoo et al., IISWC 2009), used by the
 * eight Phoenix workloads.
 *
 * Phases, each run by `threads` worker threads:
 *   map     the input is split into `map_tasks` tasks; workers take task
 *           numbers from a shared task queue (a counter under a mutex) and
 *           call map(), which emits (key, value) pairs into the worker's own
 *           intermediate buffer: one hash table per reduce partition, no lock
 *           on the emit path.  An optional combiner folds values of the same
 *           key inside that buffer as they are emitted.
 *   reduce  each reduce task is one partition (hash(key) % reduce_tasks);
 *           a worker merges that partition of every worker's buffer, calls
 *           reduce() once per key, and sorts the partition's output.
 *   merge   the sorted partitions are merged pairwise, in parallel, until one
 *           sorted array remains.
 *
 * Keys and values are machine words (integers or pointers).  The output is
 * sorted by out_cmp (default: by key) with ties broken by key, so it does not
 * depend on the number of threads as long as reduce() does not depend on the
 * order of the values it is given (the order of values across workers is not
 * fixed).
 */
#ifndef PARSEC_PORTS_MAPREDUCE_H
#define PARSEC_PORTS_MAPREDUCE_H

#include <stddef.h>
#include <stdint.h>

typedef uintptr_t mr_key;
typedef uintptr_t mr_val;

typedef struct mr_pair {
    mr_key key;
    mr_val val;
} mr_pair;

/* A worker's intermediate buffer; map() hands it to mr_emit(). */
typedef struct mr_emitter mr_emitter;

void mr_emit(mr_emitter *e, mr_key key, mr_val val);

typedef struct mr_job {
    int threads;
    size_t map_tasks;
    void (*map)(void *arg, size_t task, mr_emitter *e);
    void *arg;

    /* Keys: NULL means the key is an integer (identity order, mixed hash). */
    uint64_t (*key_hash)(mr_key key);
    int (*key_cmp)(mr_key a, mr_key b);

    /* Optional combiner: returns acc folded with v (e.g. acc + v). */
    mr_val (*combine)(mr_val acc, mr_val v);
    /*
     * Reduce: the final value of key from all values emitted for it (after
     * combining).  NULL: with a combiner, the values are combined; without
     * one, the first value is kept.
     */
    mr_val (*reduce)(void *arg, mr_key key, const mr_val *vals, size_t n);

    /* Final order; NULL: by key.  Ties are always broken by key. */
    int (*out_cmp)(const mr_pair *a, const mr_pair *b);

    size_t reduce_tasks; /* 0: a default independent of `threads` */
} mr_job;

typedef struct mr_result {
    mr_pair *pairs;
    size_t n;
} mr_result;

mr_result mr_run(const mr_job *job);
void mr_result_free(mr_result *r);

/* FNV-1a over a NUL-terminated string, for string keys. */
uint64_t mr_hash_string(mr_key key);
int mr_cmp_string(mr_key a, mr_key b);

#endif /* PARSEC_PORTS_MAPREDUCE_H */
