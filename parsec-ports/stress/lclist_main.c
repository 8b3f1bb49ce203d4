/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lclist_main.c -- the `lclist` stress program: the driver of stress_driver.h
 * over the hand-over-hand sorted list of lclist.h.  Every operation walks half
 * the list on average, so the defaults are a small key range and fewer
 * operations than bptree's.
 */
#include "lclist.h"
#include "stress_driver.h"

#include <stdio.h>

static bool list_is_initialised(const void *root)
{
    return lcl_is_initialised(root);
}

static void list_init(void *root)
{
    lcl_init(root);
}

static bool list_put(void *root, uint64_t key, uint64_t value)
{
    return lcl_put(root, key, value);
}

static bool list_get(void *root, uint64_t key, uint64_t *value)
{
    return lcl_get(root, key, value);
}

static bool list_check(const void *root, uint64_t *keys, char *detail, size_t detail_size,
                       char *why, size_t why_size)
{
    snprintf(detail, detail_size, "sorted=yes");
    return lcl_check(root, keys, why, why_size);
}

static void list_foreach(const void *root, stress_visit_fn fn, void *ctx)
{
    lcl_foreach(root, fn, ctx);
}

int main(int argc, char **argv)
{
    static const stress_structure list = {
        .name = "lclist",
        .root_name = "stress.lclist",
        .root_size = sizeof(lcl_list),
        .default_keys = 1000,
        .default_ops = 40000,
        .is_initialised = list_is_initialised,
        .init = list_init,
        .put = list_put,
        .get = list_get,
        .check = list_check,
        .foreach = list_foreach,
    };
    return stress_main(argc, argv, &list);
}
