/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bptree_main.c -- the `bptree` stress program: the driver of stress_driver.h
 * over the lock-coupling B+tree of bptree.h.
 */
#include "bptree.h"
#include "stress_driver.h"

#include <inttypes.h>
#include <stdio.h>

static bool tree_is_initialised(const void *root)
{
    return bpt_is_initialised(root);
}

static void tree_init(void *root)
{
    bpt_init(root);
}

static bool tree_put(void *root, uint64_t key, uint64_t value)
{
    return bpt_put(root, key, value);
}

static bool tree_get(void *root, uint64_t key, uint64_t *value)
{
    return bpt_get(root, key, value);
}

static bool tree_check(const void *root, uint64_t *keys, char *detail, size_t detail_size,
                       char *why, size_t why_size)
{
    bpt_report r;
    bool ok = bpt_check(root, &r, why, why_size);
    *keys = r.keys;
    snprintf(detail, detail_size, "height=%" PRIu64 " nodes=%" PRIu64, r.height, r.nodes);
    return ok;
}

static void tree_foreach(const void *root, stress_visit_fn fn, void *ctx)
{
    bpt_foreach(root, fn, ctx);
}

int main(int argc, char **argv)
{
    static const stress_structure tree = {
        .name = "bptree",
        .root_name = "stress.bptree",
        .root_size = sizeof(bpt_tree),
        .default_keys = 100000,
        .default_ops = 400000,
        .is_initialised = tree_is_initialised,
        .init = tree_init,
        .put = tree_put,
        .get = tree_get,
        .check = tree_check,
        .foreach = tree_foreach,
    };
    return stress_main(argc, argv, &tree);
}
