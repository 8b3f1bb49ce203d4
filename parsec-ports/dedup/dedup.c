/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dedup -- PARSEC's deduplicating compressor: a five-stage pipeline
 *
 *   fragment (1 thread)  cuts the input into 1 MiB fragments
 *   refine   (T threads) cuts each fragment into content-defined chunks
 *                        (Rabin-Karp rolling hash, rabin.c)
 *   dedup    (T threads) fingerprints each chunk (SHA-1, sha1.c) and looks it
 *                        up in a shared hash table under striped bucket locks;
 *                        the first chunk with a fingerprint creates the entry
 *                        and goes on to compression, later ones skip it
 *   compress (T threads) compresses the entry's data (LZ77, lz77.c), then
 *                        marks the entry compressed under the entry's lock and
 *                        signals its condition variable
 *   reorder  (1 thread)  puts chunks back into stream order and writes the
 *                        output: the first time a fingerprint is written, its
 *                        compressed data (waiting on the entry's condition
 *                        variable if compression is still running), afterwards
 *                        only the fingerprint
 *
 * with bounded queues (mutex + two condition variables, common/queue.c)
 * between the stages.  The queue into the reorder stage can hold every chunk
 * of the stream: reorder may wait for a compression, and compress threads
 * must then never block on a full reorder queue, or the pipeline could
 * deadlock.
 *
 * The input is generated: a few source blocks of pseudo-text, repeated with a
 * few mutated bytes, so that many chunks are duplicates and the rest
 * compress.  After the run the output is decoded and compared with the input.
 * Deterministic: the output is written in stream order and every chunk is
 * written in full at its first occurrence in that order, whichever thread
 * happened to create the entry.
 */
#include "checksum.h"
#include "lz77.h"
#include "pm_alloc.h"
#include "prng.h"
#include "queue.h"
#include "rabin.h"
#include "sha1.h"
#include "textgen.h"
#include "workload.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRAGMENT_BYTES (1u << 20)
#define BUCKET_LOCKS 256
#define STAGE_QUEUE 256

typedef struct hash_entry {
    uint8_t digest[SHA1_DIGEST_BYTES];
    struct hash_entry *next;    /* bucket chain, under the bucket's lock */
    pthread_mutex_t lock;
    pthread_cond_t compressed_cv;
    int compressed;             /* under `lock` */
    unsigned char *data;        /* compressed bytes, valid once compressed */
    size_t len, raw_len;
    int written;                /* reorder thread only */
} hash_entry;

typedef struct fragment {
    uint64_t id;
    const unsigned char *data;
    size_t len;
} fragment_t;

typedef struct chunk {
    const unsigned char *data;
    size_t len;
    uint64_t fragment;
    uint32_t index;             /* within the fragment */
    int last_in_fragment;
    hash_entry *entry;
} chunk_t;

typedef struct dedup_state {
    unsigned char *input;
    size_t input_len;
    hash_entry **buckets;
    size_t n_buckets;           /* power of two */
    pthread_mutex_t bucket_locks[BUCKET_LOCKS];
    unsigned char *output;      /* reorder thread only */
    size_t output_len, output_cap;
    size_t n_chunks, n_unique;  /* reorder thread only */
    wl_queue fragments, chunks, to_compress, to_reorder;
} dedup_state;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "dedup: out of memory\n");
        exit(1);
    }
    return p;
}

/* ---- stage 1: coarse fragments ---- */
static void *fragment_stage(void *arg)
{
    dedup_state *s = arg;
    uint64_t id = 0;
    for (size_t off = 0; off < s->input_len; off += FRAGMENT_BYTES, id++) {
        fragment_t *f = xmalloc(sizeof *f);
        f->id = id;
        f->data = s->input + off;
        f->len = s->input_len - off < FRAGMENT_BYTES ? s->input_len - off : FRAGMENT_BYTES;
        wl_queue_push(&s->fragments, f);
    }
    wl_queue_producer_done(&s->fragments);
    return NULL;
}

