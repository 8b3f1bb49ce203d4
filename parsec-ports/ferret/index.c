/* SPDX-License-Identifier: BSD-3-Clause */
/* index.c -- LSH candidate selection and ranking (see index.h). */
#include "index.h"

#include "prng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t bucket_key(const lsh_index *idx, int table, const float *v)
{
    uint64_t key = 0xCBF29CE484222325ull;
    for (int p = 0; p < LSH_PROJECTIONS; p++) {
        float dot = idx->b[table][p];
        for (int f = 0; f < FEATURE_DIM; f++)
            dot += idx->a[table][p][f] * v[f];
        int64_t h = (int64_t)floorf(dot / idx->width);
        key = (key ^ (uint64_t)h) * 0x100000001B3ull;
    }
    return key;
}

static int by_key(const void *a, const void *b)
{
    const lsh_item *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->image < y->image ? -1 : x->image > y->image;
}

static float gaussian(prng_t *rng)
{
    double u1 = prng_unit(rng), u2 = prng_unit(rng);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void lsh_build(lsh_index *idx, const signature_t *db, size_t n_images, uint64_t seed)
{
    prng_t rng = prng_seed(seed);
    idx->db = db;
    idx->n_images = n_images;
    idx->width = 0.3f;
    for (int t = 0; t < LSH_TABLES; t++)
        for (int p = 0; p < LSH_PROJECTIONS; p++) {
            for (int f = 0; f < FEATURE_DIM; f++)
                idx->a[t][p][f] = gaussian(&rng);
            idx->b[t][p] = (float)prng_unit(&rng) * idx->width;
        }
    for (int t = 0; t < LSH_TABLES; t++) {
        size_t n = 0;
        for (size_t i = 0; i < n_images; i++)
            n += (size_t)db[i].n;
        idx->items[t] = malloc((n ? n : 1) * sizeof(lsh_item));
        if (idx->items[t] == NULL) {
            fprintf(stderr, "ferret: out of memory\n");
            exit(1);
        }
        size_t k = 0;
        for (size_t i = 0; i < n_images; i++)
            for (int r = 0; r < db[i].n; r++)
                idx->items[t][k++] = (lsh_item){bucket_key(idx, t, db[i].feature[r]), (uint32_t)i};
        qsort(idx->items[t], n, sizeof(lsh_item), by_key);
        idx->n_items[t] = n;
    }
}

void lsh_free(lsh_index *idx)
{
    for (int t = 0; t < LSH_TABLES; t++)
        free(idx->items[t]);
}

typedef struct vote {
    uint32_t image, votes;
} vote_t;

static int by_votes(const void *a, const void *b)
{
    const vote_t *x = a, *y = b;
    if (x->votes != y->votes)
        return x->votes > y->votes ? -1 : 1;
    return x->image < y->image ? -1 : x->image > y->image;
}

static int by_image(const void *a, const void *b)
{
    const vote_t *x = a, *y = b;
    return x->image < y->image ? -1 : x->image > y->image;
}

size_t lsh_candidates(const lsh_index *idx, const signature_t *query,
                      uint32_t out[MAX_CANDIDATES])
{
    size_t cap = 256, n = 0;
    vote_t *hits = malloc(cap * sizeof *hits);
    for (int t = 0; t < LSH_TABLES; t++) {
        for (int r = 0; r < query->n; r++) {
            uint64_t key = bucket_key(idx, t, query->feature[r]);
            /* First item with this key (binary search), then the whole run. */
            size_t lo = 0, hi = idx->n_items[t];
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (idx->items[t][mid].key < key)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            for (size_t i = lo; i < idx->n_items[t] && idx->items[t][i].key == key; i++) {
                if (n == cap) {
                    cap *= 2;
                    hits = realloc(hits, cap * sizeof *hits);
                }
                hits[n++] = (vote_t){idx->items[t][i].image, 1};
            }
        }
    }
    /* Count votes per image, then keep the best voted. */
    qsort(hits, n, sizeof *hits, by_image);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        if (distinct > 0 && hits[distinct - 1].image == hits[i].image)
            hits[distinct - 1].votes++;
        else
            hits[distinct++] = hits[i];
    }
    qsort(hits, distinct, sizeof *hits, by_votes);
    size_t m = distinct < MAX_CANDIDATES ? distinct : MAX_CANDIDATES;
    for (size_t i = 0; i < m; i++)
        out[i] = hits[i].image;
    free(hits);
    return m;
}

typedef struct flow_edge {
    float cost;
    int i, j;
} flow_edge;

static int by_cost(const void *a, const void *b)
{
    const flow_edge *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost < y->cost ? -1 : 1;
    if (x->i != y->i)
        return x->i - y->i;
    return x->j - y->j;
}

float signature_distance(const signature_t *a, const signature_t *b)
{
    if (a->n == 0 || b->n == 0)
        return a->n == b->n ? 0.0f : 1e9f;
    flow_edge edges[MAX_REGIONS * MAX_REGIONS];
    int n = 0;
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++) {
            float d = 0;
            for (int f = 0; f < FEATURE_DIM; f++) {
                float x = a->feature[i][f] - b->feature[j][f];
                d += x * x;
            }
            edges[n++] = (flow_edge){sqrtf(d), i, j};
        }
    qsort(edges, (size_t)n, sizeof *edges, by_cost);
    float supply[MAX_REGIONS], demand[MAX_REGIONS];
    memcpy(supply, a->weight, sizeof supply);
    memcpy(demand, b->weight, sizeof demand);
    float work = 0, moved = 0;
    for (int e = 0; e < n; e++) {
        float f = fminf(supply[edges[e].i], demand[edges[e].j]);
        if (f <= 0)
            continue;
        supply[edges[e].i] -= f;
        demand[edges[e].j] -= f;
        work += f * edges[e].cost;
        moved += f;
    }
    return moved > 0 ? work / moved : 1e9f;
}

static int by_distance(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;
    if (x->distance != y->distance)
        return x->distance < y->distance ? -1 : 1;
    return x->image < y->image ? -1 : x->image > y->image;
}

size_t rank_candidates(const lsh_index *idx, const signature_t *query,
                       const uint32_t *candidates, size_t n, ranked_t out[TOP_K])
{
    ranked_t all[MAX_CANDIDATES];
    for (size_t i = 0; i < n; i++)
        all[i] = (ranked_t){candidates[i], signature_distance(query, &idx->db[candidates[i]])};
    qsort(all, n, sizeof *all, by_distance);
    size_t k = n < TOP_K ? n : TOP_K;
    memcpy(out, all, k * sizeof *out);
    return k;
}
