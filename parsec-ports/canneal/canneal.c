/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * canneal -- PARSEC's cache-aware simulated annealing for chip routing cost
 * minimisation, written from the textbook simulated annealing algorithm
 * (Kirkpatrick, Gelatt, Vecchi 1983) over a generated netlist.
 *
 * A netlist of n elements sits on a grid with exactly one element per
 * location.  Each element is connected to a few others (mostly nearby in the
 * initial placement); the routing cost is the sum, over connections, of the
 * Manhattan distance between the two ends.  At every temperature step each
 * thread attempts moves_per_step / threads swaps of two random elements:
 * it computes the change in routing cost, accepts improvements always and
 * deteriorations with probability exp(-delta / T), and performs an accepted
 * swap under the two elements' locks (taken in element order: no deadlock).
 * Threads meet at a barrier between temperature steps; the temperature then
 * falls geometrically.  Locations are read without locks while evaluating a
 * move (relaxed atomics), as PARSEC does: a move can be evaluated against a
 * neighbour that is moving at the same time, which is what makes annealing
 * with several threads non-deterministic.
 *
 * Determinism: with one thread the run is deterministic.  With more, the
 * final placement depends on interleaving.  So the checksum covers only what
 * does not: the netlist, the initial cost, the number of moves attempted and
 * the invariant the per-element locks protect -- the final placement is still
 * a permutation of the grid locations (a torn swap would duplicate one).  The
 * final routing cost is printed as information.
 */
#include "barrier.h"
#include "checksum.h"
#include "pm_alloc.h"
#include "prng.h"
#include "workload.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_FANOUT 6

typedef struct element {
    _Atomic uint32_t location;       /* x << 16 | y; written under `lock` */
    uint32_t n_links;
    uint32_t links[2 * MAX_FANOUT];  /* fan-in and fan-out, undirected */
    pthread_mutex_t lock;
} element_t;

typedef struct canneal_state {
    long n_elements;
    int grid_width;
    int steps;
    long moves_per_step;
    double start_temperature;
    element_t *elements;
    _Atomic long accepted; /* statistics only */
} canneal_state;

typedef struct worker {
    canneal_state *s;
    wl_barrier *barrier;
    int id, threads;
} worker_t;

static inline int loc_x(uint32_t l) { return (int)(l >> 16); }
static inline int loc_y(uint32_t l) { return (int)(l & 0xffff); }

static uint32_t location_of(const canneal_state *s, uint32_t e)
{
    return atomic_load_explicit(&s->elements[e].location, memory_order_relaxed);
}

/* Routing cost of element e's connections if it were at location `at`. */
static long cost_at(const canneal_state *s, uint32_t e, uint32_t at, uint32_t skip,
                    uint32_t skip_at)
{
    const element_t *el = &s->elements[e];
    long cost = 0;
    for (uint32_t i = 0; i < el->n_links; i++) {
        uint32_t other = el->links[i];
        /* When a and b swap, a's link to b sees b at a's old place. */
        uint32_t ol = other == skip ? skip_at : location_of(s, other);
        cost += labs((long)loc_x(at) - loc_x(ol)) + labs((long)loc_y(at) - loc_y(ol));
    }
    return cost;
}

static long swap_delta(const canneal_state *s, uint32_t a, uint32_t b)
{
    uint32_t la = location_of(s, a), lb = location_of(s, b);
    long before = cost_at(s, a, la, b, lb) + cost_at(s, b, lb, a, la);
    long after = cost_at(s, a, lb, b, la) + cost_at(s, b, la, a, lb);
    return after - before;
}

static void swap_locations(canneal_state *s, uint32_t a, uint32_t b)
{
    element_t *first = &s->elements[a < b ? a : b];
    element_t *second = &s->elements[a < b ? b : a];
    pthread_mutex_lock(&first->lock);
    pthread_mutex_lock(&second->lock);
    uint32_t la = atomic_load_explicit(&s->elements[a].location, memory_order_relaxed);
    uint32_t lb = atomic_load_explicit(&s->elements[b].location, memory_order_relaxed);
    atomic_store_explicit(&s->elements[a].location, lb, memory_order_relaxed);
    atomic_store_explicit(&s->elements[b].location, la, memory_order_relaxed);
    pthread_mutex_unlock(&second->lock);
    pthread_mutex_unlock(&first->lock);
}

static long total_cost(const canneal_state *s)
{
    long cost = 0;
    for (long e = 0; e < s->n_elements; e++)
        cost += cost_at(s, (uint32_t)e, location_of(s, (uint32_t)e), UINT32_MAX, 0);
    return cost / 2; /* every connection counted from both ends */
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    canneal_state *s = w->s;
    long begin, end;
    wl_slice(s->moves_per_step, w->threads, w->id, &begin, &end);
    double temperature = s->start_temperature;
    long accepted = 0;
    for (int step = 0; step < s->steps; step++) {
        prng_t rng = prng_seed(((uint64_t)step << 20) ^ (uint64_t)w->id ^ 0xCA22EA1ull);
        for (long m = begin; m < end; m++) {
            uint32_t a = (uint32_t)prng_below(&rng, (uint64_t)s->n_elements);
            uint32_t b = (uint32_t)prng_below(&rng, (uint64_t)s->n_elements);
            if (a == b)
                continue;
            long delta = swap_delta(s, a, b);
            if (delta < 0 || prng_unit(&rng) < exp(-(double)delta / temperature)) {
                swap_locations(s, a, b);
                accepted++;
            }
        }
        temperature *= 0.9;
        wl_barrier_wait(w->barrier);
    }
    atomic_fetch_add(&s->accepted, accepted);
    return NULL;
}

