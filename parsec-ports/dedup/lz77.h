/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lz77.h -- the compressor of dedup's compression stage: a small LZ77 with a
 * hash of 4-byte prefixes, a 64 KiB window and a byte-oriented format:
 *   0LLLLLLL  then L+1 literal bytes                     (1..128 literals)
 *   1LLLLLLL  then a 16-bit little-endian offset-1: copy L+4 bytes (4..131)
 */
#ifndef PARSEC_PORTS_LZ77_H
#define PARSEC_PORTS_LZ77_H

#include <stddef.h>

/* Worst-case compressed size of n input bytes. */
static inline size_t lz77_bound(size_t n)
{
    return n + n / 128 + 16;
}

size_t lz77_compress(const unsigned char *in, size_t n, unsigned char *out);
/* Returns the decompressed length, or (size_t)-1 for corrupt input. */
size_t lz77_decompress(const unsigned char *in, size_t n, unsigned char *out, size_t cap);

#endif /* PARSEC_PORTS_LZ77_H */
