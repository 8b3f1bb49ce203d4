#!/usr/bin/env python3
"""Turn pool files into fuzz_pool inputs ("line" form, see fuzz_pool.c):
u32 file size in KiB, then (u32 line index, 64 bytes) for each non-zero
64-byte line.  usage: pool2seed.py POOL OUT"""
import struct
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], 'rb') as f:
        data = f.read()
    out = [struct.pack('<I', (len(data) + 1023) // 1024)]
    zero = bytes(64)
    for i in range(0, len(data), 64):
        line = data[i:i + 64].ljust(64, b'\0')
        if line != zero:
            out.append(struct.pack('<I', i // 64) + line)
    with open(sys.argv[2], 'wb') as f:
        f.write(b''.join(out))


if __name__ == '__main__':
    main()
