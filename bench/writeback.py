#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The write-back of whole pages against the disk's own speed, in one run.

A program that writes a lot of memory (bench_fill: malloc MIB MiB, write
every page inside one lock, exit) natively and under
`pmthreads run --heap malloc` on a new pool in --disk, and the disk's direct
sequential write bandwidth (dd if=/dev/zero bs=1M count=1024 oflag=direct)
beside it, rounds interleaved, medians:

  dd MB/s          the disk's direct sequential bandwidth, this round
  fill native s    the whole native process
  fill pmthreads s the whole process under pmthreads (new pool, start-up and
                   the final epoch at exit included)
  x (native+dd)    pmthreads / (native + the time dd needs for MIB MiB):
                   issue 47's target is <= 1.25
  write-back MB/s  the fill's bytes over its write-back time (persist_ns),
                   and that against dd (target >= 80 %)
  B/page           bytes sent to the device per page persisted

and the same with ROUNDS rewrites of a REWRITE-MIB region (every line of
every page changed each round, one pmthreads_sync() a round: epochs of whole
pages whose copies were written before): the write-back's MB/s over the
rounds' epochs (the epoch log), and against dd.

Usage: bench/writeback.py [--build build] [--rounds 3] [--disk /var/tmp]
                          [--mib 1024] [--rewrite-mib 256] [--rewrite-rounds 8]
                          [--tracker uffd]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from pmtkit.epoch_log import read_epoch_log  # noqa: E402


def timed(cmd, env=None):
    """The whole process's wall time and its stdout."""
    start = time.monotonic()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return elapsed, p.stdout


def dd_mbs(directory):
    """The disk's direct sequential write bandwidth, MB/s (dd's own figure)."""
    path = os.path.join(directory, "pmt-writeback-dd.test")
    try:
        p = subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", "count=1024",
                            "oflag=direct"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    m = re.search(r"(\d+) bytes .* copied, ([\d.]+) s", p.stderr)
    if p.returncode != 0 or m is None:
        sys.exit(f"dd failed: {p.stderr.strip()}")
    return int(m.group(1)) / float(m.group(2)) / 1e6


def under_pmthreads(pmthreads, exe, args, directory, tracker, epoch_log=False):
    """One run under pmthreads run --heap malloc on a new pool in directory:
    wall time, statistics, epoch-log rows."""
    with tempfile.TemporaryDirectory(dir=directory, prefix="pmt-writeback-") as pd, \
            tempfile.TemporaryDirectory(dir="/dev/shm", prefix="pmt-writeback-") as d:
        stats = os.path.join(d, "stats.json")
        log = os.path.join(d, "epochs.csv")
        cmd = [pmthreads, "run", "--heap", "malloc", "--pool", os.path.join(pd, "fill.pool"),
               "--tracker", tracker, "--stats", stats]
        if epoch_log:
            cmd += ["--epoch-log", log]
        elapsed, _ = timed(cmd + ["--", exe] + args)
        with open(stats) as f:
            st = json.load(f)
        return elapsed, st, read_epoch_log(log) if epoch_log else []


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--disk", default="/var/tmp")
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--rewrite-mib", type=int, default=256)
    ap.add_argument("--rewrite-rounds", type=int, default=8)
    ap.add_argument("--tracker", default="uffd")
    a = ap.parse_args(argv)
    exe = os.path.join(a.build, "bench", "bench_fill")
    pmthreads = os.path.join(a.build, "tools", "pmthreads")
    for f in (exe, pmthreads):
        if not os.access(f, os.X_OK):
            sys.exit(f"{f} not found: build first (ninja -C {a.build})")
    if shutil.which("dd") is None:
        sys.exit("dd not found")

    rows = []
    for r in range(a.rounds):
        steps = ["dd", "native", "pmthreads", "rewrite-native", "rewrite"]
        steps = steps[r % len(steps):] + steps[:r % len(steps)]
        row = {}
        for s in steps:
            if s == "dd":
                row["dd"] = dd_mbs(a.disk)
            elif s == "native":
                row["native"], _ = timed([exe, str(a.mib)])
            elif s == "pmthreads":
                row["pmt"], st, _ = under_pmthreads(pmthreads, exe, [str(a.mib)], a.disk, a.tracker)
                row["persist_s"] = st["persist_ns"] / 1e9
                row["whole"] = st.get("pages_whole", 0)
                row["pages"] = st["pages_persisted"]
                row["dev_bytes"] = st["device_bytes"]
            elif s == "rewrite-native":
                row["rw_native"], _ = timed([exe, str(a.rewrite_mib), str(a.rewrite_rounds)])
            else:
                row["rw_pmt"], st, ep = under_pmthreads(
                    pmthreads, exe, [str(a.rewrite_mib), str(a.rewrite_rounds)], a.disk,
                    a.tracker, epoch_log=True)
                # The rounds' epochs: those of at least half the region.
                big = [e for e in ep if e.get("durable", 1) and
                       e["bytes_dirty"] >= a.rewrite_mib * (1 << 20) / 2]
                row["rw_mbs"] = (sum(e["bytes_dirty"] for e in big) /
                                 max(1e-9, sum(e["persist_us"] for e in big) / 1e6) / 1e6)
                row["rw_epochs"] = len(big)
        row["fill_mbs"] = a.mib * (1 << 20) / row["persist_s"] / 1e6
        row["dd_s"] = a.mib * (1 << 20) / (row["dd"] * 1e6)
        row["x_target"] = row["pmt"] / (row["native"] + row["dd_s"])
        rows.append(row)
        print(f"round {r + 1}/{a.rounds}: dd {row['dd']:.0f} MB/s, fill native "
              f"{row['native']:.3f} s, pmthreads {row['pmt']:.3f} s "
              f"({row['x_target']:.2f}x native+dd), write-back {row['fill_mbs']:.0f} MB/s; "
              f"rewrite {row['rw_mbs']:.0f} MB/s over {row['rw_epochs']} epochs", flush=True)

    def med(k):
        return statistics.median(r[k] for r in rows)

    dd = med("dd")
    print()
    print(f"{a.mib} MiB fill under pmthreads run --heap malloc (tracker {a.tracker}), pools in "
          f"{a.disk}, medians of {a.rounds} interleaved rounds")
    print(f"  disk, dd bs=1M oflag=direct        {dd:8.0f} MB/s  ({a.mib} MiB in "
          f"{med('dd_s'):.3f} s)")
    print(f"  fill, native                       {med('native'):8.3f} s")
    print(f"  fill, pmthreads (whole process)    {med('pmt'):8.3f} s  = {med('x_target'):.2f} x "
          f"(native + dd)   [target <= 1.25]")
    print(f"  its write-back                     {med('persist_s'):8.3f} s  {med('fill_mbs'):.0f} "
          f"MB/s = {100 * med('fill_mbs') / dd:.0f} % of dd   [target >= 80 %]")
    print(f"  pages written whole                {med('whole'):8.0f} of {med('pages'):.0f}; "
          f"{med('dev_bytes') / max(1, med('pages')):.0f} device bytes a page")
    print(f"{a.rewrite_mib} MiB rewritten whole {a.rewrite_rounds} times (one sync a round)")
    print(f"  whole process, native / pmthreads  {med('rw_native'):8.3f} s / "
          f"{med('rw_pmt'):.3f} s = {med('rw_pmt') / med('rw_native'):.2f} x")
    print(f"  write-back of the rounds' epochs   {med('rw_mbs'):8.0f} MB/s = "
          f"{100 * med('rw_mbs') / dd:.0f} % of dd   [target >= 80 %]")


if __name__ == "__main__":
    main(sys.argv[1:])
