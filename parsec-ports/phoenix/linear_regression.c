/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * linear_regression -- Phoenix's linear regression: the least-squares line
 * y = a + b x through a large set of points given as byte pairs.
 *
 * Map tasks are fixed-size chunks of points; each computes the five sums
 * (n folded in at the end) SX, SY, SXX, SYY, SXY over its chunk and emits one
 * pair per sum; the combiner and reduce add them.  The coefficients are
 * computed from the exact integer sums, so the result is deterministic.
 */
#include "checksum.h"
#include "mapreduce.h"
#include "pm_alloc.h"
#include "prng.h"
#include "workload.h"

#include <stdio.h>

typedef struct point {
    unsigned char x, y;
} point_t;

typedef struct input {
    long n_points;
    point_t *points;
} input_t;

enum sum_key { SUM_X, SUM_Y, SUM_XX, SUM_YY, SUM_XY };
#define POINTS_PER_TASK 65536

static void generate_points(input_t *in)
{
    prng_t rng = prng_seed(0x11AEA4ull);
    for (long i = 0; i < in->n_points; i++) {
        uint64_t r = prng_next(&rng);
        int x = (int)(r & 255);
        /* y = 30 + x/2 plus noise, clamped to a byte */
        int y = 30 + x / 2 + (int)((r >> 8) & 63) - 32;
        in->points[i].x = (unsigned char)x;
        in->points[i].y = (unsigned char)(y < 0 ? 0 : y > 255 ? 255 : y);
    }
}

static void regression_map(void *arg, size_t task, mr_emitter *e)
{
    const input_t *in = arg;
    long begin = (long)task * POINTS_PER_TASK;
    long end = begin + POINTS_PER_TASK < in->n_points ? begin + POINTS_PER_TASK : in->n_points;
    uint64_t sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    for (long i = begin; i < end; i++) {
        uint64_t x = in->points[i].x, y = in->points[i].y;
        sx += x;
        sy += y;
        sxx += x * x;
        syy += y * y;
        sxy += x * y;
    }
    mr_emit(e, SUM_X, sx);
    mr_emit(e, SUM_Y, sy);
    mr_emit(e, SUM_XX, sxx);
    mr_emit(e, SUM_YY, syy);
    mr_emit(e, SUM_XY, sxy);
}

static mr_val sum(mr_val acc, mr_val v)
{
    return acc + v;
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "linear_regression");
    input_t *in = PM_ALLOC(sizeof *in, "linear_regression.input");
    in->n_points = wl_scaled(&opt, 1 << 18, 3L << 26);
    in->points = PM_INPUT_ALLOC((size_t)in->n_points * sizeof *in->points,
                          "linear_regression.points");
    generate_points(in);
    wl_info(&opt, "linear_regression: %ld points", in->n_points);

    double start = wl_now();
    mr_job job = {
        .threads = opt.threads,
        .map_tasks = (size_t)((in->n_points + POINTS_PER_TASK - 1) / POINTS_PER_TASK),
        .map = regression_map,
        .arg = in,
        .combine = sum,
        .reduce_tasks = 5,
    };
    mr_result r = mr_run(&job);
    double elapsed = wl_now() - start;

    uint64_t s[5] = {0};
    for (size_t i = 0; i < r.n; i++)
        s[r.pairs[i].key] = r.pairs[i].val;
    double n = (double)in->n_points;
    double b = (n * (double)s[SUM_XY] - (double)s[SUM_X] * (double)s[SUM_Y]) /
               (n * (double)s[SUM_XX] - (double)s[SUM_X] * (double)s[SUM_X]);
    double a = ((double)s[SUM_Y] - b * (double)s[SUM_X]) / n;
    wl_info(&opt, "y = %.6f + %.6f x", a, b);

    checksum_t ck = checksum_init();
    for (int k = 0; k < 5; k++)
        checksum_u64(&ck, s[k]);
    checksum_double(&ck, a);
    checksum_double(&ck, b);
    mr_result_free(&r);
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
