# SPDX-License-Identifier: BSD-3-Clause
"""sweep.py -- bench.sh's interval sweep (see mcbench/__init__.py): every
mode x server threads x interval, REPEATS times interleaved, one row of
results.csv per run."""

import os
import time

from pmtkit.mcbench import results
from pmtkit.mcbench.options import BadInput, sweep_settings
from pmtkit.mcbench.servers import find_libpmthreads, find_memcached_pmthreads, mc_user_args
from pmtkit.ports import MC_HOST, free_port


def now_ms():
    return time.time_ns() // 1_000_000


def load_start_ms(launched_ms, listening_ms, keys):
    """From the server's launch to the start of mc_client's measured window
    (it prefills its keys for 1 s + 20 us per key first), so that the report
    can tell the epochs of that window from those of start-up and prefill."""
    return listening_ms - launched_ms + 1000 + keys // 50


def server_argv(mode, s, lib, binary, pool, interval, stats, epochs):
    """The command (before memcached's own options) of one mode."""
    if mode == "native":
        return [s.memcached]
    runtime = [f"PMTHREADS_POOL={pool}", f"PMTHREADS_INTERVAL_MS={interval}",
               f"PMTHREADS_STATS={stats}", f"PMTHREADS_EPOCH_LOG={epochs}"]
    if mode == "preload":
        return ["env", f"LD_PRELOAD={lib}", "PMTHREADS_HEAP=malloc"] + runtime + [s.memcached]
    return ["env"] + runtime + [binary]


def run_one(b, s, mode, threads, interval, rep):
    tag = f"{mode}-t{threads}-i{interval}-r{rep}"
    port = free_port()
    if port is None:
        b.die("no free port found")
    pool = os.path.join(b.tmp, "pool")
    if os.path.exists(pool):
        os.remove(pool)
    stats = f"{b.out}/stats/{tag}.json"
    argv = server_argv(mode, s, b.lib, b.binary, pool, interval, stats,
                       f"{b.out}/epochs/{tag}.csv")
    argv += ["-l", MC_HOST, "-p", str(port), "-U", "0", "-t", threads, "-m", "256"]
    launched = now_ms()
    if not b.procs.start(f"{b.out}/logs/{tag}.log", port, argv + mc_user_args()):
        b.note(f"{tag}: server did not start, skipped")
        return
    listening = now_ms()
    res = b.client_bench(tag, port, s.conns, s.duration, s.keys, s.vsize, s.set_percent,
                         timeout=s.duration + 120)
    b.procs.stop()
    if not res:
        b.note(f"{tag}: no result (see {b.out}/logs/{tag}.client)")
        return
    st = results.sweep_stats_fields(stats) if mode != "native" else [""] * 6
    row = [mode, threads, str(interval), res] + st + [
        str(rep), str(load_start_ms(launched, listening, s.keys))]
    b.append_row(",".join(row))
    b.note(f"{tag}: {res.split(',')[results.CLIENT_OPS_PER_SEC]} ops/s")


def main(b, quick):
    try:
        s = sweep_settings(os.environ, quick)
    except BadInput as e:
        b.die(str(e))
    os.environ["PMEM_IS_PMEM_FORCE"] = s.pmem_is_pmem_force
    b.make_out("bench", ("stats", "epochs", "logs"))
    b.tmp = b.procs.scratch()
    b.build_client()
    b.lib = b.binary = ""
    if "preload" in s.modes:
        b.lib = find_libpmthreads(os.environ) or b.die(
            "libpmthreads.so not found (set LIBPMTHREADS or build pmthreads)")
    if "pmthreads" in s.modes:
        b.binary = find_memcached_pmthreads(os.environ) or b.die(
            "memcached-pmthreads not found (run fetch-and-build.sh or set MEMCACHED_PMTHREADS)")
    if not os.access(s.memcached, os.X_OK):
        b.die(f"{s.memcached} not found")
    b.csv = f"{b.out}/results.csv"
    with open(b.csv, "w") as f:
        f.write(results.SWEEP_HEADER + "\n")
    for rep in range(1, s.repeats + 1):
        for t in s.threads:
            for mode in s.modes:
                for iv in ([0] if mode == "native" else s.intervals):
                    run_one(b, s, mode, t, iv, rep)
    b.note(f"results: {b.csv}")
    b.report()

