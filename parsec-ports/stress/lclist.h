/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lclist.h -- a sorted singly linked list (uint64 keys and values) with a lock
 * in every node and hand-over-hand (lock-coupling) traversal, written against
 * pstore.h so it builds natively, over pmthreads and over libpmemobj.
 *
 * A sentinel head node (no key) starts the list.  A traversal holds the lock
 * of the previous node while it takes the lock of the current one, so an
 * insert between them can never be lost or overtaken.  Lookups use read
 * locks, inserts/updates write locks.  There is no delete.
 */
#ifndef STRESS_LCLIST_H
#define STRESS_LCLIST_H

#include "pstore.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lcl_node {
    pstore_lock_t lock; /* first, so that snapshots can skip it */
    uint64_t key;
    uint64_t value;
    pstore_ref next;
} lcl_node;

/* The root object of the store: where a later run finds the list. */
typedef struct lcl_list {
    uint64_t magic; /* LCL_MAGIC once initialised */
    pstore_ref head; /* the sentinel */
} lcl_list;

#define LCL_MAGIC 0x6c636c6973743031ull /* "lclist01" */

bool lcl_is_initialised(const lcl_list *l);

/* Makes l an empty list (just the sentinel). */
void lcl_init(lcl_list *l);

/* Inserts key in order, or replaces its value.  True when the key was new. */
bool lcl_put(lcl_list *l, uint64_t key, uint64_t value);

/* Looks key up; on a hit stores its value in *value and returns true. */
bool lcl_get(lcl_list *l, uint64_t key, uint64_t *value);

/*
 * lcl_check -- verifies single-threaded that the keys are strictly ascending
 * and the list ends (no cycle).  Returns true and the key count in *keys, or
 * false with the violation in why.
 */
bool lcl_check(const lcl_list *l, uint64_t *keys, char *why, size_t why_size);

/* Calls fn for every key/value in list (= ascending key) order. */
void lcl_foreach(const lcl_list *l, void (*fn)(uint64_t key, uint64_t value, void *ctx),
                 void *ctx);

#endif /* STRESS_LCLIST_H */
