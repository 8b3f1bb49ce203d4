#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""evict-point.py -- how many of the kill soak's items a memcached holds
before it starts to evict: fills a fresh server (its own pool on /dev/shm)
with the kill soak's keys and values (tools/pmtkit/soak) and prints
curr_items and bytes at the first `stats` that shows an eviction.

  memcached-demo/evict-point.py BUILD/memcached-demo/memcached-pmthreads [MEMCACHED ARGS...]
  e.g. ... -L    (every slab class gets a page up front, as upstream's -L)
"""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

# pmtkit sits in tools/; no __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from pmtkit.memcached_client import MemcachedClient  # noqa: E402
from pmtkit.scratch import scratch_dir  # noqa: E402
from pmtkit.soak.memcached import mc_value  # noqa: E402


def main():
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: evict-point.py MEMCACHED-PMTHREADS [ARGS...] (an executable first)")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    pooldir = scratch_dir("evict-point.")
    env = dict(os.environ, PMTHREADS_POOL=os.path.join(pooldir, "mc.pool"), PMEM_IS_PMEM_FORCE="1",
               PMTHREADS_POOL_SIZE="1G")
    argv = [sys.argv[1], "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "2", "-m", "128"]
    argv += ["-u", "root"] if os.getuid() == 0 else []
    p = subprocess.Popen(argv + sys.argv[2:], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        conn = None
        for _ in range(600):
            try:
                conn = MemcachedClient(port)
                break
            except OSError:
                time.sleep(0.05)
        if conn is None:
            sys.exit("evict-point: the server did not come up")
        i = 0
        while True:
            conn.store(b"k1-%d" % i, mc_value(1, i))
            i += 1
            if i % 2000 == 0:
                st = conn.stats()
                if int(st["evictions"]) > 0:
                    print(f"{' '.join(sys.argv[2:]) or '(pages on demand)'}: first evictions at "
                          f"curr_items {st['curr_items']}, bytes {st['bytes']} "
                          f"(after {i} sets, evictions {st['evictions']})")
                    return
                if i > 5_000_000:
                    print("no eviction after 5,000,000 sets")
                    return
    finally:
        p.kill()
        p.wait()
        for f in os.listdir(pooldir):
            os.unlink(os.path.join(pooldir, f))
        os.rmdir(pooldir)


if __name__ == "__main__":
    main()
