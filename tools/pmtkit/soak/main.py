# SPDX-License-Identifier: BSD-3-Clause
"""main.py -- the soak's command line: checks the arguments, runs one
thread per (program, tracker) stream, prints and writes the summary."""

import argparse
import json
import os
import shutil
import signal
import sys
import threading
import time

from pmtkit.scratch import scratch_dir
from pmtkit.soak.bank import BankStream
from pmtkit.soak.bptree import BptreeStream
from pmtkit.soak.memcached import MemcachedStream
from pmtkit.soak.memcached_commit import MemcachedCommitStream
from pmtkit.soak.stream import Budget, now_ns
from pmtkit.soak.summary import summarize

STREAMS = {"bank": BankStream, "bptree": BptreeStream, "memcached": MemcachedStream,
           "memcached-commit": MemcachedCommitStream}


def main(argv):
    """Runs the soak for the command line argv (without the program name)."""
    if argv == ["--self-test"]:
        from pmtkit.soak import self_test
        sys.exit(self_test.run())
    ap = argparse.ArgumentParser(description="kill -9 soak over bank, bptree, memcached and "
                                 "memcached-commit")
    ap.add_argument("--build", default="build")
    ap.add_argument("--kills", type=int, default=600)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--deadline", default=None,
                    help="stop at this UTC time (HH:MM), if earlier than --seconds")
    ap.add_argument("--programs", default="bank,bptree,memcached")
    ap.add_argument("--trackers", default="uffd,mprotect")
    ap.add_argument("--interval-ms", type=int, default=50)
    ap.add_argument("--kill-min-ms", type=float, default=10)
    ap.add_argument("--kill-max-ms", type=float, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tick-us", type=int, default=1000)
    ap.add_argument("--reset-every", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--pool-size", default="1G")
    ap.add_argument("--pool-dir", default=None)
    ap.add_argument("--nvm", choices=("pmem", "msync", "log"), default="pmem")
    ap.add_argument("--memcached", default=None)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--json", default=None, help="also write the summary rows here")
    ap.add_argument("--mc-verify-all", action="store_true",
                    help="memcached: check every round since the reset after every restart "
                         "(default: the last 3 rounds, all of them every 10th round)")
    ap.add_argument("--mc-evict", action="store_true",
                    help="memcached without -M: a full cache evicts its LRU tail (the keys it "
                         "names are not counted as durable loss)")
    ap.add_argument("--commit-output", choices=("commit", "off"), default="commit",
                    help="memcached-commit: PMTHREADS_OUTPUT for its server; off runs the "
                         "same strict check without the hold, which must report acknowledged "
                         "sets lost (the proof that the check can fail)")
    ap.add_argument("--mc-conns", type=int, default=4,
                    help="memcached-commit: load connections")
    ap.add_argument("--mc-window", type=int, default=4,
                    help="memcached-commit: sets in flight per load connection")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args(argv)

    def bad(msg):
        print(f"soak: {msg}", file=sys.stderr)
        sys.exit(2)

    programs = [p for p in args.programs.split(",") if p]
    trackers = [t for t in args.trackers.split(",") if t]
    for p in programs:
        if p not in STREAMS:
            bad(f"unknown program {p!r}: choose from {', '.join(STREAMS)}")
    for t in trackers:
        if t not in ("uffd", "mprotect"):
            bad(f"unknown tracker {t!r}: choose from uffd, mprotect")
    if not (0 <= args.kill_min_ms < args.kill_max_ms):
        bad("--kill-min-ms must be below --kill-max-ms")
    if min(args.kills, args.jobs, args.reset_every, args.mc_conns, args.mc_window) < 1:
        bad("--kills, --jobs, --reset-every, --mc-conns and --mc-window must be at least 1")
    needed = {"bank": os.path.join(args.build, "examples", "bank"),
              "bptree": os.path.join(args.build, "parsec-ports", "recovery", "bptree_crash")}
    args.memcached = args.memcached or os.path.join(args.build, "memcached-demo",
                                                    "memcached-pmthreads")
    needed["memcached"] = needed["memcached-commit"] = args.memcached
    for p in programs:
        if not os.access(needed[p], os.X_OK):
            hint = ("build it with memcached-demo/fetch-and-build.sh -B " + args.build
                    if p.startswith("memcached") else "build it: meson compile -C " + args.build)
            bad(f"{needed[p]} not found or not executable: {hint}")
    if args.pool_dir and not os.path.isdir(args.pool_dir):
        bad(f"--pool-dir {args.pool_dir} is not a directory")

    deadline = now_ns() + int(args.seconds * 1e9)
    if args.deadline:
        hh, mm = (int(x) for x in args.deadline.split(":"))
        t = time.gmtime()
        left = (hh * 3600 + mm * 60) - (t.tm_hour * 3600 + t.tm_min * 60 + t.tm_sec)
        if left <= 0:
            bad(f"--deadline {args.deadline} UTC has passed")
        deadline = min(deadline, now_ns() + left * 10**9)
    workdir = args.workdir or scratch_dir("pmthreads-soak.")
    os.makedirs(workdir, exist_ok=True)
    nstreams = len(programs) * len(trackers)
    budget = Budget((args.kills + nstreams - 1) // nstreams, deadline, args.jobs)
    streams = [STREAMS[p](args, p, t, budget, workdir) for p in programs for t in trackers]

    def on_term(signum, frame):
        budget.stop.set()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    t0 = time.monotonic()
    threads = [threading.Thread(target=s.run, daemon=True) for s in streams]
    for th in threads:
        th.start()
    last = 0
    while any(th.is_alive() for th in threads):
        time.sleep(1)
        if time.monotonic() - last > 60:
            last = time.monotonic()
            done = sum(s.stats.kills for s in streams)
            print(f"soak: {time.strftime('%H:%M:%S', time.gmtime())} UTC, {done} kills, "
                  f"torn {sum(s.stats.torn for s in streams)}, durable lost "
                  f"{sum(s.stats.durable_lost for s in streams)}, errors "
                  f"{sum(s.stats.errors for s in streams)}", file=sys.stderr, flush=True)
    rows = summarize([s.stats for s in streams], args, time.monotonic() - t0)
    for s in streams:
        for n in s.stats.notes:
            print(f"  {s.stats.program}/{s.stats.tracker}: {n}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, interval_ms=args.interval_ms, nvm=args.nvm,
                           commit_output=args.commit_output,
                           seconds=time.monotonic() - t0,
                           streams=[dict(program=s.stats.program, tracker=s.stats.tracker,
                                         lost_ms=s.stats.lost_ms,
                                         lost_intervals=s.stats.lost_intervals,
                                         notes=s.stats.notes) for s in streams]), f)
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    total = rows[-1]
    sys.exit(0 if total["torn"] == 0 and total["durable_lost"] == 0 and total["errors"] == 0
             else 1)
