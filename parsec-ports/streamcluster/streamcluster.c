/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * streamcluster -- PARSEC's online clustering: a stream of points is cut into
 * chunks, each chunk is clustered into between kmin and kmax weighted
 * medians, and the medians of all chunks are clustered again at the end.
 * Written from the published algorithm (Guha, Meyerson, Mishra, Motwani,
 * O'Callaghan, "Clustering data streams", 2003; Charikar-Guha local search).
 *
 * For each chunk, pkmedian() searches a facility cost z for which local
 * search yields kmin..kmax medians:
 *   speedy   a greedy initial solution.  Only thread 0 walks the points and
 *            decides (at random, with probability cost/z) to open a point as
 *            a median; it wakes the other threads through a condition
 *            variable, and every thread moves the points of its slice that
 *            are closer to the new median, then all meet at a barrier.
 *   pgain    local search.  Thread 0 picks a random candidate; every thread
 *            computes over its slice what opening it would save and what
 *            closing each current median would cost; thread 0 adds the
 *            per-thread parts up and decides; every thread applies the
 *            decision to its slice.  Phases are separated by pthread barriers.
 *
 * Deterministic: coordinates are integers and costs are exact 64-bit integer
 * sums, so adding per-thread partial sums gives the same total for any
 * number of threads, and every random decision is made by thread 0 alone
 * from one seeded stream.
 */
#include "checksum.h"
#include "pm_alloc.h"
#include "prng.h"
#include "workload.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIM 32
#define KMIN 10
#define KMAX 20
#define HIDDEN_CLUSTERS 16
#define MAX_Z_ATTEMPTS 6

typedef struct point {
    int32_t coord[DIM];
    int64_t weight;
} point_t;

/* Everything the threads of one pkmedian() share. */
typedef struct cluster_job {
    point_t *points;
    long n;
    int threads;
    long local_search_iterations;
    /* solution */
    long *assign;        /* index of the point's median */
    int64_t *cost;       /* weight * squared distance to it */
    bool *is_center;
    long *center_slot;   /* for a median: its index in 0..k-1 */
    long k;
    /* speedy: thread 0 announces openings through `open_cv` */
    pthread_mutex_t open_lock;
    pthread_cond_t open_cv;
    unsigned long open_generation; /* bumped for each opening, under open_lock */
    long open_point;               /* -1: speedy is over */
    /* pgain */
    long candidate;
    int64_t z;
    int64_t *switch_gain;          /* per thread */
    int64_t *close_extra;          /* per thread x KMAX*4 slots */
    bool *close_center;            /* by slot */
    bool accept;
    bool stop;
    pthread_barrier_t barrier;
    prng_t rng;                    /* thread 0 only */
} cluster_job;

#define MAX_SLOTS (KMAX * 8)

typedef struct worker {
    cluster_job *job;
    int id;
} worker_t;

static int64_t distance2(const point_t *a, const point_t *b)
{
    int64_t d = 0;
    for (int i = 0; i < DIM; i++) {
        int64_t x = a->coord[i] - b->coord[i];
        d += x * x;
    }
    return d;
}

static void open_median(cluster_job *j, long begin, long end, long m)
{
    for (long p = begin; p < end; p++) {
        int64_t d = j->points[p].weight * distance2(&j->points[p], &j->points[m]);
        if (d < j->cost[p]) {
            j->cost[p] = d;
            j->assign[p] = m;
        }
    }
}

/* Thread 0's half of speedy: decide openings, announce them, do its slice. */
static void speedy_leader(cluster_job *j, long begin, long end)
{
    for (long p = 0; p < j->n; p++) {
        j->is_center[p] = false;
        j->assign[p] = 0;
        j->cost[p] = j->points[p].weight * distance2(&j->points[p], &j->points[0]);
    }
    j->is_center[0] = true;
    j->k = 1;
    for (long i = 1; i < j->n; i++) {
        if (j->k >= MAX_SLOTS)
            break;
        if (!(prng_unit(&j->rng) < (double)j->cost[i] / (double)j->z))
            continue;
        j->is_center[i] = true;
        j->k++;
        pthread_mutex_lock(&j->open_lock);
        j->open_point = i;
        j->open_generation++;
        pthread_cond_broadcast(&j->open_cv);
        pthread_mutex_unlock(&j->open_lock);
        open_median(j, begin, end, i);
        pthread_barrier_wait(&j->barrier); /* costs are current before the next test */
    }
    pthread_mutex_lock(&j->open_lock);
    j->open_point = -1;
    j->open_generation++;
    pthread_cond_broadcast(&j->open_cv);
    pthread_mutex_unlock(&j->open_lock);
}

static void speedy_follower(cluster_job *j, long begin, long end, unsigned long *seen)
{
    for (;;) {
        pthread_mutex_lock(&j->open_lock);
        while (j->open_generation == *seen)
            pthread_cond_wait(&j->open_cv, &j->open_lock);
        *seen = j->open_generation;
        long m = j->open_point;
        pthread_mutex_unlock(&j->open_lock);
        if (m < 0)
            return;
        open_median(j, begin, end, m);
        pthread_barrier_wait(&j->barrier);
    }
}

static void number_centers(cluster_job *j)
{
    long slot = 0;
    for (long p = 0; p < j->n; p++)
        j->center_slot[p] = j->is_center[p] ? slot++ : -1;
    j->k = slot;
}

/* One thread's share of evaluating candidate x. */
static void pgain_partial(cluster_job *j, int id, long begin, long end)
{
    long x = j->candidate;
    int64_t gain = 0;
    int64_t *extra = &j->close_extra[(size_t)id * MAX_SLOTS];
    memset(extra, 0, MAX_SLOTS * sizeof *extra);
    for (long p = begin; p < end; p++) {
        int64_t d = j->points[p].weight * distance2(&j->points[p], &j->points[x]);
        if (d < j->cost[p])
            gain += j->cost[p] - d;
        else
            extra[j->center_slot[j->assign[p]]] += d - j->cost[p];
    }
    j->switch_gain[id] = gain;
}

/* Thread 0: add the parts up and decide whether opening x pays. */
static void pgain_decide(cluster_job *j)
{
    int64_t gain = -j->z;
    for (int t = 0; t < j->threads; t++)
        gain += j->switch_gain[t];
    for (long s = 0; s < j->k; s++) {
        int64_t extra = 0;
        for (int t = 0; t < j->threads; t++)
            extra += j->close_extra[(size_t)t * MAX_SLOTS + s];
        j->close_center[s] = extra < j->z;
        if (j->close_center[s])
            gain += j->z - extra;
    }
    j->accept = gain > 0 && j->k < MAX_SLOTS;
}

static void pgain_apply(cluster_job *j, long begin, long end)
{
    long x = j->candidate;
    for (long p = begin; p < end; p++) {
        int64_t d = j->points[p].weight * distance2(&j->points[p], &j->points[x]);
        if (d < j->cost[p] || j->close_center[j->center_slot[j->assign[p]]]) {
            j->cost[p] = d;
            j->assign[p] = x;
        }
    }
}

/*
 * Threads 1..T-1.  Thread 0 runs the same sequence of barriers inline in
 * pkmedian(), with the decisions in between.
 */
static void *cluster_follower(void *arg)
{
    worker_t *w = arg;
    cluster_job *j = w->job;
    long begin, end;
    wl_slice(j->n, j->threads, w->id, &begin, &end);
    unsigned long seen = 0;
    for (;;) {
        pthread_barrier_wait(&j->barrier); /* round start: z or stop is set */
        if (j->stop)
            return NULL;
        speedy_follower(j, begin, end, &seen);
        pthread_barrier_wait(&j->barrier);
        for (long it = 0; it < j->local_search_iterations; it++) {
            pthread_barrier_wait(&j->barrier); /* candidate chosen */
            pgain_partial(j, w->id, begin, end);
            pthread_barrier_wait(&j->barrier); /* parts ready */
            pthread_barrier_wait(&j->barrier); /* decision made */
            if (!j->accept)
                continue;
            pgain_apply(j, begin, end);
            pthread_barrier_wait(&j->barrier); /* solution updated */
        }
        pthread_barrier_wait(&j->barrier); /* round end */
    }
}

/*
 * Clusters points[0..n) into about kmin..kmax weighted medians, written to
 * medians (capacity MAX_SLOTS); returns how many.
 */
static long pkmedian(point_t *points, long n, int threads, long iterations, uint64_t seed,
                     point_t *medians)
{
    cluster_job j = {.points = points, .n = n, .threads = threads,
                     .local_search_iterations = iterations};
    j.assign = calloc((size_t)n, sizeof *j.assign);
    j.cost = calloc((size_t)n, sizeof *j.cost);
    j.is_center = calloc((size_t)n, sizeof *j.is_center);
    j.center_slot = calloc((size_t)n, sizeof *j.center_slot);
    j.switch_gain = calloc((size_t)threads, sizeof *j.switch_gain);
    j.close_extra = calloc((size_t)threads * MAX_SLOTS, sizeof *j.close_extra);
    j.close_center = calloc(MAX_SLOTS, sizeof *j.close_center);
    pthread_mutex_init(&j.open_lock, NULL);
    pthread_cond_init(&j.open_cv, NULL);
    pthread_barrier_init(&j.barrier, NULL, (unsigned)threads);
    j.rng = prng_seed(seed);

    /* hiz: the cost of one median at point 0, an upper bound for z. */
    int64_t hiz = 0, loz = 0;
    for (long p = 0; p < n; p++)
        hiz += points[p].weight * distance2(&points[p], &points[0]);
    j.z = hiz / 2 > 0 ? hiz / 2 : 1;

    pthread_t tids[WL_MAX_THREADS];
    worker_t workers[WL_MAX_THREADS];
    for (int t = 1; t < threads; t++) {
        workers[t] = (worker_t){&j, t};
        wl_thread_create(&tids[t], cluster_follower, &workers[t]);
    }
    /* The calling thread is worker 0; it drives the search over z. */
    long begin, end;
    wl_slice(n, threads, 0, &begin, &end);
    for (int attempt = 0; attempt < MAX_Z_ATTEMPTS; attempt++) {
        pthread_barrier_wait(&j.barrier); /* round start */
        speedy_leader(&j, begin, end);
        pthread_barrier_wait(&j.barrier);
        number_centers(&j);
        for (long it = 0; it < iterations; it++) {
            long x;
            do
                x = (long)prng_below(&j.rng, (uint64_t)n);
            while (j.is_center[x] && j.k < n);
            j.candidate = x;
            pthread_barrier_wait(&j.barrier);
            pgain_partial(&j, 0, begin, end);
            pthread_barrier_wait(&j.barrier);
            pgain_decide(&j);
            pthread_barrier_wait(&j.barrier);
            if (!j.accept)
                continue;
            pgain_apply(&j, begin, end);
            pthread_barrier_wait(&j.barrier);
            for (long p = 0; p < n; p++)
                if (j.is_center[p] && j.close_center[j.center_slot[p]])
                    j.is_center[p] = false;
            j.is_center[j.candidate] = true;
            number_centers(&j);
        }
        pthread_barrier_wait(&j.barrier); /* round end */
        if (j.k >= KMIN && j.k <= KMAX)
            break;
        /* Too many medians: opening must cost more (raise z), and vice versa. */
        if (j.k > KMAX)
            loz = j.z;
        else
            hiz = j.z;
        j.z = (hiz + loz) / 2 > 0 ? (hiz + loz) / 2 : 1;
    }
    j.stop = true;
    pthread_barrier_wait(&j.barrier);
    for (int t = 1; t < threads; t++)
        wl_thread_join(tids[t]);

    /* Each median carries the weight of the points assigned to it. */
    long k = 0;
    for (long p = 0; p < n; p++) {
        if (!j.is_center[p])
            continue;
        medians[k] = points[p];
        medians[k].weight = 0;
        j.center_slot[p] = k++;
    }
    for (long p = 0; p < n; p++)
        medians[j.center_slot[j.assign[p]]].weight += points[p].weight;

    pthread_barrier_destroy(&j.barrier);
    pthread_cond_destroy(&j.open_cv);
    pthread_mutex_destroy(&j.open_lock);
    free(j.assign);
    free(j.cost);
    free(j.is_center);
    free(j.center_slot);
    free(j.switch_gain);
    free(j.close_extra);
    free(j.close_center);
    return k;
}

/* The stream: points scattered around hidden centres. */
static void generate_chunk(point_t *chunk, long n, prng_t *rng, const point_t *hidden)
{
    for (long p = 0; p < n; p++) {
        const point_t *h = &hidden[prng_below(rng, HIDDEN_CLUSTERS)];
        for (int i = 0; i < DIM; i++)
            chunk[p].coord[i] = h->coord[i] + (int32_t)prng_below(rng, 161) - 80;
        chunk[p].weight = 1;
    }
}

typedef struct stream_state {
    long chunk_size, n_chunks, iterations;
    long chunks_done;
    long n_medians;
    point_t *medians;  /* n_chunks * MAX_SLOTS */
    point_t *chunk;    /* the current chunk */
} stream_state;

static int cmp_points(const void *a, const void *b)
{
    return memcmp(((const point_t *)a)->coord, ((const point_t *)b)->coord,
                  sizeof ((const point_t *)a)->coord);
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "streamcluster");
    stream_state *s = PM_ALLOC(sizeof *s, "streamcluster.state");
    s->chunk_size = opt.scale == 0 ? 1024 : 8192;
    s->n_chunks = opt.scale == 0 ? 2 : 6L * opt.scale;
    s->iterations = opt.scale == 0 ? 40 : 100;
    s->medians = PM_ALLOC((size_t)(s->n_chunks * MAX_SLOTS) * sizeof(point_t),
                          "streamcluster.medians");
    s->chunk = PM_ALLOC((size_t)s->chunk_size * sizeof(point_t), "streamcluster.chunk");
    wl_info(&opt, "streamcluster: %ld chunks of %ld points, %d dimensions", s->n_chunks,
            s->chunk_size, DIM);

    prng_t rng = prng_seed(0x57C1ull);
    point_t hidden[HIDDEN_CLUSTERS];
    for (int c = 0; c < HIDDEN_CLUSTERS; c++)
        for (int i = 0; i < DIM; i++)
            hidden[c].coord[i] = (int32_t)prng_below(&rng, 1000);

    checksum_t ck = checksum_init();
    double start = wl_now();
    for (; s->chunks_done < s->n_chunks; s->chunks_done++) {
        generate_chunk(s->chunk, s->chunk_size, &rng, hidden);
        long k = pkmedian(s->chunk, s->chunk_size, opt.threads, s->iterations,
                          0xC0FFEEull + (uint64_t)s->chunks_done, s->medians + s->n_medians);
        checksum_u64(&ck, (uint64_t)k);
        s->n_medians += k;
    }
    point_t final[MAX_SLOTS];
    long k = pkmedian(s->medians, s->n_medians, opt.threads, s->iterations, 0xF1A1ull, final);
    double elapsed = wl_now() - start;

    qsort(final, (size_t)k, sizeof *final, cmp_points);
    for (long c = 0; c < k; c++) {
        checksum_bytes(&ck, final[c].coord, sizeof final[c].coord);
        checksum_u64(&ck, (uint64_t)final[c].weight);
    }
    wl_info(&opt, "%ld intermediate medians, %ld final medians", s->n_medians, k);
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
