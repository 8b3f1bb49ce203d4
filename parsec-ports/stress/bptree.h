/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bptree.h -- a concurrent B+tree (uint64 keys and values) with a lock in
 * every node, written against pstore.h so it builds natively, over pmthreads
 * and over libpmemobj.
 *
 * Concurrency.  Leaves are guarded by their locks: a lookup read-locks its
 * leaf, an insert write-locks it.  Inner nodes change only when a node
 * splits (about one insert in sixteen), so the descent to the leaf takes no
 * lock at all: it reads each inner node optimistically and validates the read
 * against the node's version, which a writer makes odd while it changes the
 * node (a seqlock, as in optimistic lock coupling, Leis et al. 2016).  The
 * descent holds no lock, so every operation holds exactly one lock unless it
 * splits, and readers never write a shared cache line on the way down.
 * An insert into a full leaf starts again with write locks taken hand over
 * hand from the top (lock coupling), splitting every full node it passes
 * (proactive splitting), so a split never has to climb back up and a writer
 * holds at most a parent and a child (plus the new sibling) at a time.
 * Writes to persistent nodes happen only under their locks, which is what
 * pmthreads (and the pmemobj transactions) need.  There is no delete: the
 * stress programs only insert and update.
 */
#ifndef STRESS_BPTREE_H
#define STRESS_BPTREE_H

#include "pstore.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Order 32: up to 31 keys and 32 children per node. */
#define BPT_MAX_KEYS 31
/* Every node but the root keeps at least this many keys (no deletes, and a
 * split of a full node leaves both halves at least this full). */
#define BPT_MIN_KEYS ((BPT_MAX_KEYS - 1) / 2)

typedef struct bpt_node {
    pstore_lock_t lock; /* first, so that snapshots can skip it */
    uint64_t version;   /* inner nodes: odd while a writer changes the node */
    uint32_t is_leaf;
    uint32_t nkeys;
    uint64_t keys[BPT_MAX_KEYS];
    union {
        pstore_ref child[BPT_MAX_KEYS + 1]; /* inner: child i holds keys in [keys[i-1], keys[i]) */
        uint64_t value[BPT_MAX_KEYS];       /* leaf */
    } u;
    pstore_ref next; /* leaf: the next leaf to the right, for in-order walks */
} bpt_node;

/* The root object of the store: where a later run finds the tree. */
typedef struct bpt_tree {
    pstore_lock_t lock; /* guards root and height against other writers */
    uint64_t magic;     /* BPT_MAGIC once initialised */
    uint64_t version;   /* odd while the root is being replaced */
    pstore_ref root;
    uint64_t height;    /* 1 = the root is a leaf */
} bpt_tree;

#define BPT_MAGIC 0x6270747265653032ull /* "bptree02" */

/* True when t holds a whole, initialised tree (not a new or torn root). */
bool bpt_is_initialised(const bpt_tree *t);

/* Makes t an empty tree (one empty leaf). */
void bpt_init(bpt_tree *t);

/* Inserts key, or replaces its value.  Returns true when the key was new. */
bool bpt_put(bpt_tree *t, uint64_t key, uint64_t value);

/* Looks key up; on a hit stores its value in *value and returns true. */
bool bpt_get(bpt_tree *t, uint64_t key, uint64_t *value);

/* What bpt_check found. */
typedef struct bpt_report {
    uint64_t keys;
    uint64_t nodes;
    uint64_t height;
} bpt_report;

/*
 * bpt_check -- verifies the tree single-threaded: keys sorted inside every
 * node and within their parent's bounds, node fill between BPT_MIN_KEYS and
 * BPT_MAX_KEYS (root excepted), every leaf at the recorded height, no node
 * version odd (a change left half done), and the leaf chain visiting exactly
 * the keys of the tree in ascending order.
 * Returns true if all holds; otherwise false with the first violation in why.
 */
bool bpt_check(const bpt_tree *t, bpt_report *report, char *why, size_t why_size);

/* Calls fn for every key/value in ascending key order (single-threaded). */
void bpt_foreach(const bpt_tree *t, void (*fn)(uint64_t key, uint64_t value, void *ctx),
                 void *ctx);

#endif /* STRESS_BPTREE_H */
