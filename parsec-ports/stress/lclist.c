/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lclist.c -- the lock-coupling sorted list of lclist.h.
 */
#include "lclist.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>

static inline lcl_node *node_at(pstore_ref r)
{
    return pstore_ptr(r);
}

/* All but the lock: its state is volatile and must not be rolled back. */
static inline void snapshot_node(lcl_node *n)
{
    pstore_tx_add(&n->key, sizeof *n - offsetof(lcl_node, key));
}

bool lcl_is_initialised(const lcl_list *l)
{
    return l->magic == LCL_MAGIC && l->head != 0;
}

/* A process-local lock that makes initialisation one critical section, and
 * so failure-atomic under pmthreads (the list root itself has no lock). */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

void lcl_init(lcl_list *l)
{
    pstore_op op;
    pthread_mutex_lock(&init_lock);
    pstore_op_begin(&op);
    pstore_tx_add(l, sizeof *l);
    l->head = pstore_ref_of(pstore_alloc(sizeof(lcl_node)));
    l->magic = LCL_MAGIC;
    pstore_op_end(&op);
    pthread_mutex_unlock(&init_lock);
}

/*
 * Walks from the sentinel with lock coupling until prev is the last node with
 * a key below key; returns with prev and (if not NULL) *curr locked, both in
 * the mode `write` says.
 */
static void find(lcl_list *l, uint64_t key, bool write, lcl_node **prev_out,
                 lcl_node **curr_out)
{
    void (*lock)(pstore_lock_t *) = write ? pstore_wrlock : pstore_rdlock;
    lcl_node *prev = node_at(l->head);
    lock(&prev->lock);
    lcl_node *curr = node_at(prev->next);
    if (curr != NULL)
        lock(&curr->lock);
    while (curr != NULL && curr->key < key) {
        pstore_unlock(&prev->lock);
        prev = curr;
        curr = node_at(curr->next);
        if (curr != NULL)
            lock(&curr->lock);
    }
    *prev_out = prev;
    *curr_out = curr;
}

bool lcl_put(lcl_list *l, uint64_t key, uint64_t value)
{
    pstore_op op;
    pstore_op_begin(&op);
    lcl_node *prev, *curr;
    find(l, key, true, &prev, &curr);
    bool is_new = !(curr != NULL && curr->key == key);
    if (!is_new) {
        pstore_tx_add(&curr->value, sizeof curr->value);
        curr->value = value;
        pstore_unlock(&prev->lock);
        pstore_release_written(&op, &curr->lock);
    } else {
        lcl_node *n = pstore_alloc(sizeof *n);
        n->key = key;
        n->value = value;
        n->next = pstore_ref_of(curr);
        pstore_tx_add(&prev->next, sizeof prev->next);
        prev->next = pstore_ref_of(n);
        if (curr != NULL)
            pstore_unlock(&curr->lock);
        pstore_release_written(&op, &prev->lock);
    }
    pstore_op_end(&op);
    return is_new;
}

bool lcl_get(lcl_list *l, uint64_t key, uint64_t *value)
{
    lcl_node *prev, *curr;
    find(l, key, false, &prev, &curr);
    bool hit = curr != NULL && curr->key == key;
    if (hit)
        *value = curr->value;
    if (curr != NULL)
        pstore_unlock(&curr->lock);
    pstore_unlock(&prev->lock);
    return hit;
}

bool lcl_check(const lcl_list *l, uint64_t *keys, char *why, size_t why_size)
{
    *keys = 0;
    if (!lcl_is_initialised(l)) {
        snprintf(why, why_size, "the list was never initialised");
        return false;
    }
    /* Strictly ascending keys also rule out a cycle: one would revisit a
     * smaller key and fail the order test. */
    const lcl_node *prev = NULL;
    for (const lcl_node *n = node_at(node_at(l->head)->next); n != NULL; n = node_at(n->next)) {
        if (prev != NULL && prev->key >= n->key) {
            snprintf(why, why_size, "keys out of order: %" PRIu64 " then %" PRIu64, prev->key,
                     n->key);
            return false;
        }
        ++*keys;
        prev = n;
    }
    return true;
}

void lcl_foreach(const lcl_list *l, void (*fn)(uint64_t key, uint64_t value, void *ctx),
                 void *ctx)
{
    for (const lcl_node *n = node_at(node_at(l->head)->next); n != NULL; n = node_at(n->next))
        fn(n->key, n->value, ctx);
}
