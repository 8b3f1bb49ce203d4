/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * histogram -- Phoenix's histogram: the frequency of each of the 256 values
 * of the red, green and blue channels of a 24-bit bitmap.
 *
 * The bitmap is generated (smooth colour gradients plus noise, so the
 * histogram is neither flat nor trivial).  Map tasks are bands of rows; map
 * emits (channel * 256 + value, 1) for every channel of every pixel, and the
 * combiner sums counts inside each worker's buffer, as Phoenix's combiner
 * does.  Reduce sums the per-worker counts.  Deterministic: integer counts.
 */
#include "checksum.h"
#include "mapreduce.h"
#include "pm_alloc.h"
#include "prng.h"
#include "workload.h"

#include <stdio.h>

typedef struct image {
    long width, height;
    unsigned char *pixels; /* width * height * 3 bytes, B G R as in a BMP */
} image_t;

#define ROWS_PER_TASK 16

static void generate_image(image_t *img)
{
    prng_t rng = prng_seed(0x4157066A4Dull);
    unsigned char *p = img->pixels;
    for (long y = 0; y < img->height; y++) {
        for (long x = 0; x < img->width; x++) {
            uint64_t noise = prng_next(&rng);
            p[0] = (unsigned char)((x * 255 / img->width + (noise & 31)) & 255);
            p[1] = (unsigned char)((y * 255 / img->height + ((noise >> 8) & 63)) & 255);
            p[2] = (unsigned char)(((x + y) / 4 + ((noise >> 16) & 15)) & 255);
            p += 3;
        }
    }
}

static void histogram_map(void *arg, size_t task, mr_emitter *e)
{
    const image_t *img = arg;
    long y0 = (long)task * ROWS_PER_TASK;
    long y1 = y0 + ROWS_PER_TASK < img->height ? y0 + ROWS_PER_TASK : img->height;
    const unsigned char *p = img->pixels + (size_t)y0 * (size_t)img->width * 3;
    const unsigned char *end = img->pixels + (size_t)y1 * (size_t)img->width * 3;
    for (; p < end; p += 3) {
        mr_emit(e, 512 + p[2], 1); /* red */
        mr_emit(e, 256 + p[1], 1); /* green */
        mr_emit(e, 0 + p[0], 1);   /* blue */
    }
}

static mr_val sum(mr_val acc, mr_val v)
{
    return acc + v;
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "histogram");
    image_t *img = PM_ALLOC(sizeof *img, "histogram.image");
    img->width = 4096;
    img->height = wl_scaled(&opt, 64, 6144);
    img->pixels = PM_INPUT_ALLOC((size_t)(img->width * img->height * 3), "histogram.pixels");
    generate_image(img);
    wl_info(&opt, "histogram: %ld x %ld pixels", img->width, img->height);

    double start = wl_now();
    mr_job job = {
        .threads = opt.threads,
        .map_tasks = (size_t)((img->height + ROWS_PER_TASK - 1) / ROWS_PER_TASK),
        .map = histogram_map,
        .arg = img,
        .combine = sum,
        .reduce_tasks = 16,
    };
    mr_result r = mr_run(&job);
    double elapsed = wl_now() - start;

    checksum_t ck = checksum_init();
    uint64_t total = 0;
    for (size_t i = 0; i < r.n; i++) {
        checksum_u64(&ck, r.pairs[i].key);
        checksum_u64(&ck, r.pairs[i].val);
        total += r.pairs[i].val;
    }
    wl_info(&opt, "%zu distinct channel values, %llu samples", r.n,
            (unsigned long long)total);
    mr_result_free(&r);
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
