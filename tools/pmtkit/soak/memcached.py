# SPDX-License-Identifier: BSD-3-Clause
"""memcached.py -- the soak's memcached-pmthreads stream: sets acknowledged
over a socket until the kill, checked after every restart, and the evictions
memcached names (or only counts) told apart from durable loss."""

import collections
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

from pmtkit.epoch_log import read_epoch_log
from pmtkit.memcached_client import MemcachedClient
from pmtkit.soak.stream import Stream, epoch_facts, now_ns


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
            self.conn = MemcachedClient(port, timeout=5.0)
            self.conn.send(b"watch evictions\r\n")
            self.ok = self.conn.line() == b"OK"
            self.conn.sock.settimeout(None)
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
                chunk = self.conn.sock.recv(65536)
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
    # Strict (output commit, memcached_commit.py): every set the client saw
    # acknowledged must survive, not only those before the epoch log's cutoff.
    STRICT = False
    CACHE_MB = 128  # memcached -m

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
                "-t", str(self.args.threads), "-m", str(self.CACHE_MB), "-v"]
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
                c = MemcachedClient(self.port, timeout=1.0)
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
            chunks = [acks[k0:k0 + 100] for k0 in range(0, len(acks), 100)]
            keys = [[b"k%d-%d" % (rnd, i) for i, _ in chunk] for chunk in chunks]
            for chunk, ks, found in zip(chunks, keys, self.fetch(conn, keys)):
                for (i, ack), key in zip(chunk, ks):
                    v = found.get(key)
                    if v is None:
                        gone.add(i)
                        if first_missing is None or ack < first_missing:
                            first_missing = ack
                        if self.STRICT or (cutoff is not None and ack <= cutoff):
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

    def fetch(self, conn, key_lists):
        """{key: value} of the keys found, per list of keys (in order)."""
        for keys in key_lists:
            yield conn.get_many(keys)

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
            s.acked_lost += len(unnamed)
            saved = os.path.join(self.dir, f"loss-round{self.round_no}-epochs.csv")
            try:
                shutil.copy(self.prev_epoch_log, saved)
            except OSError:
                saved = "(no epoch log)"
            what = ("ACKNOWLEDGED SETS LOST: {} sets the client read \"STORED\" for are "
                    "missing" if self.STRICT else
                    "DURABLE WORK LOST: {} sets acknowledged before the last complete epoch "
                    "began are missing").format(len(unnamed))
            s.note(f"{what} ({where}), none of them evicted "
                   f"(named {len(self.evicted_keys)}, unnamed {self.evictions_unnamed} "
                   f"evictions since the reset). {detail}; the killed run's epoch log: {saved}")

    def describe_missing(self, missing, st_now):
        """Per round: how many of its acknowledged sets are missing, their
        acknowledgement times against that round's kill and the last kill's
        cutoff; the items before the last kill and after this restart."""
        last_cut = self.pending["req_cut"] if self.pending and not self.STRICT else None
        by_round = collections.defaultdict(list)
        for rnd, i, ack in missing:
            by_round[rnd].append((i, ack))
        parts = []
        for rnd in sorted(by_round):
            lst = by_round[rnd]
            info = self.runs.get(rnd, {})
            t_kill = info.get("t_kill")
            ages = sorted((t_kill - ack) / 1e6 for _, ack in lst) if t_kill else []
            # (negative: read after the kill, from what the server had sent)
            span = (f", acked {ages[0]:.0f} to {ages[-1]:.0f} ms before its kill" if ages else "")
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
                if p["had_acks"] and self.STRICT:
                    # a loss is a failure (counted above), not lost work
                    if p["achieved"]:
                        s.achieved_ms.append(p["achieved"])
                elif p["had_acks"]:
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
        i, st = self.load(conn, rnd, acks)
        timer.join()
        s.acked += len(acks)
        conn.close()
        self.kill()
        self.note_evictions(watch, st)
        s.kills += 1
        cutoff, achieved = epoch_facts(read_epoch_log(self.epoch_log), self.t_exec)
        run.update(t_kill=self.killed_at, cutoff=cutoff, sets=i, acked=len(acks),
                   curr_items=st.get("curr_items"))
        self.pending = dict(t_kill=self.killed_at, req_cut=cutoff, achieved=achieved,
                            had_acks=bool(acks))

    def load(self, conn, rnd, acks):
        """Sets k<rnd>-<i> one at a time until the kill, each acknowledgement
        appended to acks as (i, ns); returns (sets sent, the last `stats`)."""
        i = 0
        st = {}
        try:
            while self.killed_at is None:
                if conn.store(b"k%d-%d" % (rnd, i), mc_value(rnd, i)) == "STORED":
                    acks.append((i, now_ns()))
                i += 1
                if i % 50 == 0:
                    st = conn.stats()
        except (OSError, ConnectionError, ValueError):
            pass
        return i, st

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

