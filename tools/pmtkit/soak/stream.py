# SPDX-License-Identifier: BSD-3-Clause
"""stream.py -- what every soak stream shares: the clock, the epoch log's
verdict on what must have survived a kill, the counters, the bounds, and the
run / kill / judge loop of a program that prints its progress."""

import array
import collections
import os
import random
import select
import signal
import statistics
import subprocess
import sys
import threading
import time
import zlib

from pmtkit.epoch_log import read_epoch_log


def now_ns():
    return time.monotonic_ns()  # CLOCK_MONOTONIC, the programs' clock too



def epoch_facts(rows, t_exec_ns):
    """(cutoff_ns, achieved_ms): what must have survived, the period achieved."""
    cutoff = None
    achieved = None
    # A carried-over write-back (durable = 0) published nothing: what must
    # have survived is the image of the last durable line's pause.
    durable = [i for i, r in enumerate(rows) if r.get("durable", 1.0) != 0]
    if durable:
        i = durable[-1]
        last = rows[i]
        # t_ms - (write-back + pause) is when the epoch thread began the
        # write-back minus the pause: later than the gate's closing by the
        # time between reopening the gate and starting the write-back, which
        # on a loaded machine can be milliseconds (the woken threads run
        # first).  The line of the epoch before was written before this
        # epoch's gate closed (one thread does both, in order): a bound that
        # cannot be late.  A single epoch: only the exec is known to precede it.
        snap_ms = last["t_ms"] - (last["persist_us"] - last["stage_us"] + last["pause_us"]) / 1000.0
        snap_ms = min(snap_ms, rows[i - 1]["t_ms"]) if i >= 1 else 0.0
        cutoff = t_exec_ns + int(snap_ms * 1e6)
        # two periods at least: a run killed in its first epochs has no
        # period to speak of (and the first ones after start-up are short)
        periods = [r["period_us"] / 1000.0 for r in rows[-4:] if r["period_us"] > 0]
        if len(periods) >= 2:
            achieved = statistics.median(periods)
    return cutoff, achieved


class Stats:
    """Everything one stream found; merged for the summary."""

    def __init__(self, program, tracker):
        self.program = program
        self.tracker = tracker
        self.kills = 0
        self.checked = 0  # kills whose recovery was checked
        self.torn = 0
        self.durable_lost = 0
        self.durable_rule1 = 0
        self.evicted_loss = 0  # memcached: missing keys after the cache evicted
        self.errors = 0
        self.lost_ms = []
        self.lost_intervals = []
        self.achieved_ms = []
        # output commit (memcached-commit): acknowledged sets found missing
        # after a recovery (each one a failure), and the time from sending a
        # set to reading its "STORED" (the hold the client sees), in us
        self.commit = False
        self.acked = 0
        self.acked_lost = 0
        self.ack_us = array.array("f")
        self.resets = 0
        self.notes = []

    def note(self, msg):
        if len(self.notes) < 40:
            self.notes.append(msg)
        print(f"soak: {self.program}/{self.tracker}: {msg}", file=sys.stderr, flush=True)


class FairSlots:
    """At most n holders at a time, waiters served in arrival order.  (A
    threading.Semaphore lets the releasing thread take the slot straight back:
    with --jobs 1 one stream ran every round and the other none.)"""

    def __init__(self, n):
        self.free = n
        self.queue = collections.deque()
        self.cv = threading.Condition()

    def __enter__(self):
        me = object()
        with self.cv:
            self.queue.append(me)
            while self.queue[0] is not me or self.free == 0:
                self.cv.wait()
            self.queue.popleft()
            self.free -= 1
            self.cv.notify_all()

    def __exit__(self, *exc):
        with self.cv:
            self.free += 1
            self.cv.notify_all()


class Budget:
    """The shared bounds: kills per stream and the deadline; a slot pool for
    concurrency."""

    def __init__(self, kills_per_stream, deadline_ns, jobs):
        self.per_stream = kills_per_stream
        self.deadline_ns = deadline_ns
        self.slots = FairSlots(jobs)
        self.stop = threading.Event()

    def more(self, stats):
        return (stats.kills < self.per_stream and now_ns() < self.deadline_ns
                and not self.stop.is_set())


