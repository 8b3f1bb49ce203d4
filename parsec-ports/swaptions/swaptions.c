/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * swaptions -- PARSEC's swaption pricing: Monte-Carlo simulation of forward
 * rate curves under the Heath-Jarrow-Morton framework (Heath, Jarrow, Morton
 * 1992; the discretisation follows the textbook Musiela form), written here
 * from the model.
 *
 * Model: the forward curve f(t, t + j*dt), j = 0..n_maturities-1, evolves as
 *   f(t+dt, t+dt+j*dt) = f(t, t+(j+1)*dt) + mu_j dt + sum_k sigma_k(j) Z_k sqrt(dt)
 * with three volatility factors (level, slope, curvature) and the HJM
 * no-arbitrage drift mu_j = sum_k sigma_k(j) * sum_{i<=j} sigma_k(i) dt.
 * A payer swaption (expiry E, swap tenor L, strike K, paid every `dt`) is
 * worth at expiry max(0, 1 - P(E, E+L) - K dt sum_i P(E, E+i dt)) per unit
 * notional, discounted to today along the simulated short rate.
 *
 * Structure (as in PARSEC): an array of swaptions split statically between
 * the threads; each thread prices its swaptions one after the other.
 * Deterministic: every swaption has its own random stream seeded by its
 * index, so its price does not depend on which thread priced it.
 */
#include "checksum.h"
#include "pm_alloc.h"
#include "prng.h"
#include "workload.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N_FACTORS 3
#define MAX_MATURITIES 64

typedef struct swaption {
    double expiry_years;
    double tenor_years;
    double strike;
    double notional;
    double initial_forward[MAX_MATURITIES]; /* f(0, j dt) */
    double volatility[N_FACTORS][MAX_MATURITIES];
    /* results */
    double price;
    double std_error;
} swaption_t;

typedef struct sw_state {
    long n_swaptions;
    long trials;
    int n_maturities;
    double dt;
    swaption_t *swaptions;
} sw_state;

typedef struct worker {
    sw_state *s;
    int id, threads;
} worker_t;

