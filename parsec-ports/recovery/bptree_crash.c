/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bptree_crash.c -- the crash/recovery experiment over the persistent B+tree
 * of ../stress/bptree.h (built over pmthreads as `bptree_crash`, and over
 * libpmemobj as `bptree_crash_pmemobj` for comparison).
 *
 *   bptree_crash [-t THREADS] [-d MS] [-P POOL]     insert until killed (or MS)
 *   bptree_crash -r [-P POOL]                       recover, verify, report
 *   bptree_crash -c [-t THREADS] [-d MS] [-P POOL]  recover, verify, report,
 *                                                   then insert on (the soak)
 *
 * Insert mode: every thread inserts distinct keys as fast as it can and
 * counts an insert as acknowledged once bpt_put has returned.  The main thread
 * prints `inserted=<acknowledged so far>` every 10 ms and flushes, so that
 * after a kill -9 the last line says how many inserts the program had
 * acknowledged when it died.  The pmthreads build adds `t_ns=` (CLOCK_MONOTONIC)
 * and `durable=` (pmthreads_durable_epoch() read just after the count): a
 * count is durable once a later line shows a larger durable epoch than the one
 * read after the count was taken (two larger when the write-back of an epoch
 * overlaps the next one).
 *
 * Thread t's i-th insert stores value (t << 40 | i) under key mix(value).  The
 * mix is a bijection, so keys never collide, and from a recovered value we know
 * which insert it was.  Recover mode checks the tree's invariants, that every
 * key matches its value, and that what survived of each thread is a prefix of
 * its inserts (i.e. 0..n-1, no holes): pmthreads persists only at global
 * quiescent points, and a pmemobj transaction is all or nothing, so anything
 * else is a consistency bug.  It prints `recovered=N` and `recovery_ms`, the
 * time from STRESS_T0_NS (CLOCK_REALTIME nanoseconds, set by the launching
 * script just before exec) -- or from main() when it is unset -- until the
 * structure was verified.
 *
 * Continue mode (-c) is recover mode followed by insert mode on the same tree:
 * each thread goes on from the end of its surviving prefix, so the tree keeps
 * the prefix property across any number of kills (bench/soak.sh).  A pool
 * without a tree (killed before the first epoch) starts a new one.
 */
#include "bptree.h"
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

#ifdef PSTORE_PMTHREADS
#include <pmthreads.h>
#endif

#define MAX_THREADS 64
#define SEQ_BITS 40
#define SEQ_MASK ((1ull << SEQ_BITS) - 1)
#define REPORT_EVERY_NS 10000000L /* the `inserted=` line every 10 ms */

typedef struct inserter {
    pthread_t tid;
    uint64_t id;
    uint64_t first_seq; /* where this thread starts (continue mode) */
    _Atomic uint64_t acknowledged;
    char pad[48]; /* one counter per cache line */
} inserter;

static bpt_tree *tree;
static inserter inserters[MAX_THREADS];
static atomic_bool stop_now;

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *insert_loop(void *arg)
{
    inserter *me = arg;
    for (uint64_t seq = me->first_seq; seq <= SEQ_MASK && !atomic_load_explicit(&stop_now, memory_order_relaxed);
         seq++) {
        uint64_t value = me->id << SEQ_BITS | seq;
        bpt_put(tree, stress_mix(value), value);
        atomic_store_explicit(&me->acknowledged, seq + 1, memory_order_release);
    }
    return NULL;
}

static uint64_t acknowledged_total(int threads)
{
    uint64_t sum = 0;
    for (int i = 0; i < threads; i++)
        sum += atomic_load_explicit(&inserters[i].acknowledged, memory_order_acquire);
    return sum;
}

static void print_inserted(int threads, const char *extra)
{
    uint64_t n = acknowledged_total(threads);
#ifdef PSTORE_PMTHREADS
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    printf("inserted=%" PRIu64 " t_ns=%lld durable=%" PRIu64 "%s\n", n,
           (long long)now.tv_sec * 1000000000LL + now.tv_nsec, pmthreads_durable_epoch(), extra);
#else
    printf("inserted=%" PRIu64 "%s\n", n, extra);
#endif
    fflush(stdout);
}

/* resume: the tree holds earlier inserts (continue mode); otherwise the pool
 * must be fresh. */