/* ---- stage 2: content-defined chunks ---- */
static void *refine_stage(void *arg)
{
    dedup_state *s = arg;
    fragment_t *f;
    while ((f = wl_queue_pop(&s->fragments)) != NULL) {
        size_t off = 0;
        uint32_t index = 0;
        while (off < f->len) {
            size_t len = rabin_next_chunk(f->data + off, f->len - off);
            chunk_t *c = xmalloc(sizeof *c);
            *c = (chunk_t){f->data + off, len, f->id, index++, off + len == f->len, NULL};
            wl_queue_push(&s->chunks, c);
            off += len;
        }
        free(f);
    }
    wl_queue_producer_done(&s->chunks);
    return NULL;
}

/* ---- stage 3: fingerprint and look up ---- */
static hash_entry *lookup_or_insert(dedup_state *s, const uint8_t digest[SHA1_DIGEST_BYTES],
                                    size_t raw_len, int *inserted)
{
    uint64_t h;
    memcpy(&h, digest, sizeof h);
    size_t bucket = h & (s->n_buckets - 1);
    pthread_mutex_t *lock = &s->bucket_locks[bucket % BUCKET_LOCKS];
    pthread_mutex_lock(lock);
    hash_entry *e = s->buckets[bucket];
    while (e != NULL && memcmp(e->digest, digest, SHA1_DIGEST_BYTES) != 0)
        e = e->next;
    *inserted = e == NULL;
    if (e == NULL) {
        e = xmalloc(sizeof *e);
        memset(e, 0, sizeof *e);
        memcpy(e->digest, digest, SHA1_DIGEST_BYTES);
        pthread_mutex_init(&e->lock, NULL);
        pthread_cond_init(&e->compressed_cv, NULL);
        e->raw_len = raw_len;
        e->next = s->buckets[bucket];
        s->buckets[bucket] = e;
    }
    pthread_mutex_unlock(lock);
    return e;
}

static void *dedup_stage(void *arg)
{
    dedup_state *s = arg;
    chunk_t *c;
    while ((c = wl_queue_pop(&s->chunks)) != NULL) {
        uint8_t digest[SHA1_DIGEST_BYTES];
        sha1(c->data, c->len, digest);
        int inserted;
        c->entry = lookup_or_insert(s, digest, c->len, &inserted);
        wl_queue_push(inserted ? &s->to_compress : &s->to_reorder, c);
    }
    wl_queue_producer_done(&s->to_compress);
    wl_queue_producer_done(&s->to_reorder);
    return NULL;
}

/* ---- stage 4: compression ---- */
static void *compress_stage(void *arg)
{
    dedup_state *s = arg;
    chunk_t *c;
    while ((c = wl_queue_pop(&s->to_compress)) != NULL) {
        hash_entry *e = c->entry;
        unsigned char *buf = xmalloc(lz77_bound(c->len));
        size_t len = lz77_compress(c->data, c->len, buf);
        pthread_mutex_lock(&e->lock);
        e->data = buf;
        e->len = len;
        e->compressed = 1;
        pthread_cond_broadcast(&e->compressed_cv);
        pthread_mutex_unlock(&e->lock);
        wl_queue_push(&s->to_reorder, c);
    }
    wl_queue_producer_done(&s->to_reorder);
    return NULL;
}

/* ---- stage 5: reorder and write ---- */
static void output_bytes(dedup_state *s, const void *data, size_t n)
{
    if (s->output_len + n > s->output_cap) {
        while (s->output_len + n > s->output_cap)
            s->output_cap *= 2;
        s->output = realloc(s->output, s->output_cap);
        if (s->output == NULL) {
            fprintf(stderr, "dedup: out of memory\n");
            exit(1);
        }
    }
    memcpy(s->output + s->output_len, data, n);
    s->output_len += n;
}

static void output_u32(dedup_state *s, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    output_bytes(s, b, 4);
}

static void write_chunk(dedup_state *s, chunk_t *c)
{
    hash_entry *e = c->entry;
    s->n_chunks++;
    if (!e->written) {
        pthread_mutex_lock(&e->lock);
        while (!e->compressed)
            pthread_cond_wait(&e->compressed_cv, &e->lock);
        pthread_mutex_unlock(&e->lock);
        output_bytes(s, "D", 1);
        output_u32(s, (uint32_t)e->raw_len);
        output_u32(s, (uint32_t)e->len);
        output_bytes(s, e->data, e->len);
        e->written = 1;
        s->n_unique++;
    } else {
        output_bytes(s, "R", 1);
        output_bytes(s, e->digest, SHA1_DIGEST_BYTES);
    }
}

