/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kmeans -- Phoenix's k-means clustering of integer points, one map-reduce
 * job per iteration.
 *
 * Map tasks are chunks of points; map assigns each point to its nearest mean
 * (squared Euclidean distance, ties to the lower cluster) and emits
 * (cluster, point index).  Reduce sums the points of a cluster and writes
 * the new mean (integer division, as Phoenix) into next_means.  Iterations
 * continue until the means stop changing or max_iterations is reached.
 *
 * Persistence: the means and the iteration cursor are the state.  At the end
 * of each iteration the new means and iterations_done are published in one
 * critical section (one FASE), so the ported build resumes after a crash from
 * the means of the last completed iteration.  Convergence is judged by the
 * means themselves, never by scratch data a crashed iteration may have
 * half-written.  Deterministic: integer arithmetic, and reduce does not
 * depend on the order of its values.
 */
#include "checksum.h"
#include "mapreduce.h"
#include "pm_alloc.h"
#include "prng.h"
#include "workload.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define DIM 3
#define POINTS_PER_TASK 4096

typedef struct kmeans_state {
    long n_points;
    long k;
    long max_iterations;
    long iterations_done; /* progress cursor, under `lock` */
    int converged;        /* under `lock` */
    int32_t *points;      /* n_points x DIM */
    int32_t *means;       /* k x DIM, the means after iterations_done iterations */
    int32_t *next_means;  /* k x DIM, written by reduce (scratch) */
    pthread_mutex_t lock;
} kmeans_state;

static void kmeans_map(void *arg, size_t task, mr_emitter *e)
{
    kmeans_state *s = arg;
    long begin = (long)task * POINTS_PER_TASK;
    long end = begin + POINTS_PER_TASK < s->n_points ? begin + POINTS_PER_TASK : s->n_points;
    for (long i = begin; i < end; i++) {
        const int32_t *p = &s->points[i * DIM];
        long best = 0;
        int64_t best_dist = INT64_MAX;
        for (long c = 0; c < s->k; c++) {
            const int32_t *m = &s->means[c * DIM];
            int64_t d = 0;
            for (int x = 0; x < DIM; x++) {
                int64_t diff = p[x] - m[x];
                d += diff * diff;
            }
            if (d < best_dist) {
                best_dist = d;
                best = c;
            }
        }
        mr_emit(e, (mr_key)best, (mr_val)i);
    }
}

static mr_val kmeans_reduce(void *arg, mr_key cluster, const mr_val *vals, size_t n)
{
    kmeans_state *s = arg;
    int64_t sum[DIM] = {0};
    for (size_t v = 0; v < n; v++)
        for (int x = 0; x < DIM; x++)
            sum[x] += s->points[(long)vals[v] * DIM + x];
    /* Each cluster is reduced by exactly one worker: disjoint writes. */
    for (int x = 0; x < DIM; x++)
        s->next_means[cluster * DIM + x] = (int32_t)(sum[x] / (int64_t)n);
    return n;
}

static kmeans_state *create_state(long n_points, long k, long max_iterations)
{
    kmeans_state *s = PM_ALLOC(sizeof *s, "kmeans.state");
    s->points = PM_ALLOC((size_t)(n_points * DIM) * sizeof(int32_t), "kmeans.points");
    s->means = PM_ALLOC((size_t)(k * DIM) * sizeof(int32_t), "kmeans.means");
    s->next_means = PM_ALLOC((size_t)(k * DIM) * sizeof(int32_t), "kmeans.next_means");
    prng_t rng = prng_seed(0x4B3EA5ull);
    for (long i = 0; i < n_points * DIM; i++)
        s->points[i] = (int32_t)prng_below(&rng, 1000);
    /* Initial means: k points spread over the input. */
    for (long c = 0; c < k; c++)
        memcpy(&s->means[c * DIM], &s->points[(c * (n_points / k)) * DIM],
               DIM * sizeof(int32_t));
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_lock(&s->lock);
    s->k = k;
    s->max_iterations = max_iterations;
    s->n_points = n_points; /* set last: a recovered state with it set is complete */
    pthread_mutex_unlock(&s->lock);
    return s;
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "kmeans");
    long n_points = wl_scaled(&opt, 8192, 300000);
    long k = opt.scale == 0 ? 16 : 64;
    long max_iterations = opt.scale == 0 ? 10 : 20;

    kmeans_state *s = PM_RECOVER(sizeof(kmeans_state), "kmeans.state");
    if (s != NULL && (s->n_points != n_points || s->k != k || s->max_iterations != max_iterations)) {
        wl_info(&opt, "recovered state is incomplete or for another input: starting over");
        s = NULL;
    }
    if (s != NULL) {
        pthread_mutex_init(&s->lock, NULL);
        wl_info(&opt, "resuming after iteration %ld", s->iterations_done);
    } else {
        s = create_state(n_points, k, max_iterations);
    }
    wl_info(&opt, "kmeans: %ld points, %d dimensions, %ld clusters", n_points, DIM, k);

    double start = wl_now();
    while (!s->converged && s->iterations_done < s->max_iterations) {
        /* An empty cluster keeps its mean. */
        memcpy(s->next_means, s->means, (size_t)(k * DIM) * sizeof(int32_t));
        mr_job job = {
            .threads = opt.threads,
            .map_tasks = (size_t)((n_points + POINTS_PER_TASK - 1) / POINTS_PER_TASK),
            .map = kmeans_map,
            .arg = s,
            .reduce = kmeans_reduce,
            .reduce_tasks = 16,
        };
        mr_result r = mr_run(&job);
        mr_result_free(&r);

        pthread_mutex_lock(&s->lock);
        s->converged =
            memcmp(s->means, s->next_means, (size_t)(k * DIM) * sizeof(int32_t)) == 0;
        memcpy(s->means, s->next_means, (size_t)(k * DIM) * sizeof(int32_t));
        s->iterations_done++;
        pthread_mutex_unlock(&s->lock);
    }
    double elapsed = wl_now() - start;

    checksum_t ck = checksum_init();
    checksum_u64(&ck, (uint64_t)s->iterations_done);
    checksum_u64(&ck, (uint64_t)s->converged);
    for (long i = 0; i < k * DIM; i++)
        checksum_u64(&ck, (uint64_t)(int64_t)s->means[i]);
    wl_info(&opt, "%ld iterations, %s", s->iterations_done,
            s->converged ? "converged" : "stopped at the iteration limit");
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
