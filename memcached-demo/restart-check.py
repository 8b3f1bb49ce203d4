#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""restart-check.py -- what memcached-pmthreads brings back after kill -9.

usage: restart-check.py MEMCACHED_PMTHREADS [POOL_DIR]

Starts memcached-pmthreads with -e POOL (a pool in POOL_DIR; default /dev/shm, or
PMT_DISK_DIR with PMT_POOL_MEDIUM=disk: tools/pmtkit/scratch.py),
stores items with flags, TTLs and CAS values of several sizes (several slab
classes, a chunked 2 MB item), lets an epoch pass (pmthreads_durable_epoch is
not reachable from outside: it waits 3 intervals), kills it with SIGKILL,
restarts it on the same pool and checks what memcached's own restart mode
(-e, graceful stop) restores:
  - every item with its value, client flags and CAS value;
  - TTLs: an item whose TTL ran out while the server was down is gone, the
    others keep their remaining TTL (within 2 s);
  - new CAS values are larger than every recovered one;
  - stats: curr_items, bytes, hash_power_level (it had grown), total_malloced
    and each class's total_pages, uptime continuing from before the crash;
  - the LRU maintainer runs again (lru_maintainer_juggles grows) and the slab
    rebalancer moves a recovered page (slabs reassign), after which every
    item still served has its value.