typedef struct pending {
    chunk_t **chunks; /* by index within the fragment */
    size_t cap;
} pending_t;

static void *reorder_stage(void *arg)
{
    dedup_state *s = arg;
    size_t n_fragments = (s->input_len + FRAGMENT_BYTES - 1) / FRAGMENT_BYTES;
    pending_t *pending = calloc(n_fragments ? n_fragments : 1, sizeof *pending);
    uint64_t next_fragment = 0;
    uint32_t next_index = 0;
    chunk_t *c;
    while ((c = wl_queue_pop(&s->to_reorder)) != NULL) {
        pending_t *p = &pending[c->fragment];
        if (c->index >= p->cap) {
            size_t cap = p->cap ? p->cap : 64;
            while (cap <= c->index)
                cap *= 2;
            p->chunks = realloc(p->chunks, cap * sizeof *p->chunks);
            memset(p->chunks + p->cap, 0, (cap - p->cap) * sizeof *p->chunks);
            p->cap = cap;
        }
        p->chunks[c->index] = c;
        /* Write every chunk that is now next in stream order. */
        while (next_fragment < n_fragments) {
            pending_t *q = &pending[next_fragment];
            if (next_index >= q->cap || q->chunks[next_index] == NULL)
                break;
            chunk_t *ready = q->chunks[next_index];
            write_chunk(s, ready);
            int last = ready->last_in_fragment;
            free(ready);
            next_index++;
            if (last) {
                free(q->chunks);
                q->chunks = NULL;
                q->cap = 0;
                next_fragment++;
                next_index = 0;
            }
        }
    }
    if (next_fragment != n_fragments) {
        fprintf(stderr, "dedup: reorder stage ended at fragment %llu of %zu\n",
                (unsigned long long)next_fragment, n_fragments);
        exit(1);
    }
    free(pending);
    return NULL;
}

/* ---- input, verification ---- */
static void generate_input(dedup_state *s)
{
    enum { SOURCES = 48, SOURCE_BYTES = 256 * 1024 };
    vocabulary_t vocab = vocabulary_make(4000, 0xDED0ull);
    prng_t rng = prng_seed(0xDED1ull);
    char *sources = xmalloc((size_t)SOURCES * SOURCE_BYTES + 1);
    for (int i = 0; i < SOURCES; i++) {
        size_t words;
        char *src = sources + (size_t)i * SOURCE_BYTES;
        size_t len = text_generate(src, SOURCE_BYTES, &vocab, &rng, &words);
        memset(src + len, ' ', SOURCE_BYTES - len); /* overwrite the NUL */
    }
    size_t off = 0;
    while (off < s->input_len) {
        size_t n = s->input_len - off < SOURCE_BYTES ? s->input_len - off : SOURCE_BYTES;
        memcpy(s->input + off, sources + prng_below(&rng, SOURCES) * SOURCE_BYTES, n);
        /* A few edits per copy: near-duplicates, as in real backups. */
        for (int k = 0; k < 3; k++)
            s->input[off + prng_below(&rng, n)] = (unsigned char)('A' + prng_below(&rng, 26));
        off += n;
    }
    free(sources);
    vocabulary_free(&vocab);
}

typedef struct seen {
    uint8_t digest[SHA1_DIGEST_BYTES];
    size_t offset, len; /* in the decoded stream; len 0 = empty slot */
} seen_t;

