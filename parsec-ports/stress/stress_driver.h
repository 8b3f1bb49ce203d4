/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stress_driver.h -- the command line, workload loop, timing and final check
 * shared by the stress programs (bptree, lclist and their pmthreads and
 * pmemobj builds), so that they differ only in the structure they drive.
 *
 *   PROG [-t THREADS] [-u PUT%] [-k KEYS] [-n OPS | -d MS] [-p PREFILL%]
 *        [-s SEED] [-P POOL] [-x] [-q]
 *
 *   -t  worker threads (default 2)
 *   -u  percentage of operations that are PUTs (insert or update); the rest
 *       are GETs (default 50)
 *   -k  keys are drawn uniformly from [0, KEYS) (default per structure)
 *   -n  total operations, split evenly over the threads (default per
 *       structure); the set of keys written, and so the checksum, then depends
 *       only on the parameters, not on the interleaving
 *   -d  run for MS milliseconds instead of a fixed number of operations
 *   -p  before the timed run, insert this percentage of the key range
 *       (default 50), single-threaded and untimed
 *   -s  seed of the per-thread key streams (default 1)
 *   -P  pmemobj pool file to open or create (default: a fresh temporary one)
 *   -x  only open the store, check the structure found there and exit
 *   -q  print only the summary lines
 *
 * Output, one `key=value` fact per line for scripts; the last line is
 * `checksum=<16 hex digits>` over the final contents in key order.  The exit
 * status is 1 when the consistency check fails.
 */
#ifndef STRESS_DRIVER_H
#define STRESS_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef void (*stress_visit_fn)(uint64_t key, uint64_t value, void *ctx);

/* One concurrent map, seen through its root object. */
typedef struct stress_structure {
    const char *name;      /* program name, e.g. "bptree" */
    const char *root_name; /* the root's name in the persistent heap */
    size_t root_size;
    uint64_t default_keys;
    uint64_t default_ops;
    bool (*is_initialised)(const void *root);
    void (*init)(void *root);
    bool (*put)(void *root, uint64_t key, uint64_t value);
    bool (*get)(void *root, uint64_t key, uint64_t *value);
    /* Structural check: key count in *keys, a short description of the shape
     * (e.g. "height=3 nodes=120") in detail, or the violation in why. */
    bool (*check)(const void *root, uint64_t *keys, char *detail, size_t detail_size,
                  char *why, size_t why_size);
    void (*foreach)(const void *root, stress_visit_fn fn, void *ctx);
} stress_structure;

/* The value every PUT of key stores, so the check can recognise it. */
uint64_t stress_value_of(uint64_t key);

int stress_main(int argc, char **argv, const stress_structure *s);

#endif /* STRESS_DRIVER_H */
