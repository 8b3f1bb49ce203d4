/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ferret -- PARSEC's content-based image similarity search, as a six-stage
 * pipeline:
 *
 *   load    (1 thread)  produces the query images (rendered scenes)
 *   segment (T threads) splits each image into regions (image.c)
 *   extract (T threads) computes each region's features (image.c)
 *   query   (T threads) selects candidate images with LSH (index.c)
 *   rank    (T threads) orders the candidates by signature distance (index.c)
 *   output  (1 thread)  stores each query's top-k list
 *
 * with bounded queues (mutex + condition variables, common/queue.c) between
 * the stages.  The database (signatures of generated scenes, with an LSH
 * index over their region features) is built before the pipeline starts,
 * as PARSEC loads its prebuilt database.  Each query is a scene of the
 * database re-rendered with displaced shapes and new noise.
 *
 * Deterministic: every query is processed independently with the same code,
 * and the output stage files results by query number, so the order in which
 * queries finish does not matter.
 */
#include "checksum.h"
#include "image.h"
#include "index.h"
#include "pm_alloc.h"
#include "queue.h"
#include "workload.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGE_QUEUE 32

typedef struct query {
    uint32_t id;
    image_t image;
    segmentation_t segmentation;
    signature_t signature;
    uint32_t candidates[MAX_CANDIDATES];
    size_t n_candidates;
} query_t;

typedef struct result {
    uint32_t n;
    ranked_t top[TOP_K];
} result_t;

typedef struct ferret_state {
    long n_db, n_queries;
    signature_t *db;
    result_t *results; /* by query id */
    lsh_index index;
    wl_queue to_segment, to_extract, to_query, to_rank, to_output;
} ferret_state;

static uint64_t query_scene(const ferret_state *s, uint32_t q)
{
    return ((uint64_t)q * 7919u) % (uint64_t)s->n_db;
}

static void *load_stage(void *arg)
{
    ferret_state *s = arg;
    for (long q = 0; q < s->n_queries; q++) {
        query_t *item = malloc(sizeof *item);
        if (item == NULL) {
            fprintf(stderr, "ferret: out of memory\n");
            exit(1);
        }
        item->id = (uint32_t)q;
        image_render(&item->image, query_scene(s, item->id), 0x9E1700ull + (uint64_t)q, 2);
        wl_queue_push(&s->to_segment, item);
    }
    wl_queue_producer_done(&s->to_segment);
    return NULL;
}

static void *segment_stage(void *arg)
{
    ferret_state *s = arg;
    query_t *q;
    while ((q = wl_queue_pop(&s->to_segment)) != NULL) {
        image_segment(&q->image, &q->segmentation);
        wl_queue_push(&s->to_extract, q);
    }
    wl_queue_producer_done(&s->to_extract);
    return NULL;
}

static void *extract_stage(void *arg)
{
    ferret_state *s = arg;
    query_t *q;
    while ((q = wl_queue_pop(&s->to_extract)) != NULL) {
        image_extract(&q->image, &q->segmentation, &q->signature);
        wl_queue_push(&s->to_query, q);
    }
    wl_queue_producer_done(&s->to_query);
    return NULL;
}

static void *query_stage(void *arg)
{
    ferret_state *s = arg;
    query_t *q;
    while ((q = wl_queue_pop(&s->to_query)) != NULL) {
        q->n_candidates = lsh_candidates(&s->index, &q->signature, q->candidates);
        wl_queue_push(&s->to_rank, q);
    }
    wl_queue_producer_done(&s->to_rank);
    return NULL;
}

typedef struct ranked_query {
    uint32_t id;
    result_t result;
} ranked_query;

static void *rank_stage(void *arg)
{
    ferret_state *s = arg;
    query_t *q;
    while ((q = wl_queue_pop(&s->to_rank)) != NULL) {
        ranked_query *r = malloc(sizeof *r);
        if (r == NULL) {
            fprintf(stderr, "ferret: out of memory\n");
            exit(1);
        }
        r->id = q->id;
        r->result.n = (uint32_t)rank_candidates(&s->index, &q->signature, q->candidates,
                                                q->n_candidates, r->result.top);
        free(q);
        wl_queue_push(&s->to_output, r);
    }
    wl_queue_producer_done(&s->to_output);
    return NULL;
}