/* Decodes the output and compares it with the input. */
static int verify(const dedup_state *s)
{
    size_t cap = 1024;
    while (cap < s->n_unique * 2)
        cap *= 2;
    seen_t *seen = calloc(cap, sizeof *seen);
    unsigned char *decoded = xmalloc(s->input_len + 1);
    size_t in = 0, out = 0;
    int ok = 1;
    while (ok && in < s->output_len) {
        unsigned char tag = s->output[in++];
        uint8_t digest[SHA1_DIGEST_BYTES];
        if (tag == 'D') {
            uint32_t raw = 0, len = 0;
            for (int i = 0; i < 4; i++) {
                raw |= (uint32_t)s->output[in + i] << (8 * i);
                len |= (uint32_t)s->output[in + 4 + i] << (8 * i);
            }
            in += 8;
            size_t got = lz77_decompress(s->output + in, len, decoded + out, s->input_len - out);
            in += len;
            if (got != raw) {
                ok = 0;
                break;
            }
            sha1(decoded + out, raw, digest);
            uint64_t h;
            memcpy(&h, digest, sizeof h);
            size_t i = h & (cap - 1);
            while (seen[i].len != 0)
                i = (i + 1) & (cap - 1);
            memcpy(seen[i].digest, digest, SHA1_DIGEST_BYTES);
            seen[i].offset = out;
            seen[i].len = raw;
            out += raw;
        } else if (tag == 'R') {
            memcpy(digest, s->output + in, SHA1_DIGEST_BYTES);
            in += SHA1_DIGEST_BYTES;
            uint64_t h;
            memcpy(&h, digest, sizeof h);
            size_t i = h & (cap - 1);
            while (seen[i].len != 0 && memcmp(seen[i].digest, digest, SHA1_DIGEST_BYTES) != 0)
                i = (i + 1) & (cap - 1);
            if (seen[i].len == 0 || out + seen[i].len > s->input_len) {
                ok = 0;
                break;
            }
            memcpy(decoded + out, decoded + seen[i].offset, seen[i].len);
            out += seen[i].len;
        } else {
            ok = 0;
        }
    }
    ok = ok && out == s->input_len && memcmp(decoded, s->input, s->input_len) == 0;
    free(decoded);
    free(seen);
    return ok;
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "dedup");
    dedup_state *s = PM_ALLOC(sizeof *s, "dedup.state");
    s->input_len = (size_t)wl_scaled(&opt, 2L << 20, 80L << 20);
    s->input = PM_ALLOC(s->input_len, "dedup.input");
    generate_input(s);
    s->n_buckets = 1 << 16;
    s->buckets = PM_ALLOC(s->n_buckets * sizeof *s->buckets, "dedup.buckets");
    for (int i = 0; i < BUCKET_LOCKS; i++)
        pthread_mutex_init(&s->bucket_locks[i], NULL);
    s->output_cap = 1 << 20;
    s->output = xmalloc(s->output_cap);
    size_t max_chunks = s->input_len / RABIN_MIN_CHUNK + s->input_len / FRAGMENT_BYTES + 2;
    int t = opt.threads;
    wl_queue_init(&s->fragments, 16, 1);
    wl_queue_init(&s->chunks, STAGE_QUEUE, t);
    wl_queue_init(&s->to_compress, STAGE_QUEUE, t);
    wl_queue_init(&s->to_reorder, max_chunks, 2 * t); /* never full: see above */
    wl_info(&opt, "dedup: %zu bytes of input, %d threads per parallel stage", s->input_len, t);

    double start = wl_now();
    pthread_t fragmenter, reorderer, refine[WL_MAX_THREADS], dedupers[WL_MAX_THREADS],
        compressors[WL_MAX_THREADS];
    wl_thread_create(&fragmenter, fragment_stage, s);
    for (int i = 0; i < t; i++) {
        wl_thread_create(&refine[i], refine_stage, s);
        wl_thread_create(&dedupers[i], dedup_stage, s);
        wl_thread_create(&compressors[i], compress_stage, s);
    }
    wl_thread_create(&reorderer, reorder_stage, s);
    wl_thread_join(fragmenter);
    for (int i = 0; i < t; i++) {
        wl_thread_join(refine[i]);
        wl_thread_join(dedupers[i]);
        wl_thread_join(compressors[i]);
    }
    wl_thread_join(reorderer);
    double elapsed = wl_now() - start;

    int ok = verify(s);
    wl_info(&opt, "%zu chunks, %zu unique, output %zu bytes (%.1f%% of input), decoded output %s",
            s->n_chunks, s->n_unique, s->output_len,
            100.0 * (double)s->output_len / (double)s->input_len,
            ok ? "matches the input" : "DOES NOT MATCH the input");
    checksum_t ck = checksum_init();
    checksum_bytes(&ck, s->output, s->output_len);
    wl_finish(&opt, elapsed, ck.h);
    return ok ? 0 : 1;
}
