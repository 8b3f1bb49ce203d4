/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reverse_index -- Phoenix's reverse index: for every link found in a set of
 * HTML documents, the list of documents that contain it.
 *
 * The documents are generated: paragraphs of pseudo-words with
 * `<a href="...">` anchors whose targets are drawn, skewed, from a fixed set of
 * URLs.  One map task per document (Phoenix maps per file): map finds each
 * href, NUL-terminates the URL in place and emits (url, document number).
 * Reduce sorts and de-duplicates the document numbers of a URL into a list.
 * Output: URLs by decreasing number of documents, then by URL.
 * Deterministic: the lists are sorted, so worker order does not matter.
 */
#include "checksum.h"
#include "mapreduce.h"
#include "pm_alloc.h"
#include "prng.h"
#include "textgen.h"
#include "workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_URLS 5000

typedef struct corpus {
    long n_docs;
    char **docs; /* each a NUL-terminated HTML document */
} corpus_t;

/* A reduce result: n document numbers, ascending. */
typedef struct doc_list {
    size_t n;
    uint64_t docs[];
} doc_list;

static void generate_corpus(corpus_t *c, size_t doc_bytes)
{
    vocabulary_t vocab = vocabulary_make(5000, 0x2E71ull);
    prng_t rng = prng_seed(0x2E72ull);
    char name[64];
    for (long d = 0; d < c->n_docs; d++) {
        snprintf(name, sizeof name, "reverse_index.doc%ld", d);
        char *doc = PM_ALLOC(doc_bytes + 1, NULL);
        size_t len = (size_t)snprintf(doc, doc_bytes, "<html><head><title>doc %ld</title></head><body>\n", d);
        while (len + 128 < doc_bytes) {
            if (prng_below(&rng, 8) == 0) {
                double u = prng_unit(&rng);
                long url = (long)(u * u * u * N_URLS);
                len += (size_t)snprintf(doc + len, doc_bytes - len,
                                        "<a href=\"http://site%ld.example/page%ld.html\">link</a> ",
                                        url % 97, url);
            } else {
                const char *w = vocab.words[vocabulary_pick(&vocab, &rng)];
                size_t wl = strlen(w);
                memcpy(doc + len, w, wl);
                len += wl;
                doc[len++] = ' ';
            }
        }
        len += (size_t)snprintf(doc + len, doc_bytes - len, "\n</body></html>\n");
        doc[len] = '\0';
        c->docs[d] = doc;
    }
    vocabulary_free(&vocab);
}

static void index_map(void *arg, size_t d, mr_emitter *e)
{
    corpus_t *c = arg;
    static const char anchor[] = "<a href=\"";
    char *p = c->docs[d];
    while ((p = strstr(p, anchor)) != NULL) {
        char *url = p + sizeof anchor - 1;
        char *close = strchr(url, '"');
        if (close == NULL)
            break;
        *close = '\0';
        mr_emit(e, (mr_key)url, (mr_val)d);
        p = close + 1;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static mr_val index_reduce(void *arg, mr_key url, const mr_val *vals, size_t n)
{
    (void)arg;
    (void)url;
    doc_list *l = malloc(sizeof *l + n * sizeof l->docs[0]);
    if (l == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        l->docs[i] = vals[i];
    qsort(l->docs, n, sizeof l->docs[0], cmp_u64);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || l->docs[k - 1] != l->docs[i])
            l->docs[k++] = l->docs[i];
    l->n = k;
    return (mr_val)l;
}

static int by_doc_count(const mr_pair *a, const mr_pair *b)
{
    size_t x = ((const doc_list *)a->val)->n, y = ((const doc_list *)b->val)->n;
    return x > y ? -1 : x < y;
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "reverse_index");
    corpus_t *c = PM_ALLOC(sizeof *c, "reverse_index.corpus");
    c->n_docs = wl_scaled(&opt, 200, 18000);
    c->docs = PM_ALLOC((size_t)c->n_docs * sizeof *c->docs, "reverse_index.docs");
    generate_corpus(c, 8192);
    wl_info(&opt, "reverse_index: %ld documents", c->n_docs);

    double start = wl_now();
    mr_job job = {
        .threads = opt.threads,
        .map_tasks = (size_t)c->n_docs,
        .map = index_map,
        .arg = c,
        .key_hash = mr_hash_string,
        .key_cmp = mr_cmp_string,
        .reduce = index_reduce,
        .out_cmp = by_doc_count,
    };
    mr_result r = mr_run(&job);
    double elapsed = wl_now() - start;

    checksum_t ck = checksum_init();
    size_t refs = 0;
    for (size_t i = 0; i < r.n; i++) {
        const char *url = (const char *)r.pairs[i].key;
        doc_list *l = (doc_list *)r.pairs[i].val;
        checksum_bytes(&ck, url, strlen(url) + 1);
        checksum_u64(&ck, l->n);
        for (size_t k = 0; k < l->n; k++)
            checksum_u64(&ck, l->docs[k]);
        refs += l->n;
        if (i < 3)
            wl_info(&opt, "  %s in %zu documents", url, l->n);
    }
    wl_info(&opt, "%zu links, %zu (link, document) pairs", r.n, refs);
    for (size_t i = 0; i < r.n; i++)
        free((void *)r.pairs[i].val);
    mr_result_free(&r);
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
