/* SPDX-License-Identifier: BSD-3-Clause */
/* mapreduce.c -- the Phoenix-style runtime (see mapreduce.h). */
#include "mapreduce.h"

#include "workload.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_REDUCE_TASKS 64

/* One key's values in a hash table (intermediate or merged). */
typedef struct entry {
    mr_key key;
    uint64_t hash;
    mr_val *vals;
    size_t n, cap;
    int used;
} entry_t;

typedef struct table {
    entry_t *slots;
    size_t cap;  /* power of two */
    size_t used;
} table_t;

struct mr_emitter {
    const mr_job *job;
    table_t *partitions; /* reduce_tasks tables */
};

typedef struct run {
    const mr_job *job;
    size_t reduce_tasks;
    mr_emitter *emitters;   /* one per worker */
    pthread_mutex_t task_lock;
    size_t next_task;       /* the task queue of the current phase */
    mr_pair **part_out;     /* sorted output of each partition */
    size_t *part_n;
    /* merge phase */
    mr_pair **runs;
    size_t *run_n;
    size_t n_runs;
    mr_pair **next_runs;
    size_t *next_run_n;
} run_t;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "mapreduce: out of memory\n");
        exit(1);
    }
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL) {
        fprintf(stderr, "mapreduce: out of memory\n");
        exit(1);
    }
    return p;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t key_hash(const mr_job *job, mr_key k)
{
    return job->key_hash ? job->key_hash(k) : mix64((uint64_t)k);
}

static int key_cmp(const mr_job *job, mr_key a, mr_key b)
{
    if (job->key_cmp)
        return job->key_cmp(a, b);
    return a < b ? -1 : a > b;
}

uint64_t mr_hash_string(mr_key key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    return h;
}

int mr_cmp_string(mr_key a, mr_key b)
{
    return strcmp((const char *)a, (const char *)b);
}

static void table_init(table_t *t, size_t cap)
{
    t->slots = xcalloc(cap, sizeof *t->slots);
    t->cap = cap;
    t->used = 0;
}

static void table_free(table_t *t)
{
    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i].vals);
    free(t->slots);
}

static entry_t *table_find_slot(const mr_job *job, table_t *t, mr_key key, uint64_t hash)
{
    size_t mask = t->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        entry_t *e = &t->slots[i];
        if (!e->used || (e->hash == hash && key_cmp(job, e->key, key) == 0))
            return e;
    }
}

static void table_grow(const mr_job *job, table_t *t)
{
    table_t bigger;
    table_init(&bigger, t->cap * 2);
    for (size_t i = 0; i < t->cap; i++) {
        entry_t *e = &t->slots[i];
        if (e->used)
            *table_find_slot(job, &bigger, e->key, e->hash) = *e;
    }
    bigger.used = t->used;
    free(t->slots);
    *t = bigger;
}

/* The entry for key, created empty if absent. */
static entry_t *table_get(const mr_job *job, table_t *t, mr_key key, uint64_t hash)
{
    if ((t->used + 1) * 4 > t->cap * 3)
        table_grow(job, t);
    entry_t *e = table_find_slot(job, t, key, hash);
    if (!e->used) {
        e->used = 1;
        e->key = key;
        e->hash = hash;
        t->used++;
    }
    return e;
}

static void entry_append(entry_t *e, mr_val v)
{
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 2;
        mr_val *vals = realloc(e->vals, e->cap * sizeof *vals);
        if (vals == NULL) {
            fprintf(stderr, "mapreduce: out of memory\n");
            exit(1);
        }
        e->vals = vals;
    }
    e->vals[e->n++] = v;
}

static void entry_add(const mr_job *job, entry_t *e, mr_val v)
{
    if (job->combine && e->n == 1)
        e->vals[0] = job->combine(e->vals[0], v);
    else
        entry_append(e, v);
}

void mr_emit(mr_emitter *em, mr_key key, mr_val val)
{
    const mr_job *job = em->job;
    uint64_t hash = key_hash(job, key);
    size_t reduce_tasks = job->reduce_tasks ? job->reduce_tasks : DEFAULT_REDUCE_TASKS;
    /* High bits pick the partition, low bits the slot: independent, so the
     * keys of one partition still spread over its whole table. */
    table_t *t = &em->partitions[(hash >> 40) % reduce_tasks];
    entry_add(job, table_get(job, t, key, hash), val);
}

/* Takes the next task number of the current phase from the shared queue. */
static int take_task(run_t *r, size_t limit, size_t *task)
{
    pthread_mutex_lock(&r->task_lock);
    int ok = r->next_task < limit;
    if (ok)
        *task = r->next_task++;
    pthread_mutex_unlock(&r->task_lock);
    return ok;
}

typedef struct worker {
    run_t *run;
    int id;
} worker_t;

static void run_phase(run_t *r, void *(*fn)(void *))
{
    int threads = r->job->threads;
    pthread_t tids[WL_MAX_THREADS];
    worker_t workers[WL_MAX_THREADS];
    r->next_task = 0;
    for (int t = 0; t < threads; t++) {
        workers[t] = (worker_t){r, t};
        wl_thread_create(&tids[t], fn, &workers[t]);
    }
    for (int t = 0; t < threads; t++)
        wl_thread_join(tids[t]);
}

static void *map_worker(void *arg)
{
    worker_t *w = arg;
    run_t *r = w->run;
    size_t task;
    while (take_task(r, r->job->map_tasks, &task))
        r->job->map(r->job->arg, task, &r->emitters[w->id]);
    return NULL;
}

