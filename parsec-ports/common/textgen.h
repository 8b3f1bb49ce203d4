/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * textgen.h -- deterministic synthetic text for word_count, string_match and
 * reverse_index: a vocabulary of pseudo-words and a skewed (roughly Zipf-like)
 * choice among them, so that a few words are frequent and most are rare, as
 * in natural text.
 */
#ifndef PARSEC_PORTS_TEXTGEN_H
#define PARSEC_PORTS_TEXTGEN_H

#include "prng.h"

#include <stddef.h>

typedef struct vocabulary {
    char **words;
    size_t n;
} vocabulary_t;

/* n distinct-ish lowercase words of 2..11 letters. */
vocabulary_t vocabulary_make(size_t n, uint64_t seed);
void vocabulary_free(vocabulary_t *v);

/* A vocabulary index with a skewed distribution: low indices are frequent. */
size_t vocabulary_pick(const vocabulary_t *v, prng_t *rng);

/*
 * Fills buf (capacity cap, NUL-terminated) with words separated by single
 * spaces and a newline every ~12 words; returns the text length and the
 * number of words through *n_words.
 */
size_t text_generate(char *buf, size_t cap, const vocabulary_t *v, prng_t *rng,
                     size_t *n_words);

#endif /* PARSEC_PORTS_TEXTGEN_H */