static double standard_normal(prng_t *rng)
{
    /* Box-Muller; the second variate is dropped to keep the stream simple. */
    double u1 = prng_unit(rng);
    double u2 = prng_unit(rng);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void price_swaption(const sw_state *s, swaption_t *sw, long index)
{
    int n = s->n_maturities;
    double dt = s->dt;
    int expiry_steps = (int)lround(sw->expiry_years / dt);
    int tenor_steps = (int)lround(sw->tenor_years / dt);
    double drift[MAX_MATURITIES];
    for (int j = 0; j < n; j++) {
        double mu = 0;
        for (int k = 0; k < N_FACTORS; k++) {
            double cumulative = 0;
            for (int i = 0; i <= j; i++)
                cumulative += sw->volatility[k][i] * dt;
            mu += sw->volatility[k][j] * cumulative;
        }
        drift[j] = mu;
    }

    prng_t rng = prng_seed(0x5A9710E5ull + (uint64_t)index * 7919u);
    double sqrt_dt = sqrt(dt);
    double sum = 0, sum_sq = 0;
    double curve[MAX_MATURITIES], next[MAX_MATURITIES];
    for (long trial = 0; trial < s->trials; trial++) {
        for (int j = 0; j < n; j++)
            curve[j] = sw->initial_forward[j];
        double short_rate_integral = 0;
        for (int step = 0; step < expiry_steps; step++) {
            short_rate_integral += curve[0] * dt;
            double z[N_FACTORS];
            for (int k = 0; k < N_FACTORS; k++)
                z[k] = standard_normal(&rng);
            int live = n - step - 1; /* maturities still ahead after this step */
            for (int j = 0; j < live; j++) {
                double shock = 0;
                for (int k = 0; k < N_FACTORS; k++)
                    shock += sw->volatility[k][j] * z[k];
                next[j] = curve[j + 1] + drift[j] * dt + shock * sqrt_dt;
            }
            for (int j = 0; j < live; j++)
                curve[j] = next[j];
        }
        /* Discount factors P(E, E + i dt) from the curve at expiry. */
        double integral = 0, annuity = 0, discount = 1;
        for (int i = 1; i <= tenor_steps; i++) {
            integral += curve[i - 1] * dt;
            discount = exp(-integral);
            annuity += discount * dt;
        }
        double swap_value = 1.0 - discount - sw->strike * annuity;
        double payoff = swap_value > 0 ? swap_value * sw->notional : 0;
        double pv = payoff * exp(-short_rate_integral);
        sum += pv;
        sum_sq += pv * pv;
    }
    double mean = sum / (double)s->trials;
    double variance = sum_sq / (double)s->trials - mean * mean;
    sw->price = mean;
    sw->std_error = sqrt(variance > 0 ? variance : 0) / sqrt((double)s->trials);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    long begin, end;
    wl_slice(w->s->n_swaptions, w->threads, w->id, &begin, &end);
    for (long i = begin; i < end; i++)
        price_swaption(w->s, &w->s->swaptions[i], i);
    return NULL;
}

static void generate_swaptions(sw_state *s)
{
    prng_t rng = prng_seed(0x5A9A7ull);
    for (long i = 0; i < s->n_swaptions; i++) {
        swaption_t *sw = &s->swaptions[i];
        /* Expiry plus tenor must fit the curve: at most n_maturities steps. */
        sw->expiry_years = s->dt * (double)(4 + prng_below(&rng, 13));    /* 1..4 years */
        sw->tenor_years = s->dt * (double)(4 * (1 + prng_below(&rng, 5))); /* 1..5 years */
        sw->strike = prng_range(&rng, 0.02, 0.07);
        sw->notional = 100.0;
        double level = prng_range(&rng, 0.02, 0.06);
        double slope = prng_range(&rng, 0.0, 0.0008);
        for (int j = 0; j < s->n_maturities; j++) {
            double t = (double)j * s->dt;
            sw->initial_forward[j] = level + slope * (double)j;
            sw->volatility[0][j] = 0.0080;                         /* level */
            sw->volatility[1][j] = 0.0050 * exp(-0.3 * t);         /* slope */
            sw->volatility[2][j] = 0.0030 * t * exp(-0.5 * t);     /* curvature */
        }
    }
}

int main(int argc, char **argv)
{
    wl_options opt = wl_parse_args(argc, argv, "swaptions");
    sw_state *s = PM_ALLOC(sizeof *s, "swaptions.state");
    s->n_swaptions = opt.scale == 0 ? 8 : 64;
    s->trials = opt.scale == 0 ? 400 : 16000L * opt.scale;
    s->n_maturities = 40; /* quarterly over 10 years */
    s->dt = 0.25;
    s->swaptions = PM_ALLOC((size_t)s->n_swaptions * sizeof *s->swaptions, "swaptions.swaptions");
    generate_swaptions(s);
    wl_info(&opt, "swaptions: %ld swaptions, %ld trials each", s->n_swaptions, s->trials);

    double start = wl_now();
    pthread_t tids[WL_MAX_THREADS];
    worker_t workers[WL_MAX_THREADS];
    for (int t = 0; t < opt.threads; t++) {
        workers[t] = (worker_t){s, t, opt.threads};
        wl_thread_create(&tids[t], worker_main, &workers[t]);
    }
    for (int t = 0; t < opt.threads; t++)
        wl_thread_join(tids[t]);
    double elapsed = wl_now() - start;

    checksum_t ck = checksum_init();
    for (long i = 0; i < s->n_swaptions; i++) {
        checksum_double(&ck, s->swaptions[i].price);
        checksum_double(&ck, s->swaptions[i].std_error);
        if (i < 3)
            wl_info(&opt, "  swaption %ld: price %.6f +- %.6f", i, s->swaptions[i].price,
                    s->swaptions[i].std_error);
    }
    wl_finish(&opt, elapsed, ck.h);
    return 0;
}
