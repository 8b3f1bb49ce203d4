/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * string_match -- Phoenix's string match: scan a text for a few key words by
 * comparing an "encrypted" form (here a keyed, deliberately multi-round
 * digest) of every word against the encrypted keys.
 *
 * Map tasks are chunks of the text cut at word boundaries; map digests each
 * word, emits (key index, 1) for a match and (N_KEYS, words seen) once per
 * task; the combiner and reduce add.  Deterministic: integer counts.
 */
#include "checksum.h"
#include "mapreduce.h"
#include "pm_alloc.h"
#include "prng.h"
#include "textgen.h"
#include "workload.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define N_KEYS 4
#define CHUNK_BYTES 65536
#define DIGEST_ROUNDS 8

static const char *const keys[N_KEYS] = {"persistent", "quiescent", "epochal", "shadowed"};

typedef struct input {
    char *text;
    size_t len;
    uint64_t key_digests[N_KEYS];
} input_t;

/* The stand-in for Phoenix's per-word encryption: costly on purpose. */
static uint64_t digest(const char *w, size_t len)
{
    uint64_t h = 0x5EC2E7ull;
    for (int round = 0; round < DIGEST_ROUNDS; round++) {
        for (size_t i = 0; i < len; i++) {
            h ^= (unsigned char)w[i] + (uint64_t)round;
            h *= 0x9E3779B97F4A7C15ull;
            h ^= h >> 29;
        }
    }
    return h;
}

/* The first word start at or after pos (pos itself if it starts a word). */
static size_t word_boundary(const input_t *in, size_t pos)
{
    if (pos >= in->len)
        return in->len;
    while (pos > 0 && pos < in->len && isalpha((unsigned char)in->text[pos - 1]))
        pos++;
    return pos;
}

static void match_map(void *arg, size_t task, mr_emitter *e)
{
    const input_t *in = arg;
    size_t begin = word_boundary(in, task * CHUNK_BYTES);
    size_t end = word_boundary(in, (task + 1) * CHUNK_BYTES);
    uint64_t words = 0;
    size_t i = begin;
    while (i < end) {
        while (i < end && !isalpha((unsigned char)in->text[i]))
            i++;
        size_t start = i;
        while (i < end && isalpha((unsigned char)in->text[i]))
            i++;
        if (i == start)
            break;
        words++;
        uint64_t d = digest(in->text + start, i - start);
        for (int k = 0; k < N_KEYS; k++)
            if (d == in->key_digests[k] && strlen(keys[k]) == i - start &&
                memcmp(keys[k], in->text + start, i - start) == 0)
                mr_emit(e, (mr_key)k, 1);
    }
    mr_emit(e, N_KEYS, words);
}

static mr_val sum(mr_val acc, mr_val v)
{
    return acc + v;
}

static void generate_text(input_t *in, size_t cap)
{
    vocabulary_t vocab = vocabulary_make(20000, 0x57A1ull);
    prng_t rng = prng_seed(0x57A2ull);
    size_t words;
    in->len = text_generate(in->text, cap, &vocab, &rng, &words);
    /* Plant the keys at pseudo-random word positions (over whole words). */
    prng_t plant = prng_seed(0x57A3ull);
    for (size_t n = 0; n < in->len / 4096; n++) {
        const char *key = keys[prng_below(&plant, N_KEYS)];
        size_t kl = strlen(key);
        size_t pos = word_boundary(in, prng_below(&plant, in->len));
        if (pos + kl + 1 >= in->len)
            continue;
        memcpy(in->text + pos, key, kl);
        in->text[pos + kl] = ' ';
    }
    vocabulary_free(&vocab);
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "string_match");
    size_t cap = (size_t)wl_scaled(&opt, 1L << 20, 80L << 20);
    input_t *in = PM_ALLOC(sizeof *in, "string_match.input");
    in->text = PM_INPUT_ALLOC(cap + 1, "string_match.text");
    generate_text(in, cap);
    for (int k = 0; k < N_KEYS; k++)
        in->key_digests[k] = digest(keys[k], strlen(keys[k]));
    wl_info(&opt, "string_match: %zu bytes of text, %d keys", in->len, N_KEYS);

    double start = wl_now();
    mr_job job = {
        .threads = opt.threads,
        .map_tasks = (in->len + CHUNK_BYTES - 1) / CHUNK_BYTES,
        .map = match_map,
        .arg = in,
        .combine = sum,
        .reduce_tasks = 4,
    };
    mr_result r = mr_run(&job);
    double elapsed = wl_now() - start;

    checksum_t ck = checksum_init();
    for (size_t i = 0; i < r.n; i++) {
        checksum_u64(&ck, r.pairs[i].key);
        checksum_u64(&ck, r.pairs[i].val);
        if (r.pairs[i].key < N_KEYS)
            wl_info(&opt, "%-12s %llu", keys[r.pairs[i].key],
                    (unsigned long long)r.pairs[i].val);
        else
            wl_info(&opt, "%-12s %llu", "(words)", (unsigned long long)r.pairs[i].val);
    }
    mr_result_free(&r);
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
