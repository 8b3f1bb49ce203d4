# SPDX-License-Identifier: BSD-3-Clause
"""ports.py -- a TCP port on loopback for a test server to listen on.

  python3 -m pmtkit.ports     prints one (memcached-demo/common.sh's free_port)

Ports are drawn below the kernel's ephemeral range when there is room there:
an ephemeral port can be the local end of some connection, which a listener
cannot bind even when nothing listens on it."""

import random
import socket
import sys
from pathlib import Path

MC_HOST = "127.0.0.1"


def port_range_below_ephemeral(range_text):
    """(lo, span) to draw listening ports from: below the kernel's ephemeral
    range when there is room there (an ephemeral port can be the local end of
    some connection, which a listener cannot bind)."""
    lo, span = 20000, 40000
    try:
        elo = int(range_text.split()[0])
    except (IndexError, ValueError):
        elo = 0
    if elo > 12000:
        lo = elo - 20000 if elo > 30000 else 10000
        span = elo - lo
    return lo, span


def free_port():
    """A TCP port on MC_HOST nothing listens on (None after 100 tries)."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
    except OSError:
        text = ""
    lo, span = port_range_below_ephemeral(text)
    for _ in range(100):
        p = lo + random.randrange(span)
        with socket.socket() as s:
            try:
                s.bind((MC_HOST, p))
                return p
            except OSError:
                continue
    return None


if __name__ == "__main__":
    port = free_port()
    if port is None:
        sys.exit("no free port found")
    print(port)
