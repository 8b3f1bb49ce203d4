/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * matrix_multiply -- Phoenix's matrix multiply: C = A x B for square integer
 * matrices.
 *
 * Map tasks are bands of rows of C; a map computes its rows directly into the
 * shared result (rows are disjoint, so no lock, as in Phoenix) and emits
 * (row, digest of the row) so the reduce/merge phases produce the rows in
 * order.  Deterministic: integer arithmetic.
 */
#include "checksum.h"
#include "mapreduce.h"
#include "pm_alloc.h"
#include "prng.h"
#include "workload.h"

#include <stdio.h>

typedef struct matrices {
    long n;
    int32_t *a, *b, *c; /* row-major n x n */
} matrices_t;

#define ROWS_PER_TASK 8

static void fill_matrix(int32_t *m, long n, uint64_t seed)
{
    prng_t rng = prng_seed(seed);
    for (long i = 0; i < n * n; i++)
        m[i] = (int32_t)prng_below(&rng, 201) - 100;
}

static void multiply_map(void *arg, size_t task, mr_emitter *e)
{
    matrices_t *m = arg;
    long n = m->n;
    long r0 = (long)task * ROWS_PER_TASK;
    long r1 = r0 + ROWS_PER_TASK < n ? r0 + ROWS_PER_TASK : n;
    for (long i = r0; i < r1; i++) {
        int32_t *c_row = &m->c[i * n];
        for (long j = 0; j < n; j++)
            c_row[j] = 0;
        /* i-k-j order streams through rows of B (cache friendly). */
        for (long k = 0; k < n; k++) {
            int32_t a_ik = m->a[i * n + k];
            const int32_t *b_row = &m->b[k * n];
            for (long j = 0; j < n; j++)
                c_row[j] += a_ik * b_row[j];
        }
        checksum_t ck = checksum_init();
        checksum_bytes(&ck, c_row, (size_t)n * sizeof *c_row);
        mr_emit(e, (mr_key)i, ck.h);
    }
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "matrix_multiply");
    matrices_t *m = PM_ALLOC(sizeof *m, "matrix_multiply.matrices");
    m->n = opt.scale == 0 ? 128 : 1536 * opt.scale;
    size_t bytes = (size_t)(m->n * m->n) * sizeof(int32_t);
    m->a = PM_INPUT_ALLOC(bytes, "matrix_multiply.a");
    m->b = PM_INPUT_ALLOC(bytes, "matrix_multiply.b");
    m->c = PM_ALLOC(bytes, "matrix_multiply.c");
    fill_matrix(m->a, m->n, 0xAAAA);
    fill_matrix(m->b, m->n, 0xBBBB);
    wl_info(&opt, "matrix_multiply: %ld x %ld", m->n, m->n);

    double start = wl_now();
    mr_job job = {
        .threads = opt.threads,
        .map_tasks = (size_t)((m->n + ROWS_PER_TASK - 1) / ROWS_PER_TASK),
        .map = multiply_map,
        .arg = m,
        .reduce_tasks = 16,
    };
    mr_result r = mr_run(&job);
    double elapsed = wl_now() - start;

    checksum_t ck = checksum_init();
    for (size_t i = 0; i < r.n; i++) {
        checksum_u64(&ck, r.pairs[i].key);
        checksum_u64(&ck, r.pairs[i].val);
    }
    wl_info(&opt, "C[0][0]=%d C[n-1][n-1]=%d", m->c[0], m->c[m->n * m->n - 1]);
    mr_result_free(&r);
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