Prints one line per check; exit 0 when all pass, 1 otherwise, 2 setup error.
"""
import os, random, signal, socket, subprocess, sys, time
from pathlib import Path

# pmtkit sits in tools/; no __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from pmtkit.memcached_client import MemcachedClient  # noqa: E402
from pmtkit.scratch import env_for_pools, pool_dir  # noqa: E402

HOST = "127.0.0.1"
INTERVAL_S = int(os.environ.get("PMTHREADS_INTERVAL_MS", "100")) / 1000.0
failures = 0


def check(ok, what):
    global failures
    print(("ok     " if ok else "FAILED ") + what)
    if not ok:
        failures += 1


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(binary, pool, port, log, extra=(), tries=400):
    p = subprocess.Popen([binary, "-l", HOST, "-p", str(port), "-U", "0", "-t", "2", "-m", "64",
                          "-e", pool, "-v"] + list(extra) + (["-u", "root"] if os.getuid() == 0 else []),
                         stdout=log, stderr=log)
    for _ in range(tries):
        try:
            return p, MemcachedClient(port, HOST, timeout=20)
        except OSError:
            if p.poll() is not None:
                raise RuntimeError("server exited with %d" % p.returncode)
            time.sleep(0.05)
    p.kill()
    p.wait()
    raise RuntimeError("server did not come up")


def value(i, n):
    return (b"%08d" % i) * (n // 8) + b"x" * (n % 8)


def lagging_hash_power(binary, tmp, port, logf, procs):
    """A restart that relinks more items than the saved hash power holds.
    The metadata (hash power included) is saved once a second, so after a
    crash it can lag the items; -o no_hashexpand makes that lag certain here
    (power 12 saved, 20000 items relinked: 14 needed).  Before the fix the
    first clock tick started an expansion that paused every thread during
    start-up and sometimes hung for good (a worker still in its first
    register_thread_initialized held up the pause).  Now the table is sized for
    the relinked items before any thread starts: no expansion, and the server
    answers at once."""
    pool = os.path.join(tmp, "lagging.pool")
    proc, c = start(binary, pool, port, logf, ["-o", "hashpower=12,no_hashexpand"])
    procs.append(proc)
    n = 20000
    batch = []
    for i in range(n):
        batch.append(b"set h%d 0 0 8\r\n%08d\r\n" % (i, i))
        if len(batch) == 200 or i == n - 1:
            c.send(b"".join(batch))
            for _ in batch:
                assert c.line() == b"STORED"
            batch = []
    time.sleep(3 * INTERVAL_S + 1.2)   # an epoch after the last set, and a metadata save
    st0 = c.stats()
    check(st0["hash_power_level"] == "12", "(lagging hash power: %d items in a table of power %s)"
          % (n, st0["hash_power_level"]))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    t0 = time.time()
    try:
        proc, c = start(binary, pool, port, logf, tries=200)   # 10 s
        procs.append(proc)
    except RuntimeError as ex:
        check(False, "restart with %d items over a saved hash power of 12 answers within 10 s (%s)"
              % (n, ex))
        return
    up = time.time() - t0
    st1 = c.stats()
    check(st1["hash_power_level"] == "14" and st1.get("hash_is_expanding", "0") == "0",
          "restart with %d items over a saved hash power of 12 answers in %.1f s with the table "
          "sized for them (hash_power_level %s, hash_is_expanding %s)"
          % (n, up, st1["hash_power_level"], st1.get("hash_is_expanding")))
    got = {}
    keys = ["h%d" % i for i in range(n)]
    for i in range(0, n, 200):
        got.update(c.gets(keys[i:i + 200]))
    bad = [k for k in keys if k not in got or got[k][2] != b"%08d" % int(k[1:])]
    check(not bad, "every item of the resized table is found (%d missing or wrong)" % len(bad))
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    tmp = pool_dir("mc-restart-check.", sys.argv[2] if len(sys.argv) > 2 else None)
    pool = os.path.join(tmp, "memcached.pool")
    logf = open(os.path.join(tmp, "server.log"), "w+")
    env_for_pools(os.environ)
    port = free_port()
    proc, c = start(binary, pool, port, logf)
    procs = [proc]
    try:
        rnd = random.Random(1)
        items = {}
        sizes = [10, 100, 500, 2000, 10000, 100000]
        n = 110000   # enough small items to grow the hash table (power 16 -> 17)
        batch = []
        for i in range(n):
            size = sizes[i % len(sizes)] if i < 600 else 10
            k = "k%d" % i
            v = value(i, size)
            f = rnd.randrange(1 << 32)
            ttl = 0 if i % 3 else 3600
            batch.append(b"set %s %d %d %d\r\n" % (k.encode(), f, ttl, len(v)) + v + b"\r\n")
            items[k] = (f, v, ttl)
            if len(batch) == 100 or i == n - 1:   # pipelined, 100 at a time
                c.send(b"".join(batch))
                for _ in batch:
                    assert c.line() == b"STORED"
                batch = []
        big = value(7, 2 * 1024 * 1024 - 4096)   # a chunked item
        r = c.store("big", big, 42, 0)
        if r.startswith("SERVER_ERROR"):   # -I 1m default: too large; use 900 KB
            big = value(7, 900 * 1024)
            r = c.store("big", big, 42, 0)
        check(r == "STORED", "stored %d items and a %d-byte chunked item" % (n, len(big)))
        items["big"] = (42, big, 0)
        assert c.store("short", b"gone", 5, 2) == "STORED"
        keys = list(items)
        before = {}
        for i in range(0, len(keys), 200):
            before.update(c.gets(keys[i:i + 200]))
        st0, sl0 = c.stats(), c.stats("slabs")
        # each key's remaining TTL with the time it was read: the TTL read
        # after the restart must have gone down by the wall time between
        # the two reads (the down time included), however slow the machine
        ttl0 = {k: (c.ttl(k), time.time()) for k in keys[:600:3]}
        time.sleep(3 * INTERVAL_S + 1.2)   # an epoch after the last set, and a metadata save
        st0 = c.stats()
        t_kill = time.time()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        time.sleep(2.5)   # "short" expires while the server is down
        proc, c = start(binary, pool, port, logf)
        procs.append(proc)
        down = time.time() - t_kill
        logf.flush()
        log = open(logf.name).read()
        check("reusing it" in log.split("[restart] pmthreads item memory")[-1], "restart reused the pool")

        after = {}
        for i in range(0, len(keys), 200):
            after.update(c.gets(keys[i:i + 200]))
        missing = [k for k in keys if k not in after]
        wrong_v = [k for k in after if after[k][2] != items[k][1]]
        wrong_f = [k for k in after if after[k][0] != before[k][0]]
        wrong_cas = [k for k in after if after[k][1] != before[k][1]]
        check(not missing, "every item is back (%d missing)" % len(missing))
        check(not wrong_v, "values (%d wrong)" % len(wrong_v))
        check(not wrong_f, "client flags (%d wrong)" % len(wrong_f))
        check(not wrong_cas, "CAS values unchanged (%d differ)" % len(wrong_cas))
        check(c.gets(["short"]) == {}, "an item whose TTL ran out while the server was down is gone")
        bad_ttl = []
        for k, (t0, read0) in ttl0.items():
            t1 = c.ttl(k)
            want = -1 if items[k][2] == 0 else t0 - (time.time() - read0)
            if t1 is None or (want == -1 and t1 != -1) or (want != -1 and abs(t1 - want) > 2.5):
                bad_ttl.append((k, t0, t1, round(want, 1)))
        check(not bad_ttl, "remaining TTLs continue across the crash (%d off: %s)" % (len(bad_ttl), bad_ttl[:3]))
        maxcas = max(v[1] for v in before.values())
        assert c.store("new", b"1") == "STORED"
        newcas = c.gets(["new"])["new"][1]
        check(newcas > maxcas, "new CAS %d > largest recovered CAS %d" % (newcas, maxcas))
        r = c.command("cas k1 0 0 3 %d\r\nabc" % before["k1"][1])
        check(r == "STORED", "cas with a recovered CAS value: %s" % r)
        st1, sl1 = c.stats(), c.stats("slabs")
        # curr_items: "short" was relinked and unlinked by the get above
        # (unless the crawler reaped it before the kill), "new" is added
        check(int(st1["curr_items"]) in (int(st0["curr_items"]), int(st0["curr_items"]) + 1),
              "stats curr_items: %s before, %s after" % (st0["curr_items"], st1["curr_items"]))
        check(abs(int(st1["bytes"]) - int(st0["bytes"])) < 4096,
              "stats bytes: %s before, %s after" % (st0["bytes"], st1["bytes"]))
        check(st1["hash_power_level"] == st0["hash_power_level"],
              "stats hash_power_level: %s before, %s after" % (st0["hash_power_level"], st1["hash_power_level"]))
        check(int(st0["hash_power_level"]) > 16, "(the hash table had grown: power %s)" % st0["hash_power_level"])
        check(sl1["total_malloced"] == sl0["total_malloced"],
              "stats slabs total_malloced: %s before, %s after" % (sl0["total_malloced"], sl1["total_malloced"]))
        pages0 = {k: v for k, v in sl0.items() if k.endswith(":total_pages")}
        pages1 = {k: v for k, v in sl1.items() if k.endswith(":total_pages")}
        check(pages0 == pages1, "total_pages per slab class unchanged (%d classes)" % len(pages0))
        up0, up1 = int(st0["uptime"]), int(st1["uptime"])
        # The clock comes back from the metadata last made durable: saved
        # each second (its current_time up to a second behind up0), its
        # stop_time in whole seconds (the delta to the restart up to a second
        # short of `down`): two seconds at most, never more.
        check(up1 >= up0 + int(down) - 2, "uptime continues: %d before the kill, %d after %.1f s down" % (up0, up1, down))

        j0 = int(st1.get("lru_maintainer_juggles", "0"))
        time.sleep(1.5)
        j1 = int(c.stats().get("lru_maintainer_juggles", "0"))
        check(j1 > j0, "the LRU maintainer runs again (juggles %d -> %d)" % (j0, j1))
        # the rebalancer: move a recovered page of the 10-byte items' class
        src = max((int(k.split(":")[0]) for k in pages1), key=lambda cl: int(pages1["%d:total_pages" % cl]))
        np0 = int(pages1["%d:total_pages" % src])
        r = c.command("slabs reassign %d 0" % src)
        moved = False
        for _ in range(100):
            time.sleep(0.1)
            if int(c.stats("slabs").get("%d:total_pages" % src, "0")) < np0:
                moved = True
                break
        check(r == "OK" and moved, "the slab rebalancer moves a recovered page of class %d to the global pool (%s)" % (src, r))
        after2 = {}
        for i in range(0, len(keys), 200):
            after2.update(c.gets(keys[i:i + 200]))
        bad = [k for k in after2 if k != "k1" and after2[k][2] != items[k][1]]
        check(not bad, "after the move every item still served has its value (%d served, %d evicted by the move)"
              % (len(after2), len(keys) - len(after2)))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        lagging_hash_power(binary, tmp, port, logf, procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if failures and not os.environ.get("KEEP_TMP"):
            print("server log:\n" + open(logf.name).read()[-3000:])
        if not os.environ.get("KEEP_TMP"):
            subprocess.call(["rm", "-rf", tmp])
    print("restart-check: %s" % ("PASS" if failures == 0 else "FAIL (%d)" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
