/* SPDX-License-Identifier: BSD-3-Clause */
/* image.c -- scene rendering, segmentation, feature extraction (see image.h). */
#include "image.h"

#include "prng.h"

#include <stdlib.h>
#include <string.h>

#define MIN_REGION_AREA 12

void image_render(image_t *img, uint64_t scene, uint64_t noise_seed, int jitter)
{
    prng_t shapes = prng_seed(0xFE77E7ull ^ scene);
    prng_t noise = prng_seed(noise_seed);
    uint8_t bg[3];
    for (int c = 0; c < 3; c++)
        bg[c] = (uint8_t)prng_below(&shapes, 256);
    for (int y = 0; y < IMAGE_SIDE; y++)
        for (int x = 0; x < IMAGE_SIDE; x++)
            memcpy(img->rgb[y][x], bg, 3);
    int n_rects = 3 + (int)prng_below(&shapes, 5);
    for (int r = 0; r < n_rects; r++) {
        int x0 = (int)prng_below(&shapes, IMAGE_SIDE - 8);
        int y0 = (int)prng_below(&shapes, IMAGE_SIDE - 8);
        int w = 6 + (int)prng_below(&shapes, IMAGE_SIDE / 2);
        int h = 6 + (int)prng_below(&shapes, IMAGE_SIDE / 2);
        uint8_t colour[3];
        for (int c = 0; c < 3; c++)
            colour[c] = (uint8_t)prng_below(&shapes, 256);
        if (jitter > 0) {
            x0 += (int)prng_below(&noise, 2 * (uint64_t)jitter + 1) - jitter;
            y0 += (int)prng_below(&noise, 2 * (uint64_t)jitter + 1) - jitter;
        }
        for (int y = y0 < 0 ? 0 : y0; y < y0 + h && y < IMAGE_SIDE; y++)
            for (int x = x0 < 0 ? 0 : x0; x < x0 + w && x < IMAGE_SIDE; x++)
                memcpy(img->rgb[y][x], colour, 3);
    }
    for (int y = 0; y < IMAGE_SIDE; y++)
        for (int x = 0; x < IMAGE_SIDE; x++)
            for (int c = 0; c < 3; c++) {
                int v = img->rgb[y][x][c] + (int)prng_below(&noise, 17) - 8;
                img->rgb[y][x][c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
}

static int quantised(const image_t *img, int x, int y)
{
    const uint8_t *p = img->rgb[y][x];
    return (p[0] >> 6) << 4 | (p[1] >> 6) << 2 | (p[2] >> 6);
}

typedef struct component {
    int label, area, first; /* first: the pixel index it was found at */
} component_t;

static int by_area(const void *a, const void *b)
{
    const component_t *x = a, *y = b;
    if (x->area != y->area)
        return y->area - x->area;
    return x->first - y->first;
}

void image_segment(const image_t *img, segmentation_t *seg)
{
    enum { N = IMAGE_SIDE * IMAGE_SIDE };
    static const int dx[4] = {1, -1, 0, 0}, dy[4] = {0, 0, 1, -1};
    int16_t *label = &seg->label[0][0];
    int stack[N];
    component_t comps[N];
    int n_comps = 0;
    for (int i = 0; i < N; i++)
        label[i] = -1;
    /* Flood fill each component of equal quantised colour (4-connected). */
    for (int start = 0; start < N; start++) {
        if (label[start] != -1)
            continue;
        int colour = quantised(img, start % IMAGE_SIDE, start / IMAGE_SIDE);
        int top = 0, area = 0;
        stack[top++] = start;
        label[start] = (int16_t)n_comps;
        while (top > 0) {
            int p = stack[--top];
            area++;
            int x = p % IMAGE_SIDE, y = p / IMAGE_SIDE;
            for (int d = 0; d < 4; d++) {
                int nx = x + dx[d], ny = y + dy[d];
                if (nx < 0 || ny < 0 || nx >= IMAGE_SIDE || ny >= IMAGE_SIDE)
                    continue;
                int q = ny * IMAGE_SIDE + nx;
                if (label[q] == -1 && quantised(img, nx, ny) == colour) {
                    label[q] = (int16_t)n_comps;
                    stack[top++] = q;
                }
            }
        }
        comps[n_comps] = (component_t){n_comps, area, start};
        n_comps++;
    }
    /* Keep the largest components; small ones (noise) become unlabelled. */
    qsort(comps, (size_t)n_comps, sizeof *comps, by_area);
    int16_t *remap = malloc((size_t)n_comps * sizeof *remap);
    int kept = 0;
    for (int c = 0; c < n_comps; c++) {
        int keep = kept < MAX_REGIONS && comps[c].area >= MIN_REGION_AREA;
        remap[comps[c].label] = (int16_t)(keep ? kept++ : -1);
    }
    for (int i = 0; i < N; i++)
        label[i] = remap[label[i]];
    free(remap);
    seg->n_regions = kept;
}

void image_extract(const image_t *img, const segmentation_t *seg, signature_t *sig)
{
    double sum[MAX_REGIONS][FEATURE_DIM] = {{0}};
    int area[MAX_REGIONS] = {0};
    int total = 0;
    for (int y = 0; y < IMAGE_SIDE; y++)
        for (int x = 0; x < IMAGE_SIDE; x++) {
            int r = seg->label[y][x];
            if (r < 0)
                continue;
            for (int c = 0; c < 3; c++)
                sum[r][c] += img->rgb[y][x][c] / 255.0;
            sum[r][3] += (double)x / (IMAGE_SIDE - 1);
            sum[r][4] += (double)y / (IMAGE_SIDE - 1);
            area[r]++;
            total++;
        }
    sig->n = seg->n_regions;
    for (int r = 0; r < sig->n; r++) {
        for (int f = 0; f < FEATURE_DIM; f++)
            sig->feature[r][f] = (float)(sum[r][f] / area[r]);
        sig->weight[r] = (float)area[r] / (float)total;
    }
}