static void add_link(element_t *el, uint32_t other)
{
    if (el->n_links < 2 * MAX_FANOUT)
        el->links[el->n_links++] = other;
}

static void generate_netlist(canneal_state *s)
{
    prng_t rng = prng_seed(0xCA22EA10ull);
    long n = s->n_elements;
    int w = s->grid_width;
    for (long e = 0; e < n; e++) {
        pthread_mutex_init(&s->elements[e].lock, NULL);
        atomic_init(&s->elements[e].location,
                    (uint32_t)((e % w) << 16 | (e / w)));
    }
    /* A random initial placement: shuffle locations (Fisher-Yates). */
    for (long e = n - 1; e > 0; e--) {
        long o = (long)prng_below(&rng, (uint64_t)e + 1);
        uint32_t t = atomic_load(&s->elements[e].location);
        atomic_store(&s->elements[e].location, atomic_load(&s->elements[o].location));
        atomic_store(&s->elements[o].location, t);
    }
    /* Connections: each element drives 1..4 others, mostly close by index. */
    for (long e = 0; e < n; e++) {
        int fanout = 1 + (int)prng_below(&rng, 4);
        for (int k = 0; k < fanout; k++) {
            long other = prng_below(&rng, 4) == 0
                             ? (long)prng_below(&rng, (uint64_t)n)
                             : (e + 1 + (long)prng_below(&rng, 64)) % n;
            if (other == e || s->elements[e].n_links >= 2 * MAX_FANOUT ||
                s->elements[other].n_links >= 2 * MAX_FANOUT)
                continue;
            add_link(&s->elements[e], (uint32_t)other);
            add_link(&s->elements[other], (uint32_t)e);
        }
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "canneal");
    canneal_state *s = PM_ALLOC(sizeof *s, "canneal.state");
    s->grid_width = opt.scale == 0 ? 64 : 256;
    s->n_elements = (long)s->grid_width * (opt.scale == 0 ? 64 : 256L * opt.scale);
    s->steps = opt.scale == 0 ? 8 : 140;
    s->moves_per_step = opt.scale == 0 ? 4000 : 60000L * opt.scale;
    s->start_temperature = 50.0;
    s->elements = PM_ALLOC((size_t)s->n_elements * sizeof *s->elements, "canneal.elements");
    generate_netlist(s);
    long initial_cost = total_cost(s);
    wl_info(&opt, "canneal: %ld elements, %d steps of %ld moves, initial cost %ld",
            s->n_elements, s->steps, s->moves_per_step, initial_cost);

    double start = wl_now();
    wl_barrier barrier;
    wl_barrier_init(&barrier, opt.threads);
    pthread_t tids[WL_MAX_THREADS];
    worker_t workers[WL_MAX_THREADS];
    for (int t = 0; t < opt.threads; t++) {
        workers[t] = (worker_t){s, &barrier, t, opt.threads};
        wl_thread_create(&tids[t], worker_main, &workers[t]);
    }
    for (int t = 0; t < opt.threads; t++)
        wl_thread_join(tids[t]);
    double elapsed = wl_now() - start;
    wl_barrier_destroy(&barrier);

    long final_cost = total_cost(s);
    wl_info(&opt, "final routing cost %ld (%.1f%% of initial), %ld swaps accepted",
            final_cost, 100.0 * (double)final_cost / (double)initial_cost,
            (long)atomic_load(&s->accepted));

    /* Deterministic digest: netlist, initial cost, work done, permutation check. */
    checksum_t ck = checksum_init();
    checksum_u64(&ck, (uint64_t)s->n_elements);
    for (long e = 0; e < s->n_elements; e++) {
        checksum_u64(&ck, s->elements[e].n_links);
        checksum_bytes(&ck, s->elements[e].links, s->elements[e].n_links * sizeof(uint32_t));
    }
    checksum_u64(&ck, (uint64_t)initial_cost);
    checksum_u64(&ck, (uint64_t)s->steps * (uint64_t)s->moves_per_step);
    uint32_t *locs = malloc((size_t)s->n_elements * sizeof *locs);
    for (long e = 0; e < s->n_elements; e++)
        locs[e] = location_of(s, (uint32_t)e);
    qsort(locs, (size_t)s->n_elements, sizeof *locs, cmp_u32);
    int permutation = 1;
    for (long e = 0; e < s->n_elements; e++)
        if (locs[e] != (uint32_t)((e / (s->n_elements / s->grid_width)) << 16 |
                                  (e % (s->n_elements / s->grid_width))))
            permutation = 0;
    free(locs);
    wl_info(&opt, "placement is %sa permutation of the grid", permutation ? "" : "NOT ");
    checksum_u64(&ck, (uint64_t)permutation);
    wl_finish(&opt, elapsed, ck.h);
    return permutation ? 0 : 1;
}
