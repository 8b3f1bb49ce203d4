/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prng.h -- the deterministic pseudo-random generator every workload uses to
 * generate its input and drive its Monte-Carlo or annealing decisions.
 *
 * splitmix64 (Steele, Lea, Flood 2014): one 64-bit word of state, good enough
 * statistically for synthetic inputs, and trivially seeded per object
 * (prng_seed(base ^ index)) so that results do not depend on which thread
 * handled which object.
 */
#ifndef PARSEC_PORTS_PRNG_H
#define PARSEC_PORTS_PRNG_H

#include <stdint.h>

typedef struct prng {
    uint64_t state;
} prng_t;

static inline prng_t prng_seed(uint64_t seed)
{
    prng_t r = {seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull};
    return r;
}

static inline uint64_t prng_next(prng_t *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound), bound > 0.  The tiny modulo bias is irrelevant here. */
static inline uint64_t prng_below(prng_t *r, uint64_t bound)
{
    return prng_next(r) % bound;
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double prng_unit(prng_t *r)
{
    return (double)(prng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform double in [lo, hi). */
static inline double prng_range(prng_t *r, double lo, double hi)
{
    return lo + (hi - lo) * prng_unit(r);
}

#endif /* PARSEC_PORTS_PRNG_H */