/* qsort has no context argument: the job is passed per thread. */
static _Thread_local const mr_job *sort_job;

static int pair_cmp(const mr_job *job, const mr_pair *a, const mr_pair *b)
{
    if (job->out_cmp) {
        int c = job->out_cmp(a, b);
        if (c != 0)
            return c;
    }
    return key_cmp(job, a->key, b->key);
}

static int pair_qsort_cmp(const void *a, const void *b)
{
    return pair_cmp(sort_job, a, b);
}

static void reduce_partition(run_t *r, size_t p)
{
    const mr_job *job = r->job;
    table_t merged;
    size_t total = 0;
    for (int t = 0; t < job->threads; t++)
        total += r->emitters[t].partitions[p].used;
    size_t cap = 16;
    while (cap * 3 < total * 4 + 4)
        cap *= 2;
    table_init(&merged, cap);
    for (int t = 0; t < job->threads; t++) {
        table_t *src = &r->emitters[t].partitions[p];
        for (size_t i = 0; i < src->cap; i++) {
            entry_t *e = &src->slots[i];
            if (!e->used)
                continue;
            entry_t *m = table_get(job, &merged, e->key, e->hash);
            for (size_t k = 0; k < e->n; k++)
                entry_add(job, m, e->vals[k]);
        }
    }
    mr_pair *out = xmalloc(merged.used * sizeof *out);
    size_t n = 0;
    for (size_t i = 0; i < merged.cap; i++) {
        entry_t *e = &merged.slots[i];
        if (!e->used)
            continue;
        mr_val v;
        if (job->reduce)
            v = job->reduce(job->arg, e->key, e->vals, e->n);
        else
            v = e->vals[0]; /* already combined, or the first value */
        out[n++] = (mr_pair){e->key, v};
    }
    table_free(&merged);
    sort_job = job;
    qsort(out, n, sizeof *out, pair_qsort_cmp);
    r->part_out[p] = out;
    r->part_n[p] = n;
}

static void *reduce_worker(void *arg)
{
    worker_t *w = arg;
    run_t *r = w->run;
    size_t p;
    while (take_task(r, r->reduce_tasks, &p))
        reduce_partition(r, p);
    return NULL;
}

static void *merge_worker(void *arg)
{
    worker_t *w = arg;
    run_t *r = w->run;
    const mr_job *job = r->job;
    size_t pair_index;
    while (take_task(r, (r->n_runs + 1) / 2, &pair_index)) {
        size_t a = 2 * pair_index, b = a + 1;
        if (b >= r->n_runs) { /* odd one out moves up unchanged */
            r->next_runs[pair_index] = r->runs[a];
            r->next_run_n[pair_index] = r->run_n[a];
            continue;
        }
        size_t na = r->run_n[a], nb = r->run_n[b], i = 0, j = 0, k = 0;
        mr_pair *out = xmalloc((na + nb) * sizeof *out);
        while (i < na && j < nb)
            out[k++] = pair_cmp(job, &r->runs[b][j], &r->runs[a][i]) < 0
                           ? r->runs[b][j++] : r->runs[a][i++];
        while (i < na)
            out[k++] = r->runs[a][i++];
        while (j < nb)
            out[k++] = r->runs[b][j++];
        free(r->runs[a]);
        free(r->runs[b]);
        r->next_runs[pair_index] = out;
        r->next_run_n[pair_index] = k;
    }
    return NULL;
}

mr_result mr_run(const mr_job *job)
{
    run_t r = {.job = job};
    r.reduce_tasks = job->reduce_tasks ? job->reduce_tasks : DEFAULT_REDUCE_TASKS;
    pthread_mutex_init(&r.task_lock, NULL);

    r.emitters = xcalloc((size_t)job->threads, sizeof *r.emitters);
    for (int t = 0; t < job->threads; t++) {
        r.emitters[t].job = job;
        r.emitters[t].partitions = xcalloc(r.reduce_tasks, sizeof(table_t));
        for (size_t p = 0; p < r.reduce_tasks; p++)
            table_init(&r.emitters[t].partitions[p], 16);
    }
    run_phase(&r, map_worker);

    r.part_out = xcalloc(r.reduce_tasks, sizeof *r.part_out);
    r.part_n = xcalloc(r.reduce_tasks, sizeof *r.part_n);
    run_phase(&r, reduce_worker);
    for (int t = 0; t < job->threads; t++) {
        for (size_t p = 0; p < r.reduce_tasks; p++)
            table_free(&r.emitters[t].partitions[p]);
        free(r.emitters[t].partitions);
    }
    free(r.emitters);

    r.runs = r.part_out;
    r.run_n = r.part_n;
    r.n_runs = r.reduce_tasks;
    while (r.n_runs > 1) {
        size_t next = (r.n_runs + 1) / 2;
        r.next_runs = xcalloc(next, sizeof *r.next_runs);
        r.next_run_n = xcalloc(next, sizeof *r.next_run_n);
        run_phase(&r, merge_worker);
        free(r.runs);
        free(r.run_n);
        r.runs = r.next_runs;
        r.run_n = r.next_run_n;
        r.n_runs = next;
    }
    mr_result result = {r.runs[0], r.run_n[0]};
    free(r.runs);
    free(r.run_n);
    pthread_mutex_destroy(&r.task_lock);
    return result;
}

void mr_result_free(mr_result *r)
{
    free(r->pairs);
    r->pairs = NULL;
    r->n = 0;
}
