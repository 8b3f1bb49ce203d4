/* SPDX-License-Identifier: BSD-3-Clause */
/* lz77.c -- LZ77 compressor and decompressor (see lz77.h). */
#include "lz77.h"

#include <stdint.h>
#include <string.h>

#define HASH_BITS 12
#define WINDOW 65536
#define MIN_MATCH 4
#define MAX_MATCH 131
#define MAX_LITERALS 128

static uint32_t hash4(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return (v * 2654435761u) >> (32 - HASH_BITS);
}

static size_t flush_literals(const unsigned char *lit, size_t n, unsigned char *out)
{
    size_t o = 0;
    while (n > 0) {
        size_t run = n < MAX_LITERALS ? n : MAX_LITERALS;
        out[o++] = (unsigned char)(run - 1);
        memcpy(out + o, lit, run);
        o += run;
        lit += run;
        n -= run;
    }
    return o;
}

size_t lz77_compress(const unsigned char *in, size_t n, unsigned char *out)
{
    /* Positions + 1 of the latest occurrence of each hashed prefix (0 = none). */
    uint32_t table[1 << HASH_BITS] = {0};
    size_t o = 0, i = 0, literal_start = 0;
    while (i + MIN_MATCH <= n) {
        uint32_t h = hash4(in + i);
        size_t candidate = table[h];
        table[h] = (uint32_t)(i + 1);
        if (candidate != 0 && i - (candidate - 1) <= WINDOW &&
            memcmp(in + candidate - 1, in + i, MIN_MATCH) == 0) {
            size_t from = candidate - 1, len = MIN_MATCH;
            while (len < MAX_MATCH && i + len < n && in[from + len] == in[i + len])
                len++;
            o += flush_literals(in + literal_start, i - literal_start, out + o);
            size_t offset = i - from - 1;
            out[o++] = (unsigned char)(0x80 | (len - MIN_MATCH));
            out[o++] = (unsigned char)(offset & 0xff);
            out[o++] = (unsigned char)(offset >> 8);
            i += len;
            literal_start = i;
        } else {
            i++;
        }
    }
    o += flush_literals(in + literal_start, n - literal_start, out + o);
    return o;
}

size_t lz77_decompress(const unsigned char *in, size_t n, unsigned char *out, size_t cap)
{
    size_t i = 0, o = 0;
    while (i < n) {
        unsigned char token = in[i++];
        if (token & 0x80) {
            if (i + 2 > n)
                return (size_t)-1;
            size_t len = (size_t)(token & 0x7f) + MIN_MATCH;
            size_t offset = (size_t)in[i] | (size_t)in[i + 1] << 8;
            i += 2;
            if (offset + 1 > o || o + len > cap)
                return (size_t)-1;
            /* Byte by byte: the source may overlap the destination. */
            for (size_t k = 0; k < len; k++, o++)
                out[o] = out[o - offset - 1];
        } else {
            size_t run = (size_t)token + 1;
            if (i + run > n || o + run > cap)
                return (size_t)-1;
            memcpy(out + o, in + i, run);
            i += run;
            o += run;
        }
    }
    return o;
}
