#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Turn pool files into fuzz_pool inputs ("line" form, see fuzz_pool.c):
u32 file size in KiB (top bit: reseal the header's checksums after the
mutation; --reseal sets it), then (u32 line index, 64 bytes) for each
non-zero 64-byte line.  usage: pool2seed.py [--reseal] POOL OUT"""
import struct
import sys


def main():
    args = sys.argv[1:]
    reseal = bool(args) and args[0] == '--reseal'
    if reseal:
        args = args[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    with open(args[0], 'rb') as f:
        data = f.read()
    size = (len(data) + 1023) // 1024
    out = [struct.pack('<I', size | (0x80000000 if reseal else 0))]
    zero = bytes(64)
    for i in range(0, len(data), 64):
        line = data[i:i + 64].ljust(64, b'\0')
        if line != zero:
            out.append(struct.pack('<I', i // 64) + line)
    with open(args[1], 'wb') as f:
        f.write(b''.join(out))


if __name__ == '__main__':
    main()
