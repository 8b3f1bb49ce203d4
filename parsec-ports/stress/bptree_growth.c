/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bptree_growth.c -- a regression test for the B+tree's lock-free descent at
 * the moments the tree grows a level.
 *
 * The root splits only a few times in a tree's life, so the stress program
 * meets that moment a handful of times per run.  This one builds many small
 * trees from empty, each with more inserting threads than cores (preempted
 * writers leave nodes mid-change), so the root splits some thousand times
 * under concurrent descents; after each tree, bpt_check must pass and every
 * inserted key must be found with its value.  (A descent that validated the
 * tree between the old root's split and the new root's store went down the
 * old root and put keys into far-away leaves.)
 *
 * usage: bptree_growth [ROUNDS [THREADS [KEYS_PER_THREAD]]]  (800 6 3000)
 * Before the fix 300 rounds caught the bug in three runs out of five.
 * Exit status 0: every tree was whole.
 */
#include "bptree.h"
#include "stress_mix.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static bpt_tree *tree;
static unsigned keys_per_thread;
static pthread_barrier_t go;

static void *inserter(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    pthread_barrier_wait(&go);
    for (uint64_t i = 0; i < keys_per_thread; i++) {
        uint64_t v = id << 32 | i;
        bpt_put(tree, stress_mix(v), v);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 800;
    unsigned threads = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 6;
    keys_per_thread = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 3000;
    if (rounds == 0 || threads == 0 || threads > 64 || keys_per_thread == 0) {
        fprintf(stderr, "usage: %s [ROUNDS [THREADS (1-64) [KEYS_PER_THREAD]]]\n", argv[0]);
        return 2;
    }
    pthread_t tid[64];
    uint64_t grown = 0;
    for (unsigned r = 0; r < rounds; r++) {
        tree = pstore_alloc(sizeof *tree);
        bpt_init(tree);
        pthread_barrier_init(&go, NULL, threads);
        for (unsigned i = 0; i < threads; i++)
            if (pthread_create(&tid[i], NULL, inserter, (void *)(uintptr_t)i) != 0) {
                fprintf(stderr, "bptree_growth: pthread_create failed\n");
                return 1;
            }
        for (unsigned i = 0; i < threads; i++)
            pthread_join(tid[i], NULL);
        pthread_barrier_destroy(&go);

        char why[256];
        bpt_report rep;
        if (!bpt_check(tree, &rep, why, sizeof why)) {
            fprintf(stderr, "bptree_growth: round %u: %s\n", r, why);
            return 1;
        }
        for (uint64_t id = 0; id < threads; id++)
            for (uint64_t i = 0; i < keys_per_thread; i++) {
                uint64_t v = id << 32 | i, got;
                if (!bpt_get(tree, stress_mix(v), &got) || got != v) {
                    fprintf(stderr, "bptree_growth: round %u: key %" PRIu64 " lost\n", r,
                            stress_mix(v));
                    return 1;
                }
            }
        grown += rep.height - 1;
        /* The nodes are not freed (the tree has no delete); a round is
         * ~1 MB. */
    }
    printf("bptree_growth: %u trees, %" PRIu64 " root splits, all whole\n", rounds, grown);
    return 0;
}
