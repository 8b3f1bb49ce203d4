/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pca -- Phoenix's principal component analysis kernel: the mean of every row
 * of an integer matrix, then the covariance matrix between rows, in two
 * map-reduce jobs.
 *
 *   job 1: map tasks are bands of rows; emit (row, mean of the row).
 *   job 2: map tasks are rows i; emit ((i, j), cov(i, j)) for j >= i, where
 *          cov(i, j) = sum_k (m[i][k] - mean_i)(m[j][k] - mean_j) / (cols - 1)
 *          with integer means and division, as Phoenix computes it.
 * Deterministic: integer arithmetic throughout.
 */
#include "checksum.h"
#include "mapreduce.h"
#include "pm_alloc.h"
#include "prng.h"
#include "workload.h"

#include <stdio.h>

typedef struct pca_state {
    long rows, cols;
    int32_t *matrix; /* rows x cols */
    int64_t *means;  /* rows */
} pca_state;

#define MEAN_ROWS_PER_TASK 16

static void mean_map(void *arg, size_t task, mr_emitter *e)
{
    pca_state *s = arg;
    long r0 = (long)task * MEAN_ROWS_PER_TASK;
    long r1 = r0 + MEAN_ROWS_PER_TASK < s->rows ? r0 + MEAN_ROWS_PER_TASK : s->rows;
    for (long i = r0; i < r1; i++) {
        int64_t total = 0;
        for (long k = 0; k < s->cols; k++)
            total += s->matrix[i * s->cols + k];
        mr_emit(e, (mr_key)i, (mr_val)(total / s->cols));
    }
}

static void covariance_map(void *arg, size_t i, mr_emitter *e)
{
    pca_state *s = arg;
    const int32_t *ri = &s->matrix[(long)i * s->cols];
    int64_t mi = s->means[i];
    for (long j = (long)i; j < s->rows; j++) {
        const int32_t *rj = &s->matrix[j * s->cols];
        int64_t mj = s->means[j];
        int64_t acc = 0;
        for (long k = 0; k < s->cols; k++)
            acc += (ri[k] - mi) * (rj[k] - mj);
        mr_emit(e, (mr_key)((long)i * s->rows + j), (mr_val)(acc / (s->cols - 1)));
    }
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "pca");
    pca_state *s = PM_ALLOC(sizeof *s, "pca.state");
    s->rows = opt.scale == 0 ? 64 : 1024 * opt.scale;
    s->cols = opt.scale == 0 ? 512 : 2048;
    s->matrix = PM_ALLOC((size_t)(s->rows * s->cols) * sizeof *s->matrix, "pca.matrix");
    s->means = PM_ALLOC((size_t)s->rows * sizeof *s->means, "pca.means");
    prng_t rng = prng_seed(0x9CA);
    for (long i = 0; i < s->rows * s->cols; i++)
        s->matrix[i] = (int32_t)prng_below(&rng, 1000);
    wl_info(&opt, "pca: %ld x %ld matrix", s->rows, s->cols);

    double start = wl_now();
    mr_job means_job = {
        .threads = opt.threads,
        .map_tasks = (size_t)((s->rows + MEAN_ROWS_PER_TASK - 1) / MEAN_ROWS_PER_TASK),
        .map = mean_map,
        .arg = s,
        .reduce_tasks = 16,
    };
    mr_result means = mr_run(&means_job);
    for (size_t i = 0; i < means.n; i++)
        s->means[means.pairs[i].key] = (int64_t)means.pairs[i].val;

    mr_job cov_job = {
        .threads = opt.threads,
        .map_tasks = (size_t)s->rows,
        .map = covariance_map,
        .arg = s,
    };
    mr_result cov = mr_run(&cov_job);
    double elapsed = wl_now() - start;

    checksum_t ck = checksum_init();
    for (size_t i = 0; i < means.n; i++)
        checksum_u64(&ck, means.pairs[i].val);
    for (size_t i = 0; i < cov.n; i++) {
        checksum_u64(&ck, cov.pairs[i].key);
        checksum_u64(&ck, cov.pairs[i].val);
    }
    wl_info(&opt, "%zu covariance entries, cov(0,0)=%lld", cov.n,
            cov.n ? (long long)(int64_t)cov.pairs[0].val : 0LL);
    mr_result_free(&means);
    mr_result_free(&cov);
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