static int run_inserts(int threads, long duration_ms, bool resume)
{
    if (!resume && bpt_is_initialised(tree)) {
        fprintf(stderr, "bptree_crash: the pool already holds a tree; use a fresh pool "
                        "(or -c to go on inserting into it)\n");
        return 1;
    }
    if (!bpt_is_initialised(tree))
        bpt_init(tree);
    printf("backend=%s threads=%d\n", pstore_backend(), threads);
    fflush(stdout);
    for (int i = 0; i < threads; i++) {
        inserters[i].id = (uint64_t)i;
        if (pthread_create(&inserters[i].tid, NULL, insert_loop, &inserters[i]) != 0) {
            fprintf(stderr, "bptree_crash: pthread_create failed\n");
            return 1;
        }
    }
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        struct timespec tick = {0, REPORT_EVERY_NS};
        nanosleep(&tick, NULL);
        print_inserted(threads, "");
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed_ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (duration_ms > 0 && elapsed_ms >= duration_ms)
            break;
    }
    atomic_store(&stop_now, true);
    for (int i = 0; i < threads; i++)
        pthread_join(inserters[i].tid, NULL);
    print_inserted(threads, " finished=yes");
    return 0;
}

/* What the recovered tree says about each thread's inserts. */
typedef struct survey {
    uint64_t count[MAX_THREADS];
    uint64_t max_seq[MAX_THREADS];
    uint64_t total;
    uint64_t bad; /* a key that does not match its value, or an unknown thread */
} survey;

static void survey_one(uint64_t key, uint64_t value, void *ctx)
{
    survey *s = ctx;
    uint64_t thread = value >> SEQ_BITS, seq = value & SEQ_MASK;
    s->total++;
    if (key != stress_mix(value) || thread >= MAX_THREADS) {
        s->bad++;
        return;
    }
    s->count[thread]++;
    if (seq > s->max_seq[thread] || s->count[thread] == 1)
        s->max_seq[thread] = seq;
}

static survey s;

static int recover(uint64_t t0_ns, bool resume)
{
    char why[256] = "";
    bpt_report report = {0};
    if (!bpt_is_initialised(tree)) {
        if (resume) {
            printf("recovered=0 check=ok no tree yet\n");
            return 0;
        }
        printf("recovered=0 check=FAILED no tree in the pool\n");
        return 1;
    }
    bool ok = bpt_check(tree, &report, why, sizeof why);
    bool prefix = true;
    if (ok) {
        bpt_foreach(tree, survey_one, &s);
        for (int t = 0; t < MAX_THREADS; t++)
            if (s.count[t] != 0 && s.count[t] != s.max_seq[t] + 1)
                prefix = false;
        if (s.bad != 0) {
            snprintf(why, sizeof why, "%" PRIu64 " keys do not match their values", s.bad);
            ok = false;
        } else if (!prefix) {
            snprintf(why, sizeof why, "a thread's surviving inserts have holes");
            ok = false;
        }
    }
    double ms = (double)(realtime_ns() - t0_ns) / 1e6;
    printf("recovered=%" PRIu64 " height=%" PRIu64 " nodes=%" PRIu64 " check=%s%s%s\n",
           report.keys, report.height, report.nodes, ok ? "ok" : "FAILED", ok ? "" : " ", why);
    printf("recovery_ms=%.3f\n", ms);
    fflush(stdout);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    uint64_t t0_ns = realtime_ns();
    const char *t0 = getenv("STRESS_T0_NS");
    if (t0 != NULL && *t0 != '\0')
        t0_ns = strtoull(t0, NULL, 10);

    int threads = 2;
    long duration_ms = 0;
    bool recover_mode = false, continue_mode = false;
    const char *pool = NULL;
    int c;
    while ((c = getopt(argc, argv, "t:d:P:rc")) != -1) {
        switch (c) {
        case 't': threads = atoi(optarg); break;
        case 'd': duration_ms = atol(optarg); break;
        case 'P': pool = optarg; break;
        case 'r': recover_mode = true; break;
        case 'c': continue_mode = true; break;
        default:
            fprintf(stderr, "usage: %s [-c] [-t THREADS] [-d MS] [-P POOL] | -r [-P POOL]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "%s: threads must be 1..%d\n", argv[0], MAX_THREADS);
        return 2;
    }
    if (pool == NULL && strcmp(pstore_backend(), "pmemobj") == 0) {
        /* A temporary pmemobj pool would vanish with the process. */
        fprintf(stderr, "%s: the pmemobj build needs -P POOL\n", argv[0]);
        return 2;
    }

    tree = pstore_open(pool, "recovery.bptree", sizeof(bpt_tree));
    int rc;
    if (recover_mode) {
        rc = recover(t0_ns, false);
    } else if (continue_mode) {
        rc = recover(t0_ns, true);
        if (rc == 0) {
            for (int t = 0; t < threads; t++) {
                inserters[t].first_seq = s.count[t];
                atomic_store(&inserters[t].acknowledged, s.count[t]);
            }
            /* A thread beyond -t from an earlier run keeps its prefix; it
             * just does not grow. */
            rc = run_inserts(threads, duration_ms, true);
        }
    } else {
        rc = run_inserts(threads, duration_ms, false);
    }
    pstore_close();
    return rc;
}
