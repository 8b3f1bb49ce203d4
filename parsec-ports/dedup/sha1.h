/* SPDX-License-Identifier: BSD-3-Clause */
/* sha1.h -- SHA-1 (FIPS 180-4), the chunk fingerprint of dedup. */
#ifndef PARSEC_PORTS_SHA1_H
#define PARSEC_PORTS_SHA1_H

#include <stddef.h>
#include <stdint.h>

#define SHA1_DIGEST_BYTES 20

void sha1(const void *data, size_t len, uint8_t digest[SHA1_DIGEST_BYTES]);

#endif /* PARSEC_PORTS_SHA1_H */
