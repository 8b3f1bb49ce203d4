/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * word_count -- Phoenix's word count: how often each word occurs in a text,
 * output by decreasing frequency.
 *
 * The text is generated (skewed choice from a pseudo-word vocabulary).  It is
 * processed in `batches` consecutive ranges, each one map-reduce job: map
 * tasks are chunks cut at word boundaries; map NUL-terminates each word in
 * place (as Phoenix does) and emits (word, 1); the combiner sums inside each
 * worker's buffer and reduce sums across workers.  Each batch's counts (sorted
 * by word) are merged into the running totals.
 *
 * Persistence: the totals are double-buffered; the merged totals go to the
 * idle buffer and then one critical section (one FASE) flips `current`, sets
 * the count and advances batches_done.  The ported build resumes after a crash
 * at the first unfinished batch.  Map treats NUL as a separator, so a batch a
 * crash interrupted can be re-run over its already-terminated words.
 * Deterministic: integer counts; the final order is by count, then word.
 */
#include "checksum.h"
#include "mapreduce.h"
#include "pm_alloc.h"
#include "prng.h"
#include "textgen.h"
#include "workload.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES 65536
#define VOCABULARY 30000

typedef struct word_total {
    const char *word; /* points into the (persistent) text */
    uint64_t count;
} word_total;

typedef struct wc_state {
    size_t text_len;
    long batches;
    long batches_done;      /* progress cursor, under `lock` */
    char *text;
    word_total *totals[2];  /* sorted by word; totals[current] is valid */
    size_t n_totals;        /* entries in totals[current] */
    size_t totals_cap;
    int current;
    pthread_mutex_t lock;
} wc_state;

typedef struct batch {
    wc_state *s;
    size_t begin, end;
} batch_t;

static int is_word_char(char c)
{
    return c >= 'a' && c <= 'z';
}

static size_t word_boundary(const char *text, size_t len, size_t pos)
{
    if (pos >= len)
        return len;
    while (pos > 0 && pos < len && is_word_char(text[pos - 1]))
        pos++;
    return pos;
}

static void count_map(void *arg, size_t task, mr_emitter *e)
{
    batch_t *b = arg;
    char *text = b->s->text;
    size_t begin = word_boundary(text, b->end, b->begin + task * CHUNK_BYTES);
    size_t end = word_boundary(text, b->end, b->begin + (task + 1) * CHUNK_BYTES);
    size_t i = begin;
    while (i < end) {
        while (i < end && !is_word_char(text[i]))
            i++;
        size_t start = i;
        while (i < end && is_word_char(text[i]))
            i++;
        if (i == start)
            break;
        /* text[i] is a separator inside this task's range (or the final NUL). */
        text[i] = '\0';
        mr_emit(e, (mr_key)(text + start), 1);
    }
}

static mr_val sum(mr_val acc, mr_val v)
{
    return acc + v;
}

/* Merges the batch's counts into the idle totals buffer and publishes it. */
static void merge_batch(wc_state *s, const mr_result *r)
{
    const word_total *old = s->totals[s->current];
    word_total *out = s->totals[1 - s->current];
    size_t i = 0, j = 0, n = 0;
    while (i < s->n_totals || j < r->n) {
        if (n == s->totals_cap) {
            fprintf(stderr, "word_count: more distinct words than the vocabulary\n");
            exit(1);
        }
        int c = i == s->n_totals ? 1
                : j == r->n      ? -1
                                 : strcmp(old[i].word, (const char *)r->pairs[j].key);
        if (c < 0)
            out[n++] = old[i++];
        else if (c > 0) {
            out[n++] = (word_total){(const char *)r->pairs[j].key, r->pairs[j].val};
            j++;
        } else {
            out[n++] = (word_total){old[i].word, old[i].count + r->pairs[j].val};
            i++;
            j++;
        }
    }
    pthread_mutex_lock(&s->lock);
    s->current = 1 - s->current;
    s->n_totals = n;
    s->batches_done++;
    pthread_mutex_unlock(&s->lock);
}

static wc_state *create_state(size_t text_cap, long batches)
{
    wc_state *s = PM_ALLOC(sizeof *s, "word_count.state");
    s->text = PM_INPUT_ALLOC(text_cap + 1, "word_count.text");
    vocabulary_t vocab = vocabulary_make(VOCABULARY, 0x3C0417ull);
    prng_t rng = prng_seed(0x3C0418ull);
    size_t words;
    size_t len = text_generate(s->text, text_cap, &vocab, &rng, &words);
    vocabulary_free(&vocab);
    s->totals_cap = VOCABULARY;
    s->totals[0] = PM_ALLOC(s->totals_cap * sizeof(word_total), "word_count.totals0");
    s->totals[1] = PM_ALLOC(s->totals_cap * sizeof(word_total), "word_count.totals1");
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_lock(&s->lock);
    s->batches = batches;
    s->text_len = len; /* set last: a recovered state with it set is complete */
    pthread_mutex_unlock(&s->lock);
    return s;
}

static int by_count_then_word(const void *a, const void *b)
{
    const word_total *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return strcmp(x->word, y->word);
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "word_count");
    size_t text_cap = (size_t)wl_scaled(&opt, 1L << 20, 52L << 20);
    long batches = 8;

    wc_state *s = PM_RECOVER(sizeof(wc_state), "word_count.state");
    if (s != NULL && (s->text_len == 0 || s->batches != batches ||
                      s->text_len > text_cap)) {
        wl_info(&opt, "recovered state is incomplete or for another input: starting over");
        s = NULL;
    }
    if (s != NULL) {
        pthread_mutex_init(&s->lock, NULL);
        wl_info(&opt, "resuming after batch %ld of %ld", s->batches_done, s->batches);
    } else {
        s = create_state(text_cap, batches);
    }
    wl_info(&opt, "word_count: %zu bytes of text in %ld batches", s->text_len, s->batches);

    double start = wl_now();
    while (s->batches_done < s->batches) {
        long b = s->batches_done;
        batch_t batch = {s, word_boundary(s->text, s->text_len, s->text_len * (size_t)b / (size_t)batches),
                         word_boundary(s->text, s->text_len,
                                       s->text_len * (size_t)(b + 1) / (size_t)batches)};
        mr_job job = {
            .threads = opt.threads,
            .map_tasks = (batch.end - batch.begin + CHUNK_BYTES - 1) / CHUNK_BYTES,
            .map = count_map,
            .arg = &batch,
            .key_hash = mr_hash_string,
            .key_cmp = mr_cmp_string,
            .combine = sum,
        };
        mr_result r = mr_run(&job);
        merge_batch(s, &r);
        mr_result_free(&r);
    }

    size_t n = s->n_totals;
    word_total *sorted = malloc((n ? n : 1) * sizeof *sorted);
    memcpy(sorted, s->totals[s->current], n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_count_then_word);
    double elapsed = wl_now() - start;

    checksum_t ck = checksum_init();
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        checksum_bytes(&ck, sorted[i].word, strlen(sorted[i].word) + 1);
        checksum_u64(&ck, sorted[i].count);
        total += sorted[i].count;
    }
    wl_info(&opt, "%zu distinct words, %llu words", n, (unsigned long long)total);
    for (size_t i = 0; i < n && i < 5; i++)
        wl_info(&opt, "  %-12s %llu", sorted[i].word, (unsigned long long)sorted[i].count);
    free(sorted);
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
