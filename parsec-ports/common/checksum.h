/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * checksum.h -- the result digest every workload prints as its last line
 * (`checksum=<16 hex digits>`).  FNV-1a 64 over the bytes of the result in a
 * fixed order; doubles are hashed by bit pattern, so a checksum only matches
 * when the floating-point result is bit-identical.
 */
#ifndef PARSEC_PORTS_CHECKSUM_H
#define PARSEC_PORTS_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct checksum {
    uint64_t h;
} checksum_t;

static inline checksum_t checksum_init(void)
{
    checksum_t c = {0xcbf29ce484222325ull};
    return c;
}

static inline void checksum_bytes(checksum_t *c, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = c->h;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    c->h = h;
}

static inline void checksum_u64(checksum_t *c, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i)); /* little-endian, host independent */
    checksum_bytes(c, b, sizeof b);
}

static inline void checksum_double(checksum_t *c, double d)
{
    uint64_t bits;
    if (d == 0.0)
        d = 0.0; /* -0.0 and +0.0 are the same result */
    memcpy(&bits, &d, sizeof bits);
    checksum_u64(c, bits);
}

#endif /* PARSEC_PORTS_CHECKSUM_H */
