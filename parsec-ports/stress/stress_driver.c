/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stress_driver.c -- the shared main program of the stress tests: see
 * stress_driver.h for the command line and the output.
 */
#include "stress_driver.h"

#include "checksum.h"
#include "prng.h"
#include "pstore.h"
#include "stress_mix.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256

typedef struct options {
    int threads;
    int put_percent;
    uint64_t keys;
    uint64_t ops;
    long duration_ms; /* > 0: timed run instead of a fixed operation count */
    int prefill_percent;
    uint64_t seed;
    const char *pool;
    bool check_only;
    bool quiet;
} options;

/* One worker's share and results; padded so counters do not share lines. */
typedef struct worker {
    pthread_t tid;
    int id;
    uint64_t ops_todo;
    uint64_t ops_done;
    uint64_t puts, inserts, gets, hits, bad_values;
    char pad[64];
} worker;

static const stress_structure *structure;
static void *root;
static options opt;
static pthread_barrier_t start_line;
static atomic_bool stop_now;

uint64_t stress_value_of(uint64_t key)
{
    /* Never 0, so a zeroed slot cannot pass for a stored value. */
    return stress_mix(key) | 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static _Noreturn void usage(const char *name)
{
    fprintf(stderr,
            "usage: %s [-t THREADS] [-u PUT%%] [-k KEYS] [-n OPS | -d MS] [-p PREFILL%%]\n"
            "       [-s SEED] [-P POOL] [-x] [-q]\n",
            name);
    exit(2);
}

static uint64_t parse_number(const char *name, const char *arg, uint64_t min, uint64_t max)
{
    char *end;
    unsigned long long v = strtoull(arg, &end, 10);
    if (*arg == '\0' || *end != '\0' || arg[0] == '-' || v < min || v > max) {
        fprintf(stderr, "%s: bad number %s (expected %" PRIu64 "..%" PRIu64 ")\n", name, arg,
                min, max);
        exit(2);
    }
    return v;
}

static void parse_options(int argc, char **argv)
{
    const char *name = structure->name;
    opt = (options){.threads = 2,
                    .put_percent = 50,
                    .keys = structure->default_keys,
                    .ops = structure->default_ops,
                    .prefill_percent = 50,
                    .seed = 1};
    int c;
    while ((c = getopt(argc, argv, "t:u:k:n:d:p:s:P:xq")) != -1) {
        switch (c) {
        case 't': opt.threads = (int)parse_number(name, optarg, 1, MAX_THREADS); break;
        case 'u': opt.put_percent = (int)parse_number(name, optarg, 0, 100); break;
        case 'k': opt.keys = parse_number(name, optarg, 1, UINT64_MAX / 2); break;
        case 'n': opt.ops = parse_number(name, optarg, 0, UINT64_MAX / 2); break;
        case 'd': opt.duration_ms = (long)parse_number(name, optarg, 1, 86400000); break;
        case 'p': opt.prefill_percent = (int)parse_number(name, optarg, 0, 100); break;
        case 's': opt.seed = parse_number(name, optarg, 0, UINT64_MAX); break;
        case 'P': opt.pool = optarg; break;
        case 'x': opt.check_only = true; break;
        case 'q': opt.quiet = true; break;
        default: usage(name);
        }
    }
    if (optind != argc)
        usage(name);
}

static void *work(void *arg)
{
    worker *w = arg;
    prng_t rng = prng_seed(stress_mix(opt.seed) ^ (uint64_t)w->id);
    pthread_barrier_wait(&start_line);
    uint64_t done = 0;
    for (;;) {
        if (opt.duration_ms > 0) {
            /* Checked every 64 operations: cheap, and a stop is still prompt. */
            if ((done & 63) == 0 && atomic_load_explicit(&stop_now, memory_order_relaxed))
                break;
        } else if (done == w->ops_todo) {
            break;
        }
        uint64_t key = prng_below(&rng, opt.keys);
        if ((int)prng_below(&rng, 100) < opt.put_percent) {
            w->puts++;
            w->inserts += structure->put(root, key, stress_value_of(key));
        } else {
            uint64_t value;
            w->gets++;
            if (structure->get(root, key, &value)) {
                w->hits++;
                w->bad_values += value != stress_value_of(key);
            }
        }
        done++;
    }
    w->ops_done = done;
    return NULL;
}

/* Inserts prefill_percent of the key range, chosen by a hash of the key. */
static uint64_t prefill(void)
{
    uint64_t inserted = 0;
    if (opt.prefill_percent == 0)
        return 0;
    for (uint64_t key = 0; key < opt.keys; key++)
        if (stress_mix(key ^ stress_mix(opt.seed + 1)) % 100 < (uint64_t)opt.prefill_percent)
            inserted += structure->put(root, key, stress_value_of(key));
    return inserted;
}

typedef struct digest {
    checksum_t sum;
    uint64_t count;
    uint64_t bad_values;
} digest;

static void digest_one(uint64_t key, uint64_t value, void *ctx)
{
    digest *d = ctx;
    checksum_u64(&d->sum, key);
    checksum_u64(&d->sum, value);
    d->count++;
    d->bad_values += value != stress_value_of(key);
}

/* The final check: structure, values, key count.  Prints and returns ok. */
static bool check_and_report(uint64_t *checksum_out)
{
    char detail[128] = "", why[256] = "";
    uint64_t keys = 0;
    double t0 = now_s();
    bool ok = structure->check(root, &keys, detail, sizeof detail, why, sizeof why);
    digest d = {checksum_init(), 0, 0};
    if (ok) {
        structure->foreach(root, digest_one, &d);
        if (d.count != keys) {
            snprintf(why, sizeof why, "walk found %" PRIu64 " keys, check %" PRIu64, d.count,
                     keys);
            ok = false;
        } else if (d.bad_values != 0) {
            snprintf(why, sizeof why, "%" PRIu64 " keys hold a value never written", d.bad_values);
            ok = false;
        }
    }
    double t1 = now_s();
    if (ok)
        printf("check=ok keys=%" PRIu64 " %s check_s=%.3f\n", keys, detail, t1 - t0);
    else
        printf("check=FAILED %s\n", why);
    *checksum_out = d.sum.h;
    return ok;
}

int stress_main(int argc, char **argv, const stress_structure *s)
{
    structure = s;
    parse_options(argc, argv);
    double t_start = now_s();

    root = pstore_open(opt.pool, s->root_name, s->root_size);
    bool existing = s->is_initialised(root);
    printf("%s backend=%s threads=%d put=%d keys=%" PRIu64 " %s=%" PRIu64 "%s\n", s->name,
           pstore_backend(), opt.threads, opt.put_percent, opt.keys,
           opt.duration_ms > 0 ? "duration_ms" : "ops",
           opt.duration_ms > 0 ? (uint64_t)opt.duration_ms : opt.ops,
           existing ? " store=existing" : " store=new");

    uint64_t checksum = 0;
    if (existing) {
        /* A structure from an earlier run: it must be whole before we use it. */
        bool ok = check_and_report(&checksum);
        printf("open_verified_s=%.3f\n", now_s() - t_start);
        if (!ok || opt.check_only) {
            printf("checksum=%016" PRIx64 "\n", checksum);
            pstore_close();
            return ok ? 0 : 1;
        }
    } else if (opt.check_only) {
        printf("check=FAILED no structure in the store\n");
        pstore_close();
        return 1;
    } else {
        s->init(root);
        double t0 = now_s();
        uint64_t n = prefill();
        if (!opt.quiet)
            printf("prefilled=%" PRIu64 " prefill_s=%.3f\n", n, now_s() - t0);
    }

    static worker workers[MAX_THREADS];
    pthread_barrier_init(&start_line, NULL, (unsigned)opt.threads + 1);
    for (int i = 0; i < opt.threads; i++) {
        workers[i] = (worker){.id = i,
                              .ops_todo = opt.ops * (uint64_t)(i + 1) / (uint64_t)opt.threads -
                                          opt.ops * (uint64_t)i / (uint64_t)opt.threads};
        int rc = pthread_create(&workers[i].tid, NULL, work, &workers[i]);
        if (rc != 0) {
            fprintf(stderr, "%s: pthread_create: %s\n", s->name, strerror(rc));
            return 1;
        }
    }
    pthread_barrier_wait(&start_line);
    double t0 = now_s();
    if (opt.duration_ms > 0) {
        struct timespec d = {opt.duration_ms / 1000, (opt.duration_ms % 1000) * 1000000L};
        while (nanosleep(&d, &d) != 0)
            ;
        atomic_store(&stop_now, true);
    }
    worker total = {0};
    for (int i = 0; i < opt.threads; i++) {
        pthread_join(workers[i].tid, NULL);
        total.ops_done += workers[i].ops_done;
        total.puts += workers[i].puts;
        total.inserts += workers[i].inserts;
        total.gets += workers[i].gets;
        total.hits += workers[i].hits;
        total.bad_values += workers[i].bad_values;
    }
    double seconds = now_s() - t0;
    pthread_barrier_destroy(&start_line);

    printf("ops_done=%" PRIu64 " seconds=%.3f throughput_ops_s=%.0f\n", total.ops_done, seconds,
           seconds > 0 ? (double)total.ops_done / seconds : 0.0);
    if (!opt.quiet)
        printf("puts=%" PRIu64 " inserts=%" PRIu64 " gets=%" PRIu64 " hits=%" PRIu64 "\n",
               total.puts, total.inserts, total.gets, total.hits);
    bool ok = check_and_report(&checksum);
    if (total.bad_values != 0) {
        printf("check=FAILED %" PRIu64 " GETs returned a value never written\n",
               total.bad_values);
        ok = false;
    }
    printf("checksum=%016" PRIx64 "\n", checksum);
    fflush(stdout);
    pstore_close();
    return ok ? 0 : 1;
}
