/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blackscholes -- PARSEC's option-pricing kernel, written from the
 * Black-Scholes closed form (Black & Scholes 1973; Hull, "Options, Futures and
 * Other Derivatives") with the Abramowitz-Stegun 26.2.17 polynomial for the
 * cumulative normal distribution.
 *
 * Structure (as in PARSEC): one array of options, split statically into one
 * contiguous slice per thread; every thread prices its slice, and the whole
 * pricing is repeated `iterations` times.  Threads meet at a barrier after each
 * iteration, and the last to arrive advances the progress cursor
 * (iterations_done) under the state lock: that critical section is the FASE
 * after which an iteration counts as done, so the ported build resumes a
 * crashed run from the first unfinished iteration.
 *
 * Deterministic: every price depends on its own option only.
 */
#include "barrier.h"
#include "checksum.h"
#include "pm_alloc.h"
#include "prng.h"
#include "workload.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>

enum option_type { CALL = 0, PUT = 1 };

typedef struct option {
    double spot;       /* S: price of the underlying */
    double strike;     /* K */
    double rate;       /* r: risk-free interest rate */
    double volatility; /* sigma */
    double years;      /* T: time to expiry */
    int type;          /* enum option_type */
} option_t;

/* Everything that survives a crash; the arrays are separate named objects. */
typedef struct bs_state {
    long n_options;
    long iterations;
    long iterations_done; /* progress cursor, advanced under `lock` */
    option_t *options;
    double *prices;
    pthread_mutex_t lock;
} bs_state;

typedef struct worker {
    bs_state *state;
    wl_barrier *barrier;
    int id;
    int threads;
    long first_iteration;
} worker_t;

/* Cumulative standard normal distribution, |error| < 7.5e-8 (A&S 26.2.17). */
static double cndf(double x)
{
    static const double p = 0.2316419;
    static const double b[5] = {0.319381530, -0.356563782, 1.781477937,
                                -1.821255978, 1.330274429};
    double ax = fabs(x);
    double t = 1.0 / (1.0 + p * ax);
    double poly = t * (b[0] + t * (b[1] + t * (b[2] + t * (b[3] + t * b[4]))));
    double pdf = exp(-0.5 * ax * ax) * 0.39894228040143270; /* 1/sqrt(2 pi) */
    double upper = 1.0 - pdf * poly;
    return x >= 0 ? upper : 1.0 - upper;
}

static double price_option(const option_t *o)
{
    double sqrt_t = sqrt(o->years);
    double d1 = (log(o->spot / o->strike) +
                 (o->rate + 0.5 * o->volatility * o->volatility) * o->years) /
                (o->volatility * sqrt_t);
    double d2 = d1 - o->volatility * sqrt_t;
    double discounted_strike = o->strike * exp(-o->rate * o->years);
    if (o->type == CALL)
        return o->spot * cndf(d1) - discounted_strike * cndf(d2);
    return discounted_strike * cndf(-d2) - o->spot * cndf(-d1);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    bs_state *s = w->state;
    long begin, end;
    wl_slice(s->n_options, w->threads, w->id, &begin, &end);

    for (long it = w->first_iteration; it < s->iterations; it++) {
        for (long i = begin; i < end; i++)
            s->prices[i] = price_option(&s->options[i]);
        if (wl_barrier_wait(w->barrier)) {
            pthread_mutex_lock(&s->lock);
            s->iterations_done = it + 1;
            pthread_mutex_unlock(&s->lock);
        }
        /* Nobody starts the next iteration before the cursor moved. */
        wl_barrier_wait(w->barrier);
    }
    return NULL;
}

static void generate_options(option_t *options, long n)
{
    prng_t rng = prng_seed(0xB1AC5C401E5ull);
    for (long i = 0; i < n; i++) {
        option_t *o = &options[i];
        o->spot = prng_range(&rng, 10.0, 150.0);
        o->strike = o->spot * prng_range(&rng, 0.7, 1.3);
        o->rate = prng_range(&rng, 0.01, 0.10);
        o->volatility = prng_range(&rng, 0.05, 0.65);
        o->years = prng_range(&rng, 0.1, 3.0);
        o->type = prng_below(&rng, 2) ? PUT : CALL;
    }
}

static bs_state *create_state(long n_options, long iterations)
{
    bs_state *s = PM_ALLOC(sizeof *s, "blackscholes.state");
    s->options = PM_ALLOC((size_t)n_options * sizeof *s->options, "blackscholes.options");
    s->prices = PM_ALLOC((size_t)n_options * sizeof *s->prices, "blackscholes.prices");
    generate_options(s->options, n_options);
    pthread_mutex_init(&s->lock, NULL);
    /* Publish the sizes last: a recovered state with n_options set is complete. */
    pthread_mutex_lock(&s->lock);
    s->iterations = iterations;
    s->iterations_done = 0;
    s->n_options = n_options;
    pthread_mutex_unlock(&s->lock);
    return s;
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "blackscholes");
    long n_options = wl_scaled(&opt, 4096, 200000);
    long iterations = opt.scale == 0 ? 10 : 180;

    bs_state *s = PM_RECOVER(sizeof(bs_state), "blackscholes.state");
    if (s != NULL && (s->n_options != n_options || s->iterations != iterations)) {
        wl_info(&opt, "recovered state is incomplete or for another input: starting over");
        s = NULL;
    }
    if (s != NULL) {
        pthread_mutex_init(&s->lock, NULL); /* no thread holds it after a restart */
        wl_info(&opt, "resuming after iteration %ld of %ld", s->iterations_done,
                s->iterations);
    } else {
        s = create_state(n_options, iterations);
    }
    wl_info(&opt, "blackscholes: %ld options, %ld iterations", n_options, iterations);

    double start = wl_now();
    wl_barrier barrier;
    wl_barrier_init(&barrier, opt.threads);
    pthread_t tids[WL_MAX_THREADS];
    worker_t workers[WL_MAX_THREADS];
    for (int t = 0; t < opt.threads; t++) {
        workers[t] = (worker_t){s, &barrier, t, opt.threads, s->iterations_done};
        wl_thread_create(&tids[t], worker_main, &workers[t]);
    }
    for (int t = 0; t < opt.threads; t++)
        wl_thread_join(tids[t]);
    double elapsed = wl_now() - start;

    checksum_t ck = checksum_init();
    double total = 0;
    for (long i = 0; i < s->n_options; i++) {
        checksum_double(&ck, s->prices[i]);
        total += s->prices[i];
    }
    checksum_u64(&ck, (uint64_t)s->iterations_done);
    wl_info(&opt, "sum of prices %.6f", total);
    wl_barrier_destroy(&barrier);
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
