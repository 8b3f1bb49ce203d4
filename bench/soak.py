#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""soak.py -- the long kill -9 soak (driven by bench/soak.sh; see its header).

Streams: one per (program, tracker).  Each stream runs its program on its own
pool, kills it with SIGKILL at a random moment after exec (start-up, recovery
and steady state alike), and lets the next run of the same program recover.
After each recovery it checks:

  torn FASE        the recovered state shows part of a critical section:
                   bank: money not conserved or the ledger disagrees with the
                   accounts' transfer counters (a transfer half done);
                   bptree: bpt_check fails (structure), a key does not match
                   its value, or a thread's surviving inserts have a hole;
                   memcached: a present key with a wrong value, or recovery
                   found linked items with incomplete values ("dropped N").
  durable lost     work acknowledged as durable before the kill is missing:
                   (a) everything acknowledged before the start of the last
                   epoch that completed before the kill (the killed run's
                   PMTHREADS_EPOCH_LOG: that epoch's pause began no later than
                   t_ms - (persist_us - stage_us + pause_us), and after the
                   previous line's t_ms: the earlier of the two; mapped to the
                   driver's clock from the exec time, a lower bound of the
                   runtime's clock origin, so the check never asks too much);
                   (b) bank and bptree: a count read before a durable epoch
                   that a later progress line shows advanced by two
                   (pmthreads_durable_epoch; by one is the documented rule, see
                   "durable_rule1" in the summary).
                   memcached: a set acknowledged before (a), and every set a
                   later check found, must be there after every later crash
                   unless memcached evicted it: keys `watch evictions` named,
                   or any missing key when `stats` counted evictions it did
                   not name (the slab mover's) -- "evicted_loss", not durable
                   loss.  Runs with -M (a full cache refuses sets) unless
                   --mc-evict.
  lost work        kill time - time the first unrecovered piece of work was
                   reported (bank/bptree: the first progress line whose count
                   exceeds what was recovered, resolution one tick; memcached:
                   the acknowledgement of the first acknowledged set that is
                   missing); 0 when everything acknowledged survived.  Also in
                   achieved epoch periods: the median period_us of the last
                   (up to 4) epochs of the killed run.

Bounded: stops after --kills kills in total or at --deadline / --seconds,
whichever comes first.  Exit status: 0 no torn FASE, no durable loss, no
error; 1 otherwise; 2 bad arguments.
"""
import argparse
import collections
import json
import os
import random
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import zlib


def now_ns():
    return time.monotonic_ns()  # CLOCK_MONOTONIC, the programs' clock too


def percentile(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


def read_epoch_log(path):
    """Rows of the epoch log as dicts of floats (missing file: [])."""
    rows = []
    try:
        with open(path) as f:
            header = f.readline().strip().split(",")
            for line in f:
                parts = line.strip().split(",")
                if len(parts) != len(header):
                    continue  # the line the kill cut short
                try:
                    rows.append({h: float(v) for h, v in zip(header, parts)})
                except ValueError:
                    continue
    except OSError:
        pass
    return rows


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
        if self.args.nvm == "msync":
            e["PMTHREADS_NVM"] = "msync"
            e.pop("PMEM_IS_PMEM_FORCE", None)
        else:
            e["PMEM_IS_PMEM_FORCE"] = "1"
        return e

    def kill_delay_ms(self):
        lo, hi = self.args.kill_min_ms, self.args.kill_max_ms
        if self.program == "memcached":
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


class BankStream(Stream):
    ACCOUNTS = 1000

    def parse(self, lines):
        """(recovered transfers or None, torn?, progress points)."""
        recovered = None
        torn = False
        points = []
        for ln in lines:
            if ln.startswith("progress "):
                f = ln.split()
                if len(f) == 4:
                    points.append((int(f[1]), int(f[2]), int(f[3])))
            elif ln.startswith("bank: ") and " accounts, " in ln and "transfers received" in ln:
                # bank: N accounts, T transfers, total X (expected Y), transfers received Z
                w = ln.replace(",", "").replace("(", "").replace(")", "").split()
                n, t, total, exp, recv = int(w[1]), int(w[3]), int(w[6]), int(w[8]), int(w[11])
                recovered = t
                if total != exp or recv != t or n != self.ACCOUNTS:
                    torn = True
            elif "INCONSISTENT" in ln:
                torn = True
        return recovered, torn, points

    def argv(self, check=False):
        exe = os.path.join(self.args.build, "examples", "bank")
        a = [exe, "-n", str(self.ACCOUNTS)]
        if check:
            return a + ["--check"]
        return a + ["-t", str(self.args.threads), "-s", "3600", "--progress",
                    "--tick-us", str(self.args.tick_us)]

    def after_recovery(self, recovered, torn, lines):
        if torn:
            self.stats.torn += 1
            self.stats.note("TORN FASE: " + " | ".join(l for l in lines if l.startswith("bank:")))
        if recovered is not None:
            self.check_pending(recovered)

    def round(self):
        lines, t_exec, t_kill, early, err = self.spawn_and_kill(self.argv())
        recovered, torn, points = self.parse(lines)
        self.after_recovery(recovered, torn, lines)
        if early is None:
            self.record_kill(points, t_exec, t_kill)

    def final_check(self):
        if self.pending is None:
            return
        p = subprocess.run(self.argv(check=True), env=self.env(), capture_output=True,
                           text=True, timeout=300)
        lines = p.stdout.splitlines()
        recovered, torn, _ = self.parse(lines)
        if recovered is None and not torn:
            if "no accounts" in p.stdout:
                recovered = 0  # killed before the accounts were first durable
            else:
                self.stats.errors += 1
                self.stats.note(f"--check failed: {p.stdout.strip()} {p.stderr.strip()}")
                self.pending = None
                return
        self.after_recovery(recovered, torn, lines)


class BptreeStream(Stream):
    def parse(self, lines):
        recovered = None
        torn = False
        why = ""
        points = []
        for ln in lines:
            if ln.startswith("inserted="):
                kv = dict(w.split("=", 1) for w in ln.split() if "=" in w)
                if "t_ns" in kv and "durable" in kv:
                    points.append((int(kv["t_ns"]), int(kv["inserted"]), int(kv["durable"])))
            elif ln.startswith("recovered="):
                kv = dict(w.split("=", 1) for w in ln.split()[:4] if "=" in w)
                recovered = int(kv.get("recovered", "0"))
                if kv.get("check") != "ok":
                    torn = True
                    why = ln
        return recovered, torn, why, points

    def exe(self):
        return os.path.join(self.args.build, "parsec-ports", "recovery", "bptree_crash")

    def after_recovery(self, recovered, torn, why):
        if torn:
            self.stats.torn += 1
            self.stats.note("TORN FASE: " + why)
        elif recovered is not None:
            self.check_pending(recovered)

    def round(self):
        lines, t_exec, t_kill, early, err = self.spawn_and_kill(
            [self.exe(), "-c", "-t", str(self.args.threads)])
        recovered, torn, why, points = self.parse(lines)
        if torn and early is not None:
            self.stats.errors -= 1  # exiting 1 on a failed check is the report itself
        self.after_recovery(recovered, torn, why)
        if early is None:
            self.record_kill(points, t_exec, t_kill)

    def final_check(self):
        if self.pending is None:
            return
        p = subprocess.run([self.exe(), "-r"], env=self.env(), capture_output=True, text=True,
                           timeout=300)
        recovered, torn, why, _ = self.parse(p.stdout.splitlines())
        if "no tree in the pool" in p.stdout:
            recovered, torn = 0, False
        if recovered is None:
            self.stats.errors += 1
            self.stats.note(f"-r failed: {p.stdout.strip()} {p.stderr.strip()}")
            self.pending = None
            return
        self.after_recovery(recovered, torn, why)


class McConn:
    """A tiny memcached text-protocol client (one request at a time)."""

    def __init__(self, port, timeout=10.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def set(self, key, value):
        self.s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key, len(value), value))
        return self._line() == b"STORED"

    def stats(self):
        self.s.sendall(b"stats\r\n")
        st = {}
        while True:
            line = self._line()
            if line == b"END":
                return st
            f = line.split()
            if len(f) >= 3:
                st[f[1].decode()] = f[2].decode()

    def get_many(self, keys):
        self.s.sendall(b"get " + b" ".join(keys) + b"\r\n")
        found = {}
        while True:
            line = self._line()
            if line == b"END":
                return found
            f = line.split()
            if len(f) < 4 or f[0] != b"VALUE":
                raise ConnectionError(f"unexpected reply {line[:80]!r}")
            data = self._exact(int(f[3]) + 2)
            found[f[1]] = data[:-2]


def mc_value(rnd, i):
    """The value of key k<rnd>-<i>: its length and bytes follow from both."""
    h = (rnd * 1000003 + i * 7919) & 0xFFFFFFFF
    length = 10 + h % 290
    unit = b"%d:%d;" % (rnd, i)
    return (unit * (length // len(unit) + 1))[:length]


class EvictionWatch:
    """`watch evictions` on its own connection for one server run: the keys
    memcached names as it evicts them from an LRU tail.  (The slab mover's
    evictions are not named; the run's `stats` count those.)  Ends when the
    server dies."""

    def __init__(self, port):
        self.keys = set()
        self.skipped = 0  # lines the logger dropped (the watcher was slow)
        self.ok = False
        self.conn = None
        try:
            self.conn = McConn(port, timeout=5.0)
            self.conn.s.sendall(b"watch evictions\r\n")
            self.ok = self.conn._line() == b"OK"
            self.conn.s.settimeout(None)
        except (OSError, ConnectionError):
            self.ok = False
        self.thread = threading.Thread(target=self.read, daemon=True)
        if self.ok:
            self.thread.start()

    def read(self):
        # the log lines end in a bare "\n" (only the OK had "\r\n")
        buf = self.conn.buf  # what came with the OK first
        try:
            while True:
                lines = buf.split(b"\n")
                buf = lines.pop()
                for line in lines:
                    for field in line.split():
                        if field.startswith(b"key="):
                            self.keys.add(field[4:])
                        elif field.startswith(b"skipped="):
                            self.skipped += int(field[8:] or 0)
                chunk = self.conn.s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        except (OSError, ValueError):
            pass

    def finish(self):
        """After the server was killed: the keys named, lines dropped."""
        if self.ok:
            self.thread.join(timeout=10)
        if self.conn is not None:
            self.conn.close()
        return self.keys, self.skipped


# evictions memcached counts in `stats`: the LRU's, the slab mover's when it
# had no room to rescue an item, and its deletes of items busy for too long
MC_EVICTION_STATS = ("evictions", "slab_reassign_evictions_nomem", "slab_reassign_busy_deletes")


class MemcachedStream(Stream):
    def __init__(self, *a):
        super().__init__(*a)
        self.exe = self.args.memcached
        self.proc = None
        self.log_path = os.path.join(self.dir, "server.log")
        self.prev_epoch_log = os.path.join(self.dir, "epochs-prev.csv")
        self.round_no = 0
        self.acks = {}  # round -> [(i, ack_ns)]
        # rounds from this one on have not been checked since their kill
        self.first_unchecked = 1
        self.port = None
        # since the last reset: items the servers evicted as counted by
        # `stats` during the runs (MC_EVICTION_STATS), and the keys
        # `watch evictions` named.  A key missing then may be a legitimate
        # eviction, not durable loss.
        self.evicted_seen = 0
        self.evicted_keys = set()
        self.evictions_unnamed = 0  # counted by stats but not named
        self.runs = {}  # round -> what its run did (for the diagnostics)

    def start(self):
        """Starts the server; returns its log lines of this start (recovery)."""
        for _ in range(20):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
            s.close()
            break
        self.log_from = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        # the killed run's epoch log stays for the diagnostics of a loss
        try:
            os.replace(self.epoch_log, self.prev_epoch_log)
        except FileNotFoundError:
            pass
        self.t_exec = now_ns()
        argv = [self.exe, "-l", "127.0.0.1", "-p", str(self.port), "-U", "0",
                "-t", str(self.args.threads), "-m", "128", "-v"]
        # -M: a full cache refuses sets (not acknowledged) instead of evicting
        # acknowledged ones; evictions that happen anyway (the slab
        # rebalancer's) are read from `stats` during the run (evicted_seen).
        # --mc-evict leaves it out (memcached's default: evict the LRU tail).
        if not self.args.mc_evict:
            argv.append("-M")
        if os.getuid() == 0:
            argv += ["-u", "root"]
        self.logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=self.env())

    def wait_up(self, until_ns):
        """A connection to this run's server, once it listens; False when it
        exited (or the port is another process's), None after until_ns."""
        while now_ns() < until_ns:
            if self.proc.poll() is not None:
                return False
            try:
                c = McConn(self.port, timeout=1.0)
            except OSError:
                time.sleep(0.005)
                continue
            # The port was free when chosen, but the server binds it only
            # after recovery (seconds with many items): another process may
            # listen there by then, and checking our keys against its cache
            # would report them lost.  Talk only to our own pid.
            try:
                pid = int(c.stats().get("pid", -1))
            except (OSError, ConnectionError, ValueError):
                c.close()
                time.sleep(0.005)
                continue
            if pid == self.proc.pid:
                return c
            c.close()
            self.stats.errors += 1
            self.stats.note(f"port {self.port} is answered by another process's memcached "
                            f"(pid {pid}), not this run's (pid {self.proc.pid}); not checked")
            self.kill_now()
            return False
        return None

    def why_not_up(self, rnd):
        """What to say when the server did not accept connections: its exit
        status, or (still running: a hang) every thread's stack, saved next to
        the log."""
        rc = self.proc.poll()
        tail = self.log_since().strip()[-400:]
        if rc is not None:
            return f"round {rnd}: the server exited with status {rc} before listening: {tail}"
        return (f"round {rnd}: the server runs but did not accept a connection within 30 s "
                f"(a hang; stacks in {self.dump_stacks(rnd)}); its log: {tail}")

    def dump_stacks(self, rnd):
        """Every thread's stack of the running server, into the stream's
        directory; returns the file name."""
        dump = os.path.join(self.dir, f"hang-round{rnd}.txt")
        try:
            with open(dump, "w") as f:
                subprocess.run(["gdb", "-p", str(self.proc.pid), "-batch", "-ex",
                                "thread apply all bt"], stdout=f, stderr=subprocess.STDOUT,
                               timeout=120)
        except (OSError, subprocess.SubprocessError) as ex:
            dump = f"(no stacks: {ex})"
        return dump

    def log_since(self):
        with open(self.log_path, "rb") as f:
            f.seek(self.log_from)
            return f.read().decode(errors="replace")

    def relinked(self):
        """This start's "[restart] relinked N items", or None."""
        try:
            log = self.log_since()
        except OSError:
            return None
        for ln in log.splitlines():
            if "relinked" in ln:
                try:
                    return int(ln.split("relinked", 1)[1].split()[0])
                except (ValueError, IndexError):
                    return None
        return None

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
            self.logf.close()
        self.proc = None

    def cleanup(self):
        self.kill()

    def verify(self, conn, log, recent_only=False):
        """Checks the recovered cache against the acknowledged sets since the
        last reset (recent_only: of the last 3 rounds); returns the first
        missing acknowledgement time and the required sets that are missing,
        [(round, i, ack_ns)]."""
        s = self.stats
        for ln in log.splitlines():
            if "incomplete linked items" in ln and "dropped 0 " not in ln:
                s.torn += 1
                s.note("TORN FASE (recovery dropped items): " + ln.strip())
        if self.pending is not None and "reusing it" not in log and "[restart]" in log:
            s.errors += 1
            s.note("the restart did not reuse its memory: " + log.strip()[-300:])
        first_missing = None
        wrong = 0
        required = []
        cutoff = self.pending["req_cut"] if self.pending else None
        gone_by_round = {}
        for rnd, acks in self.acks.items():
            # the recent rounds, and every round whose kill no check has seen
            # yet (kills in start-up skip the check)
            if recent_only and rnd < min(self.round_no - 3, self.first_unchecked):
                continue
            gone = set()
            for k0 in range(0, len(acks), 100):
                chunk = acks[k0:k0 + 100]
                keys = [b"k%d-%d" % (rnd, i) for i, _ in chunk]
                found = conn.get_many(keys)
                for (i, ack), key in zip(chunk, keys):
                    v = found.get(key)
                    if v is None:
                        gone.add(i)
                        if first_missing is None or ack < first_missing:
                            first_missing = ack
                        if cutoff is not None and ack <= cutoff:
                            required.append((rnd, i, ack))
                    elif v != mc_value(rnd, i):
                        wrong += 1
            gone_by_round[rnd] = gone
        # lost in this crash (allowed when not required): no longer
        # expected; everything present stays required from now on.  Only
        # once the whole check went through: a check the kill cut short
        # leaves everything for the next one to judge.
        for rnd, gone in gone_by_round.items():
            if gone:
                self.acks[rnd][:] = [(i, ack) for i, ack in self.acks[rnd] if i not in gone]
        if wrong:
            s.torn += 1
            s.note(f"TORN FASE: {wrong} keys served with a wrong value")
        return first_missing, required

    def judge_missing(self, required, where, conn):
        """Sorts the required sets that are missing into evictions and
        durable loss, and says everything known about them."""
        s = self.stats
        if not required:
            return
        named = [r for r in required if b"k%d-%d" % (r[0], r[1]) in self.evicted_keys]
        unnamed = [r for r in required if b"k%d-%d" % (r[0], r[1]) not in self.evicted_keys]
        try:
            st = conn.stats() if conn is not None else {}
        except (OSError, ConnectionError):
            st = {}
        detail = self.describe_missing(unnamed or named, st)
        if not unnamed:
            s.evicted_loss += 1
            s.note(f"{len(named)} sets missing ({where}), each named by `watch evictions`: "
                   f"evicted, not lost. {detail}")
        elif self.evictions_unnamed:
            s.evicted_loss += 1
            s.note(f"{len(required)} sets missing ({where}), {len(named)} named as evicted; "
                   f"the cache also evicted {self.evictions_unnamed} items it did not name "
                   f"since the reset: not counted as durable loss. {detail}")
        else:
            s.durable_lost += 1
            saved = os.path.join(self.dir, f"loss-round{self.round_no}-epochs.csv")
            try:
                import shutil
                shutil.copy(self.prev_epoch_log, saved)
            except OSError:
                saved = "(no epoch log)"
            s.note(f"DURABLE WORK LOST: {len(unnamed)} sets acknowledged before the last "
                   f"complete epoch began are missing ({where}), none of them evicted "
                   f"(named {len(self.evicted_keys)}, unnamed {self.evictions_unnamed} "
                   f"evictions since the reset). {detail}; the killed run's epoch log: {saved}")

    def describe_missing(self, missing, st_now):
        """Per round: how many of its acknowledged sets are missing, their
        acknowledgement times against that round's kill and the last kill's
        cutoff; the items before the last kill and after this restart."""
        last_cut = self.pending["req_cut"] if self.pending else None
        by_round = collections.defaultdict(list)
        for rnd, i, ack in missing:
            by_round[rnd].append((i, ack))
        parts = []
        for rnd in sorted(by_round):
            lst = by_round[rnd]
            info = self.runs.get(rnd, {})
            t_kill = info.get("t_kill")
            ages = sorted((t_kill - ack) / 1e6 for _, ack in lst) if t_kill else []
            span = (f", acked {ages[0]:.0f}-{ages[-1]:.0f} ms before its kill" if ages else "")
            before_cut = (f", {min(last_cut - a for _, a in lst) / 1e6:.0f} ms or more before "
                          f"the last kill's cutoff" if last_cut else "")
            parts.append(f"round {rnd}: {len(lst)} of {info.get('acked', '?')} keys "
                         f"(i {min(i for i, _ in lst)}..{max(i for i, _ in lst)}){span}"
                         f"{before_cut}")
        last = self.runs.get(self.round_no - 1, {}) if self.pending else {}
        items = (f"curr_items before the kill (last sample) {last.get('curr_items', '?')}, "
                 f"relinked now {self.relinked()}, curr_items now {st_now.get('curr_items', '?')}")
        return "; ".join(parts[:6]) + (f"; +{len(parts) - 6} rounds" if len(parts) > 6 else "") \
            + "; " + items

    def round(self):
        """One kill.  Most kills land during the load; one in five lands in
        the first 300 ms after exec (start-up and recovery)."""
        s = self.stats
        self.round_no += 1
        rnd = self.round_no
        self.killed_at = None
        self.start()
        early_kill = self.rng.random() < 0.2
        timer = None
        if early_kill:
            timer = threading.Timer(self.rng.uniform(0, 0.3), self.kill_now)
            timer.start()
        errors_before = s.errors
        conn = self.wait_up(self.t_exec + int(30e9))
        if not conn:
            if timer is not None:
                timer.join()
            if s.errors != errors_before:
                pass  # wait_up said why
            elif self.killed_at is None:
                s.errors += 1
                s.note(self.why_not_up(rnd))
            else:
                s.kills += 1  # killed in start-up; the earlier kill is still unchecked
            self.kill()
            return
        watch = EvictionWatch(self.port)
        run = dict(t_exec=self.t_exec)
        self.runs[rnd] = run
        try:
            if self.pending is not None:
                first_missing, required = self.verify(conn, self.log_since(),
                                                      recent_only=not self.args.mc_verify_all
                                                      and rnd % 10 != 0)
                self.judge_missing(required, f"round {rnd}", conn)
                p = self.pending
                self.pending = None
                self.first_unchecked = rnd
                s.checked += 1
                if p["had_acks"]:
                    lost = 0.0 if first_missing is None else \
                        max(0.0, (p["t_kill"] - first_missing) / 1e6)
                    s.lost_ms.append(lost)
                    if p["achieved"]:
                        s.achieved_ms.append(p["achieved"])
                        s.lost_intervals.append(lost / p["achieved"])
        except (OSError, ConnectionError) as ex:
            if self.killed_at is None:
                # not our kill: the server stopped answering the check
                s.errors += 1
                alive = self.proc.poll() is None
                s.note(f"round {rnd}: the check failed with {ex!r}; the server "
                       + (f"hangs (stacks in {self.dump_stacks(rnd)})" if alive else
                          f"exited with status {self.proc.poll()}"))
            if timer is not None:
                timer.join()
            conn.close()
            self.kill()
            self.note_evictions(watch, {})
            s.kills += 1  # killed while serving the check: checked next time
            return
        acks = []
        self.acks[rnd] = acks
        if timer is None:
            timer = threading.Timer(self.kill_delay_ms() / 1000.0, self.kill_now)
            timer.start()
        i = 0
        st = {}
        try:
            while self.killed_at is None:
                if conn.set(b"k%d-%d" % (rnd, i), mc_value(rnd, i)):
                    acks.append((i, now_ns()))
                i += 1
                if i % 50 == 0:
                    st = conn.stats()
        except (OSError, ConnectionError, ValueError):
            pass
        timer.join()
        conn.close()
        self.kill()
        self.note_evictions(watch, st)
        s.kills += 1
        cutoff, achieved = epoch_facts(read_epoch_log(self.epoch_log), self.t_exec)
        run.update(t_kill=self.killed_at, cutoff=cutoff, sets=i, acked=len(acks),
                   curr_items=st.get("curr_items"))
        self.pending = dict(t_kill=self.killed_at, req_cut=cutoff, achieved=achieved,
                            had_acks=bool(acks))

    def note_evictions(self, watch, st):
        """Adds a killed run's evictions: the keys its watcher named and the
        count in its last `stats` sample."""
        keys, skipped = watch.finish()
        counted = sum(int(st.get(k, 0)) for k in MC_EVICTION_STATS)
        lru = int(st.get("evictions", 0))
        self.evicted_keys |= keys
        self.evicted_seen += max(counted, len(keys))
        # the slab mover's, lines the logger dropped, and the LRU's beyond
        # the keys named (all of them when the watcher did not start)
        self.evictions_unnamed += (counted - lru + skipped +
                                   (max(0, lru - len(keys)) if watch.ok else lru))

    def kill_now(self):
        self.killed_at = now_ns()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)

    def final_check(self):
        if self.pending is None:
            self.reset_bookkeeping()
            return
        self.start()
        conn = self.wait_up(self.t_exec + int(30e9))
        if not conn:
            self.stats.errors += 1
            self.stats.note("final check: " + self.why_not_up(self.round_no))
            self.kill()
            self.pending = None
            self.reset_bookkeeping()
            return
        first_missing, required = self.verify(conn, self.log_since())
        self.stats.checked += 1
        self.judge_missing(required, "final check", conn)
        conn.close()
        self.kill()
        self.pending = None
        self.reset_bookkeeping()

    def reset_bookkeeping(self):
        self.acks = {}
        self.runs = {}
        self.evicted_seen = 0
        self.evicted_keys = set()
        self.evictions_unnamed = 0


STREAMS = {"bank": BankStream, "bptree": BptreeStream, "memcached": MemcachedStream}


def summarize(all_stats, args, elapsed_s):
    rows = []
    hdr = ("program", "tracker", "kills", "checked", "torn", "durable_lost", "durable_rule1",
           "evicted_loss", "errors", "lost_p50_ms", "lost_p99_ms", "lost_max_ms", "achieved_ms",
           "lost_p50_iv", "lost_p99_iv", "lost_max_iv")
    groups = [(s.program, s.tracker, [s]) for s in all_stats]
    groups.append(("all", "all", all_stats))
    for prog, trk, ss in groups:
        lost = sorted(x for s in ss for x in s.lost_ms)
        iv = sorted(x for s in ss for x in s.lost_intervals)
        ach = [x for s in ss for x in s.achieved_ms]
        rows.append(dict(
            program=prog, tracker=trk, kills=sum(s.kills for s in ss),
            checked=sum(s.checked for s in ss), torn=sum(s.torn for s in ss),
            durable_lost=sum(s.durable_lost for s in ss),
            durable_rule1=sum(s.durable_rule1 for s in ss),
            evicted_loss=sum(s.evicted_loss for s in ss), errors=sum(s.errors for s in ss),
            lost_p50_ms=percentile(lost, 0.5), lost_p99_ms=percentile(lost, 0.99),
            lost_max_ms=lost[-1] if lost else float("nan"),
            achieved_ms=statistics.median(ach) if ach else float("nan"),
            lost_p50_iv=percentile(iv, 0.5), lost_p99_iv=percentile(iv, 0.99),
            lost_max_iv=iv[-1] if iv else float("nan")))
    print(f"soak: {rows[-1]['kills']} kills in {elapsed_s:.0f} s "
          f"({rows[-1]['kills'] / max(elapsed_s, 1e-9):.2f} kills/s), interval "
          f"{args.interval_ms} ms, nvm {args.nvm}, {args.threads} threads")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        cells = []
        for h in hdr:
            v = r[h]
            cells.append(f"{v:.1f}" if isinstance(v, float) and "iv" not in h else
                         f"{v:.2f}" if isinstance(v, float) else str(v))
        print("| " + " | ".join(cells) + " |")
    return rows


def self_test():
    """Feeds the detectors outputs they must flag (and ones they must not):
    a soak that reports 0 is only worth something if each check can fail."""
    import tempfile
    ns = argparse.Namespace(pool_dir=None, seed=1, build="build", interval_ms=50,
                            pool_size="1G", nvm="pmem", kill_min_ms=10, kill_max_ms=500,
                            threads=2, tick_us=1000, memcached="memcached", mc_evict=False)
    work = tempfile.mkdtemp(prefix="pmthreads-soak-selftest.")
    budget = Budget(1, now_ns(), 1)
    failures = []

    def expect(what, cond):
        print(f"soak self-test: {'ok  ' if cond else 'FAIL'} {what}")
        if not cond:
            failures.append(what)

    bank = BankStream(ns, "bank", "uffd", budget, work)
    ok_line = ("bank: 1000 accounts, 10 transfers, total 1000000 (expected 1000000), "
               "transfers received 10")
    expect("bank: a consistent state is not torn", not bank.parse([ok_line])[1])
    expect("bank: money not conserved is torn", bank.parse([ok_line.replace(
        "total 1000000 (", "total 999990 (")])[1])
    expect("bank: ledger != counters is torn", bank.parse([ok_line.replace(
        "received 10", "received 9")])[1])
    expect("bank: INCONSISTENT is torn", bank.parse([ok_line, "bank: INCONSISTENT"])[1])
    bt = BptreeStream(ns, "bptree", "uffd", budget, work)
    expect("bptree: check=ok is not torn", not bt.parse(
        ["recovered=5 height=1 nodes=1 check=ok"])[1])
    expect("bptree: a hole is torn", bt.parse(
        ["recovered=5 height=1 nodes=1 check=FAILED a thread's surviving inserts have holes"])[1])
    # durable requirements: counts 100 @1 ms (durable 5), 200 @2 ms (6), 300 @3 ms (7)
    pts = [(1_000_000, 100, 5), (2_000_000, 200, 6), (3_000_000, 300, 7)]
    req_cut, req2, req1 = bank.requirements(pts, 2_500_000)
    expect("requirements: epoch-log cutoff", req_cut == 200)
    expect("requirements: durable epoch +2", req2 == 100)
    expect("requirements: durable epoch +1", req1 == 200)
    bank.judge(150, pts, 4_000_000, req_cut, req2, req1, 1.0)
    expect("judge: recovering less than the cutoff is durable loss",
           bank.stats.durable_lost == 1)
    expect("judge: lost work from the first unrecovered report",
           bank.stats.lost_ms == [2.0] and bank.stats.lost_intervals == [2.0])
    bank.judge(300, pts, 4_000_000, req_cut, req2, req1, 1.0)
    expect("judge: recovering everything is no loss",
           bank.stats.durable_lost == 1 and bank.stats.lost_ms[-1] == 0.0)
    log = os.path.join(work, "e.csv")
    with open(log, "w") as f:
        f.write("t_ms,epoch,pause_us,pages,bytes_dirty,bytes_written,stage_us,persist_us,"
                "period_us,pages_saved\n100.000,1,1000,1,4096,64,500,2500,50000,0\n"
                "150.000,2,1000,1,4096,64,500,2500,40000,0\n"
                "200.000,3,1000,1,4096,64,500,2500,50000,0\n201.0,4,1")
    cutoff, achieved = epoch_facts(read_epoch_log(log), 0)
    expect("epoch log: cutoff = the line before the last epoch's, cut line ignored",
           cutoff == int(150.0 * 1e6))
    near = [dict(r) for r in read_epoch_log(log)[:3]]
    near[1]["t_ms"] = 199.0
    expect("epoch log: cutoff = the last epoch's pause start when that is earlier",
           epoch_facts(near, 0)[0] == int((200.0 - 3.0) * 1e6))
    expect("epoch log: achieved period = median of the last periods", achieved == 50.0)
    rows = read_epoch_log(log)[:1]
    expect("epoch log: one period is not enough", epoch_facts(rows, 0)[1] is None)
    with open(log, "w") as f:
        f.write("t_ms,epoch,pause_us,pages,bytes_dirty,bytes_written,stage_us,persist_us,"
                "period_us,pages_saved,conflicts,durable\n"
                "100.000,1,1000,1,4096,64,500,2500,50000,0,0,1\n"
                "150.000,2,1000,1,4096,64,500,2500,40000,0,0,1\n"
                "200.000,2,1000,1,4096,64,500,2500,50000,0,3,0\n")
    expect("epoch log: a carried-over line (durable 0) is not what survives",
           epoch_facts(read_epoch_log(log), 0)[0] == int(100.0 * 1e6))
    # memcached bookkeeping: round 2's last keys were lost in its own kill
    # (allowed: after that kill's cutoff); rounds 3-6 were killed in
    # start-up, so the check of round 7 is the first to see round 2
    mc = MemcachedStream(ns, "memcached", "uffd", budget, work)

    class FakeConn:
        def __init__(self, lost):
            self.lost = lost

        def get_many(self, keys):
            out = {}
            for k in keys:
                r, i = (int(x) for x in k[1:].split(b"-"))
                if (r, i) not in self.lost:
                    out[k] = mc_value(r, i)
            return out

    mc.acks = {1: [(i, 1000 + i) for i in range(10)], 2: [(i, 2000 + i) for i in range(10)]}
    mc.round_no = 7
    mc.first_unchecked = 2
    mc.pending = dict(req_cut=2005, t_kill=2020)
    lost = {(2, 8), (2, 9)}
    first, required = mc.verify(FakeConn(lost), "", recent_only=True)
    expect("memcached: a round whose kill no check saw is checked",
           first == 2008 and required == [] and len(mc.acks[2]) == 8)
    mc.pending = dict(req_cut=99999, t_kill=99999)
    mc.round_no = 30
    mc.first_unchecked = 29
    first, required = mc.verify(FakeConn(lost), "", recent_only=False)
    expect("memcached: keys lost in an earlier kill are not required later", required == [])
    first, required = mc.verify(FakeConn(lost | {(1, 3)}), "", recent_only=False)
    expect("memcached: a key that survived a check and then vanished is required",
           required == [(1, 3, 1003)])
    mc.acks[1].append((3, 1003))
    mc.judge_missing(required, "self-test", None)
    expect("memcached: a required key missing, nothing evicted: durable loss",
           mc.stats.durable_lost == 1 and mc.stats.evicted_loss == 0)
    mc.evicted_keys = {b"k1-3"}
    mc.judge_missing(required, "self-test", None)
    expect("memcached: a required key missing that `watch evictions` named: evicted",
           mc.stats.durable_lost == 1 and mc.stats.evicted_loss == 1)
    mc.evicted_keys = set()
    mc.evictions_unnamed = 4
    mc.judge_missing(required, "self-test", None)
    expect("memcached: a required key missing after unnamed evictions: evicted_loss",
           mc.stats.durable_lost == 1 and mc.stats.evicted_loss == 2)
    mc.evictions_unnamed = 0

    class CutConn(FakeConn):
        def get_many(self, keys):
            if keys[0].startswith(b"k2-"):
                raise ConnectionError("killed")
            return FakeConn.get_many(self, keys)
    n1 = len(mc.acks[1])
    try:
        mc.verify(CutConn({(1, 4)}), "", recent_only=False)
    except ConnectionError:
        pass
    expect("memcached: a check the kill cut short forgets nothing",
           len(mc.acks[1]) == n1)
    wrong = FakeConn(set())
    wrong.get_many = lambda keys: {k: b"x" for k in keys}
    torn_before = mc.stats.torn
    mc.verify(wrong, "", recent_only=False)
    expect("memcached: a wrong value is torn", mc.stats.torn == torn_before + 1)
    mc.verify(FakeConn(set()), "[restart] relinked 5 items, dropped 2 incomplete linked items",
              recent_only=False)
    expect("memcached: recovery dropping items is torn", mc.stats.torn == torn_before + 2)
    # `watch evictions` as memcached 1.6 speaks it: "OK\r\n", then lines
    # ending in a bare "\n"
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def fake_memcached():
        c, _ = srv.accept()
        c.recv(100)
        c.sendall(b"OK\r\nts=1.0 gid=5 type=eviction key=k1-3 fetch=no ttl=-1 la=1 clsid=6 "
                  b"size=200\nts=1.1 gid=6 type=eviction key=k1-4 fetch=no\nskipped=2\n")
        c.close()
    th = threading.Thread(target=fake_memcached)
    th.start()
    keys, skipped = EvictionWatch(srv.getsockname()[1]).finish()
    th.join()
    srv.close()
    expect("memcached: `watch evictions` lines are read",
           keys == {b"k1-3", b"k1-4"} and skipped == 2)
    # a server on our port that is not ours (its `stats` pid differs)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def foreign_memcached():
        c, _ = srv.accept()
        c.recv(100)
        c.sendall(b"STAT pid 1\r\nSTAT curr_items 5\r\nEND\r\n")
        c.close()
    th = threading.Thread(target=foreign_memcached)
    th.start()
    mc.port = srv.getsockname()[1]
    mc.proc = subprocess.Popen(["sleep", "30"])
    errors_before = mc.stats.errors
    up = mc.wait_up(now_ns() + int(5e9))
    th.join()
    srv.close()
    mc.proc.wait()
    expect("memcached: a port answered by another pid is not checked",
           up is False and mc.stats.errors == errors_before + 1)
    # two streams, one slot: the slot alternates (a Semaphore starved one)
    slots, order, done = FairSlots(1), [], {}

    def take(name, other):
        for _ in range(5):
            with slots:
                order.append(name)
                # hold the slot until the other stream waits for it (a
                # loaded machine may start it late)
                give_up = time.monotonic() + 10
                while (not slots.queue and not done.get(other)
                       and time.monotonic() < give_up):
                    time.sleep(0.001)
        done[name] = True
    ths = [threading.Thread(target=take, args=(n, o)) for n, o in ("ab", "ba")]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    expect("slots: --jobs 1 alternates between streams",
           "".join(order) in ("ababababab", "bababababa"))
    expect("memcached values: deterministic, differ between keys",
           mc_value(1, 2) == mc_value(1, 2) and mc_value(1, 2) != mc_value(1, 3))
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    print(f"soak self-test: {'PASS' if not failures else 'FAIL'}")
    sys.exit(1 if failures else 0)


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    ap = argparse.ArgumentParser(description="kill -9 soak over bank, bptree and memcached")
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
    ap.add_argument("--nvm", choices=("pmem", "msync"), default="pmem")
    ap.add_argument("--memcached", default=None)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--json", default=None, help="also write the summary rows here")
    ap.add_argument("--mc-verify-all", action="store_true",
                    help="memcached: check every round since the reset after every restart "
                         "(default: the last 3 rounds, all of them every 10th round)")
    ap.add_argument("--mc-evict", action="store_true",
                    help="memcached without -M: a full cache evicts its LRU tail (the keys it "
                         "names are not counted as durable loss)")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()

    def bad(msg):
        print(f"soak: {msg}", file=sys.stderr)
        sys.exit(2)

    programs = [p for p in args.programs.split(",") if p]
    trackers = [t for t in args.trackers.split(",") if t]
    for p in programs:
        if p not in STREAMS:
            bad(f"unknown program {p!r}: choose from bank, bptree, memcached")
    for t in trackers:
        if t not in ("uffd", "mprotect"):
            bad(f"unknown tracker {t!r}: choose from uffd, mprotect")
    if not (0 <= args.kill_min_ms < args.kill_max_ms):
        bad("--kill-min-ms must be below --kill-max-ms")
    if args.kills < 1 or args.jobs < 1 or args.reset_every < 1:
        bad("--kills, --jobs and --reset-every must be at least 1")
    needed = {"bank": os.path.join(args.build, "examples", "bank"),
              "bptree": os.path.join(args.build, "parsec-ports", "recovery", "bptree_crash")}
    if "memcached" in programs:
        args.memcached = args.memcached or os.path.join(args.build, "memcached-demo",
                                                        "memcached-pmthreads")
        needed["memcached"] = args.memcached
    for p in programs:
        if not os.access(needed[p], os.X_OK):
            hint = ("build it with memcached-demo/fetch-and-build.sh -B " + args.build
                    if p == "memcached" else "build it: meson compile -C " + args.build)
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
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    workdir = args.workdir or __import__("tempfile").mkdtemp(prefix="pmthreads-soak.", dir=base)
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
                           seconds=time.monotonic() - t0,
                           streams=[dict(program=s.stats.program, tracker=s.stats.tracker,
                                         lost_ms=s.stats.lost_ms,
                                         lost_intervals=s.stats.lost_intervals,
                                         notes=s.stats.notes) for s in streams]), f)
    if not args.workdir:
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    total = rows[-1]
    sys.exit(0 if total["torn"] == 0 and total["durable_lost"] == 0 and total["errors"] == 0
             else 1)


if __name__ == "__main__":
    main()