class Stream:
    def __init__(self, args, program, tracker, budget, workdir):
        self.args = args
        self.program = program
        self.tracker = tracker
        self.budget = budget
        self.dir = os.path.join(workdir, f"{program}-{tracker}")
        os.makedirs(self.dir, exist_ok=True)
        self.pool = os.path.join(args.pool_dir or workdir, f"{program}-{tracker}.pool")
        self.epoch_log = os.path.join(self.dir, "epochs.csv")
        self.stats = Stats(program, tracker)
        self.rng = random.Random(args.seed * 1000 + zlib.crc32(f"{program}/{tracker}".encode()) % 1000)
        self.pending = None  # what the last kill left for the next run to check
        self.rounds_since_reset = 0

    def env(self):
        e = dict(os.environ)
        e["PMTHREADS_POOL"] = self.pool
        e["PMTHREADS_POOL_SIZE"] = self.args.pool_size
        e["PMTHREADS_INTERVAL_MS"] = str(self.args.interval_ms)
        e["PMTHREADS_TRACKER"] = self.tracker
        e["PMTHREADS_EPOCH_LOG"] = self.epoch_log
        if self.args.nvm in ("msync", "log"):
            e["PMTHREADS_NVM"] = self.args.nvm
            e.pop("PMEM_IS_PMEM_FORCE", None)
        else:
            e["PMEM_IS_PMEM_FORCE"] = "1"
        return e

    def kill_delay_ms(self):
        lo, hi = self.args.kill_min_ms, self.args.kill_max_ms
        if self.program.startswith("memcached"):
            lo, hi = lo + 100, hi + 300  # its start-up is longer
        return self.rng.uniform(lo, hi)

    def remove_pool(self):
        try:
            os.unlink(self.pool)
        except FileNotFoundError:
            pass

    def run(self):
        self.remove_pool()
        try:
            while self.budget.more(self.stats):
                with self.budget.slots:
                    if self.rounds_since_reset >= self.args.reset_every:
                        self.final_check()
                        self.remove_pool()
                        self.pending = None
                        self.rounds_since_reset = 0
                        self.stats.resets += 1
                    self.round()
                    self.rounds_since_reset += 1
            with self.budget.slots:
                self.final_check()
        except Exception as ex:  # a driver bug must not hide as a pass
            self.stats.errors += 1
            self.stats.note(f"driver error: {ex!r}")
        finally:
            self.cleanup()
            self.remove_pool()

    def cleanup(self):
        pass

    # -- lines-reading programs (bank, bptree) --------------------------------

    def spawn_and_kill(self, argv):
        """Runs argv, kills it after a random delay; returns (lines with their
        arrival, t_exec, t_kill, exited_early_rc)."""
        try:
            os.unlink(self.epoch_log)
        except FileNotFoundError:
            pass
        delay = self.kill_delay_ms()
        t_exec = now_ns()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=self.env())
        deadline = t_exec + int(delay * 1e6)
        out = bytearray()
        fd = p.stdout.fileno()
        early = None
        while True:
            left = (deadline - now_ns()) / 1e9
            if left <= 0:
                break
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    early = p.wait()
                    break
                out += chunk
        t_kill = now_ns()
        if early is None:
            p.send_signal(signal.SIGKILL)
            rest = p.stdout.read()
            out += rest
            p.wait()
        err = p.stderr.read().decode(errors="replace")
        p.stdout.close()
        p.stderr.close()
        if early is not None:
            self.stats.errors += 1
            self.stats.note(f"{argv[0]} exited by itself with status {early} "
                            f"before the kill: {err.strip()[-300:]}")
        return out.decode(errors="replace").splitlines(), t_exec, t_kill, early, err

    def judge(self, recovered, points, t_kill, required_cutoff, required_rule2, rule1,
              achieved):
        """Durable-loss and lost-work bookkeeping shared by bank and bptree.
        points: [(ns, count, durable)] of the killed run."""
        s = self.stats
        if recovered < required_cutoff or recovered < required_rule2:
            s.durable_lost += 1
            s.note(f"DURABLE WORK LOST: recovered {recovered}, acknowledged durable "
                   f"{max(required_cutoff, required_rule2)} (epoch log {required_cutoff}, "
                   f"durable epoch +2 {required_rule2})")
        if recovered < rule1:
            s.durable_rule1 += 1
        if not points:
            return  # killed before it reported anything: nothing to measure
        lost = 0.0
        for ns, count, _ in points:
            if count > recovered:
                lost = (t_kill - ns) / 1e6
                break
        s.lost_ms.append(lost)
        if achieved:
            s.achieved_ms.append(achieved)
            s.lost_intervals.append(lost / achieved)

    def requirements(self, points, cutoff):
        """What the killed run had acknowledged as durable: by the epoch log's
        cutoff, by the durable epoch advancing by two and by one."""
        req_cut = req2 = req1 = 0
        for ns, count, _ in points:
            if cutoff is not None and ns <= cutoff:
                req_cut = max(req_cut, count)
        # count read before the line's durable value d; durable once a later
        # line shows d + 2 (d + 1 by the documented rule)
        max_later = -1
        for ns, count, d in reversed(points):
            if max_later >= d + 2:
                req2 = max(req2, count)
            if max_later >= d + 1:
                req1 = max(req1, count)
            max_later = max(max_later, d)
        return req_cut, req2, req1

    def record_kill(self, points, t_exec, t_kill):
        self.stats.kills += 1
        cutoff, achieved = epoch_facts(read_epoch_log(self.epoch_log), t_exec)
        req_cut, req2, req1 = self.requirements(points, cutoff)
        prev = self.pending
        if prev is not None:
            # the earlier kill was never checked (this run died before it
            # recovered): its requirements carry over, its lost work is
            # unmeasured
            req_cut = max(req_cut, prev["req_cut"])
            req2 = max(req2, prev["req2"])
            req1 = max(req1, prev["req1"])
        self.pending = dict(points=points, t_kill=t_kill, req_cut=req_cut, req2=req2,
                            req1=req1, achieved=achieved)

    def check_pending(self, recovered):
        p = self.pending
        self.pending = None
        if p is None:
            return
        self.stats.checked += 1
        self.judge(recovered, p["points"], p["t_kill"], p["req_cut"], p["req2"], p["req1"],
                   p["achieved"])

