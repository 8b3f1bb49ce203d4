/* SPDX-License-Identifier: BSD-3-Clause */
/* textgen.c -- synthetic vocabulary and text (see textgen.h). */
#include "textgen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vocabulary_t vocabulary_make(size_t n, uint64_t seed)
{
    prng_t rng = prng_seed(seed);
    vocabulary_t v = {calloc(n, sizeof(char *)), n};
    if (v.words == NULL) {
        fprintf(stderr, "out of memory (vocabulary)\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        /* Frequent words are short, as in natural language. */
        size_t len = 2 + prng_below(&rng, i < 100 ? 4 : 10);
        char *w = malloc(len + 1);
        if (w == NULL) {
            fprintf(stderr, "out of memory (vocabulary)\n");
            exit(1);
        }
        for (size_t k = 0; k < len; k++)
            w[k] = (char)('a' + prng_below(&rng, 26));
        w[len] = '\0';
        v.words[i] = w;
    }
    return v;
}

void vocabulary_free(vocabulary_t *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->words[i]);
    free(v->words);
    v->words = NULL;
    v->n = 0;
}

size_t vocabulary_pick(const vocabulary_t *v, prng_t *rng)
{
    /* u^4 concentrates mass near 0: index 0 is far more likely than n-1. */
    double u = prng_unit(rng);
    size_t i = (size_t)(u * u * u * u * (double)v->n);
    return i < v->n ? i : v->n - 1;
}

size_t text_generate(char *buf, size_t cap, const vocabulary_t *v, prng_t *rng,
                     size_t *n_words)
{
    size_t len = 0, words = 0;
    for (;;) {
        const char *w = v->words[vocabulary_pick(v, rng)];
        size_t wl = strlen(w);
        if (len + wl + 2 > cap)
            break;
        memcpy(buf + len, w, wl);
        len += wl;
        words++;
        buf[len++] = (words % 12 == 0) ? '\n' : ' ';
    }
    buf[len] = '\0';
    *n_words = words;
    return len;
}
