/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stress_mix.h -- the 64-bit mixing function the stress programs use to derive
 * values from keys (so a check can tell a stored value from a corrupted one)
 * and distinct pseudo-random keys from counters.  It is the splitmix64
 * finaliser: every step (xor-shift, multiply by an odd constant) is invertible,
 * so the whole function is a bijection and distinct inputs give distinct keys.
 */
#ifndef STRESS_MIX_H
#define STRESS_MIX_H

#include <stdint.h>

static inline uint64_t stress_mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

#endif /* STRESS_MIX_H */
