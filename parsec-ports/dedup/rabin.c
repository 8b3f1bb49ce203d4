/* SPDX-License-Identifier: BSD-3-Clause */
/* rabin.c -- rolling-hash chunk boundaries (see rabin.h). */
#include "rabin.h"

#include <stdint.h>

/* Polynomial rolling hash h = sum c_i B^(w-1-i) mod 2^64. */
#define RABIN_BASE 0x100000001B3ull

static uint64_t base_pow_window(void)
{
    uint64_t p = 1;
    for (int i = 0; i < RABIN_WINDOW; i++)
        p *= RABIN_BASE;
    return p;
}

size_t rabin_next_chunk(const unsigned char *data, size_t len)
{
    uint64_t out_factor = base_pow_window(); /* drops the byte leaving the window */
    if (len <= RABIN_MIN_CHUNK)
        return len;
    size_t limit = len < RABIN_MAX_CHUNK ? len : RABIN_MAX_CHUNK;
    uint64_t h = 0;
    size_t start = RABIN_MIN_CHUNK - RABIN_WINDOW;
    for (size_t i = start; i < limit; i++) {
        h = h * RABIN_BASE + data[i];
        if (i >= start + RABIN_WINDOW)
            h -= out_factor * data[i - RABIN_WINDOW];
        if (i + 1 >= RABIN_MIN_CHUNK && ((h >> 16) & RABIN_MASK) == 0x78)
            return i + 1;
    }
    return limit;
}
