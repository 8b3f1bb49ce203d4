#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""What the storage under a pool receives, per backend and medium, in one run.

Runs bench_storage (random changed lines of a 64 MiB nvmalloc'd region, one
lock) under each backend on each medium, interleaved round by round, and
prints medians:
  bytes/line      bytes the process sent to storage per changed line
                  (/proc/self/io write_bytes while it ran); "+exit": the
                  whole process's, creation and exit included (rusage) -- the
                  log backend's final checkpoint is there.  A page-cache
                  folio counts whole when a write dirties any of it
  disk/line       what the pool's block device wrote while it ran, per
                  changed line (its journal and any other process's writes
                  too: a quiet machine only; "-" on tmpfs)
  flushes/epoch   device flushes (msync, fdatasync) per published epoch
  period p50/p99  spacing of published epochs, ms (the epoch log)
and each backend's bytes/line against the first one's on the medium.

Usage: bench/storage.py [--build build] [--rounds 3] [--seconds 5]
                        [--loads 10:5000,100:5000,500:5000] [--disk /var/tmp]
A load is LINES:STEP_US (10:5000 is ~200 lines per 100 ms epoch).
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

MEDIA = {
    # medium: (directory option, backends, extra environment)
    "disk": ("disk", ["msync", "log"], {}),
    "pmem": ("/dev/shm", ["pmem"], {"PMEM_IS_PMEM_FORCE": "1"}),
}


def run_one(exe, directory, nvm, env_extra, lines, step, seconds):
    # The statistics and the epoch log go to tmpfs, whose writes are not
    # counted in write_bytes: only the pool's are.
    with tempfile.TemporaryDirectory(dir=directory, prefix="pmt-storage-") as pd, \
            tempfile.TemporaryDirectory(dir="/dev/shm", prefix="pmt-storage-") as d:
        env = dict(os.environ, PMTHREADS_POOL=os.path.join(pd, "b.pool"),
                   PMTHREADS_POOL_SIZE="1G", PMTHREADS_NVM=nvm,
                   PMTHREADS_STATS=os.path.join(d, "stats.json"),
                   PMTHREADS_EPOCH_LOG=os.path.join(d, "epochs.csv"), **env_extra)
        with open(os.path.join(d, "out"), "w+") as o, open(os.path.join(d, "err"), "w+") as e:
            p = subprocess.Popen([exe, str(lines), str(step), str(seconds)], env=env,
                                 stdout=o, stderr=e)
            # wait4, not wait: the rusage counts what the exit wrote too.
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            o.seek(0)
            e.seek(0)
            out, err = o.read(), e.read()
        if p.returncode != 0:
            sys.exit(f"bench_storage ({nvm} in {directory}) failed: {err.strip()}")
        fig = dict(kv.split("=") for kv in out.split())
        stats = json.load(open(os.path.join(d, "stats.json")))
        rows = [r for r in csv.DictReader(open(os.path.join(d, "epochs.csv")))
                if r["durable"] == "1" and int(r["pages"]) > 0]
        times = [float(r["t_ms"]) for r in rows]
        gaps = sorted(b - a for a, b in zip(times, times[1:])) or [0.0]
        changed = int(fig["changed"])
        published = max(1, int(stats.get("epochs_persisted", 0)))
        return {
            "bytes/line": int(fig["write_bytes"]) / max(1, changed),
            "disk/line": (int(fig["disk_bytes"]) / max(1, changed)
                          if int(fig.get("disk_bytes", "-1")) >= 0 else -1),
            "+exit": ru.ru_oublock * 512 / max(1, changed),
            "lines/epoch": changed / published,
            "flushes/epoch": stats.get("device_flushes", 0) / published,
            "p50": gaps[len(gaps) // 2],
            "p99": gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))],
            "checkpoints": stats.get("log_checkpoints", 0),
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--loads", default="10:5000,100:5000,500:5000")
    ap.add_argument("--disk", default="/var/tmp")
    ap.add_argument("--media", default="disk,pmem")
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "bench_storage")
    if not os.access(exe, os.X_OK):
        sys.exit(f"{exe} is not built (meson setup with -Dbench=true, then ninja)")
    loads = [tuple(int(x) for x in l.split(":")) for l in a.loads.split(",")]
    media = a.media.split(",")
    res = {}
    for r in range(a.rounds):
        for lines, step in loads:
            for m in media:
                directory, backends, extra = MEDIA[m]
                if directory == "disk":
                    directory = a.disk
                for nvm in backends:
                    key = (lines, step, m, nvm)
                    res.setdefault(key, []).append(
                        run_one(exe, directory, nvm, extra, lines, step, a.seconds))
    print(f"bench_storage: 64 MiB region, random lines, {a.seconds:g} s a run, "
          f"{a.rounds} rounds interleaved, medians; disk = {a.disk}")
    print(f"{'load':>10} {'medium':>6} {'backend':>7} {'lines/ep':>9} {'bytes/line':>11} "
          f"{'vs first':>8} {'+exit':>8} {'disk/line':>9} {'flush/ep':>8} {'p50 ms':>7} "
          f"{'p99 ms':>7} {'ckpts':>5}")
    for lines, step in loads:
        for m in media:
            base = None
            for nvm in MEDIA[m][1]:
                runs = res[(lines, step, m, nvm)]
                med = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
                base = base or med["bytes/line"]
                print(f"{lines:>5}/{step // 1000:>2}ms {m:>6} {nvm:>7} {med['lines/epoch']:>9.0f} "
                      f"{med['bytes/line']:>11.0f} {med['bytes/line'] / base:>7.3f}x "
                      f"{med['+exit']:>8.0f} "
                      f"{(format(med['disk/line'], '.0f') if med['disk/line'] >= 0 else '-'):>9} "
                      f"{med['flushes/epoch']:>8.2f} {med['p50']:>7.1f} {med['p99']:>7.1f} "
                      f"{med['checkpoints']:>5.0f}")


if __name__ == "__main__":
    main()
