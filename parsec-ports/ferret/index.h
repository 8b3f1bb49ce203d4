/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * index.h -- ferret's similarity search over a database of image signatures:
 * candidate selection with locality-sensitive hashing (p-stable projections,
 * Datar et al. 2004) of region features, then ranking of the candidates by an
 * earth mover's style distance between signatures.
 */
#ifndef PARSEC_PORTS_FERRET_INDEX_H
#define PARSEC_PORTS_FERRET_INDEX_H

#include "image.h"

#include <stddef.h>
#include <stdint.h>

#define LSH_TABLES 4
#define LSH_PROJECTIONS 5
#define MAX_CANDIDATES 64
#define TOP_K 10

typedef struct lsh_item {
    uint64_t key;
    uint32_t image;
} lsh_item;

typedef struct lsh_index {
    const signature_t *db; /* n_images signatures */
    size_t n_images;
    float a[LSH_TABLES][LSH_PROJECTIONS][FEATURE_DIM];
    float b[LSH_TABLES][LSH_PROJECTIONS];
    float width;
    lsh_item *items[LSH_TABLES]; /* sorted by key */
    size_t n_items[LSH_TABLES];
} lsh_index;

typedef struct ranked {
    uint32_t image;
    float distance;
} ranked_t;

void lsh_build(lsh_index *idx, const signature_t *db, size_t n_images, uint64_t seed);
void lsh_free(lsh_index *idx);

/* Database images sharing buckets with the query, most votes first. */
size_t lsh_candidates(const lsh_index *idx, const signature_t *query,
                      uint32_t out[MAX_CANDIDATES]);

/* Greedy transport distance: an upper bound of the earth mover's distance. */
float signature_distance(const signature_t *a, const signature_t *b);

/* The TOP_K nearest candidates by signature_distance, nearest first. */
size_t rank_candidates(const lsh_index *idx, const signature_t *query,
                       const uint32_t *candidates, size_t n, ranked_t out[TOP_K]);

#endif /* PARSEC_PORTS_FERRET_INDEX_H */
