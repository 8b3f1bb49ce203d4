/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rabin.h -- content-defined chunking with a Rabin-Karp rolling hash, as
 * dedup's fine-grained fragmentation stage does: a boundary falls after any
 * position where the hash of the preceding window has its low bits equal to
 * a fixed pattern, so identical content yields identical chunks wherever it
 * sits in the stream.
 */
#ifndef PARSEC_PORTS_RABIN_H
#define PARSEC_PORTS_RABIN_H

#include <stddef.h>

#define RABIN_WINDOW 48
#define RABIN_MIN_CHUNK 512
#define RABIN_MAX_CHUNK 16384
#define RABIN_MASK 0xfff /* about 4 KiB average chunk */

/* The length of the first chunk of data[0..len): at most RABIN_MAX_CHUNK. */
size_t rabin_next_chunk(const unsigned char *data, size_t len);

#endif /* PARSEC_PORTS_RABIN_H */
