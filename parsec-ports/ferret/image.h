/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * image.h -- ferret's images and what the pipeline makes of them: synthetic
 * scenes (coloured rectangles on a background, plus noise), segmentation into
 * regions of similar colour, and one feature vector per region.
 */
#ifndef PARSEC_PORTS_FERRET_IMAGE_H
#define PARSEC_PORTS_FERRET_IMAGE_H

#include <stdint.h>

#define IMAGE_SIDE 48
#define MAX_REGIONS 12
#define FEATURE_DIM 5 /* mean r, g, b; centroid x, y (all in [0, 1]) */

typedef struct image {
    uint8_t rgb[IMAGE_SIDE][IMAGE_SIDE][3];
} image_t;

typedef struct segmentation {
    int16_t label[IMAGE_SIDE][IMAGE_SIDE]; /* region index, or -1 */
    int n_regions;
} segmentation_t;

typedef struct signature {
    int n;                               /* regions */
    float feature[MAX_REGIONS][FEATURE_DIM];
    float weight[MAX_REGIONS];           /* area share, sums to 1 */
} signature_t;

/*
 * Renders scene `scene` (its shapes are a function of the number) with pixel
 * noise from `noise_seed`; `jitter` pixels of random displacement per shape
 * makes a query resemble, not equal, its database original.
 */
void image_render(image_t *img, uint64_t scene, uint64_t noise_seed, int jitter);

/* Connected components of quantised colour; the MAX_REGIONS largest are kept. */
void image_segment(const image_t *img, segmentation_t *seg);

void image_extract(const image_t *img, const segmentation_t *seg, signature_t *sig);

#endif /* PARSEC_PORTS_FERRET_IMAGE_H */