static void *output_stage(void *arg)
{
    ferret_state *s = arg;
    ranked_query *r;
    while ((r = wl_queue_pop(&s->to_output)) != NULL) {
        s->results[r->id] = r->result;
        free(r);
    }
    return NULL;
}

typedef struct db_worker {
    ferret_state *s;
    int id, threads;
} db_worker;

/* Building the database is embarrassingly parallel: a slice per thread. */
static void *build_db_slice(void *arg)
{
    db_worker *w = arg;
    long begin, end;
    wl_slice(w->s->n_db, w->threads, w->id, &begin, &end);
    image_t *img = malloc(sizeof *img);
    segmentation_t *seg = malloc(sizeof *seg);
    for (long i = begin; i < end; i++) {
        image_render(img, (uint64_t)i, 0xDB0000ull + (uint64_t)i, 0);
        image_segment(img, seg);
        image_extract(img, seg, &w->s->db[i]);
    }
    free(img);
    free(seg);
    return NULL;
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "ferret");
    ferret_state *s = PM_ALLOC(sizeof *s, "ferret.state");
    s->n_db = wl_scaled(&opt, 500, 6000);
    s->n_queries = wl_scaled(&opt, 100, 2000);
    s->db = PM_ALLOC((size_t)s->n_db * sizeof *s->db, "ferret.db");
    s->results = PM_ALLOC((size_t)s->n_queries * sizeof *s->results, "ferret.results");
    int t = opt.threads;
    wl_info(&opt, "ferret: %ld database images, %ld queries", s->n_db, s->n_queries);

    double start = wl_now();
    pthread_t tids[WL_MAX_THREADS];
    db_worker builders[WL_MAX_THREADS];
    for (int i = 0; i < t; i++) {
        builders[i] = (db_worker){s, i, t};
        wl_thread_create(&tids[i], build_db_slice, &builders[i]);
    }
    for (int i = 0; i < t; i++)
        wl_thread_join(tids[i]);
    lsh_build(&s->index, s->db, (size_t)s->n_db, 0x15Bull);

    wl_queue_init(&s->to_segment, STAGE_QUEUE, 1);
    wl_queue_init(&s->to_extract, STAGE_QUEUE, t);
    wl_queue_init(&s->to_query, STAGE_QUEUE, t);
    wl_queue_init(&s->to_rank, STAGE_QUEUE, t);
    wl_queue_init(&s->to_output, STAGE_QUEUE, t);
    pthread_t loader, outputter, seg[WL_MAX_THREADS], ext[WL_MAX_THREADS],
        qry[WL_MAX_THREADS], rnk[WL_MAX_THREADS];
    wl_thread_create(&loader, load_stage, s);
    for (int i = 0; i < t; i++) {
        wl_thread_create(&seg[i], segment_stage, s);
        wl_thread_create(&ext[i], extract_stage, s);
        wl_thread_create(&qry[i], query_stage, s);
        wl_thread_create(&rnk[i], rank_stage, s);
    }
    wl_thread_create(&outputter, output_stage, s);
    wl_thread_join(loader);
    for (int i = 0; i < t; i++) {
        wl_thread_join(seg[i]);
        wl_thread_join(ext[i]);
        wl_thread_join(qry[i]);
        wl_thread_join(rnk[i]);
    }
    wl_thread_join(outputter);
    double elapsed = wl_now() - start;

    checksum_t ck = checksum_init();
    long found = 0;
    for (long q = 0; q < s->n_queries; q++) {
        const result_t *r = &s->results[q];
        checksum_u64(&ck, r->n);
        for (uint32_t k = 0; k < r->n; k++) {
            checksum_u64(&ck, r->top[k].image);
            checksum_double(&ck, r->top[k].distance);
        }
        if (r->n > 0 && r->top[0].image == query_scene(s, (uint32_t)q))
            found++;
    }
    wl_info(&opt, "the original scene ranked first for %ld of %ld queries", found, s->n_queries);
    lsh_free(&s->index);
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
