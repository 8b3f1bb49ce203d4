# SPDX-License-Identifier: BSD-3-Clause
"""memcached_commit.py -- the soak's memcached-commit stream: memcached-pmthreads
with output commit (PMTHREADS_OUTPUT=commit), where a "STORED" reply leaves the
server only once the epoch holding the set is durable.  So the check is
strict: every set whose "STORED" the client read -- before the kill, or after
it from what the dead server had already released -- must be back after
recovery, with its value.  A missing one is a failure (durable_lost, its keys
counted in acked_lost), whatever the epoch log says.

A reply waits for an epoch, so one set at a time would measure the epoch
rate, not the server: the load keeps --mc-window sets in flight on each of
--mc-conns connections, and the check pipelines its gets.  The time from
sending a set to reading its "STORED" is the hold the client sees (ack_us).

--commit-output off runs the same stream and check with the hold disabled
(PMTHREADS_OUTPUT=off): the proof that the check fails without it."""

import collections
import selectors
import socket

from pmtkit.memcached_client import MemcachedClient
from pmtkit.soak.memcached import MemcachedStream, mc_value
from pmtkit.soak.stream import now_ns

# How long to read what a killed server had released (its sockets are closed
# by the kernel at once; this only bounds a reader on a loaded machine).
DRAIN_S = 2.0
# `stats` (the eviction counters) at most this often during the load
STATS_EVERY_NS = 50_000_000
# No reply to any set in flight for this long, and no kill: the server (or
# its held output) hangs.  Epochs take milliseconds; a round lasts < 1 s.
STALL_NS = 10_000_000_000
# A reply waits for an epoch, which on a loaded machine can take longer
# than the 1 s wait_up allows a reply to its probe
REPLY_TIMEOUT_S = 10.0


class LoadConn:
    """One load connection: the sets in flight, oldest first, and the bytes
    of a reply line not complete yet."""

    def __init__(self, port):
        self.client = MemcachedClient(port, timeout=5.0)
        self.sock = self.client.sock
        self.inflight = collections.deque()  # (i, ns sent)
        self.buf = b""
        self.refused = 0  # "SERVER_ERROR" / "NOT_STORED" (a full cache under -M)

    def close(self):
        self.client.close()


def take_replies(lc, data, t_ns, acks, ack_us):
    """Consumes data received on lc at t_ns: each complete reply line answers
    the oldest set in flight; "STORED" appends (i, t_ns) to acks and the wait
    to ack_us (None: after the kill, no latency).  Returns the first reply
    that is neither "STORED" nor a refusal, or None."""
    lc.buf += data
    odd = None
    while True:
        cut = lc.buf.find(b"\r\n")
        if cut < 0:
            return odd
        line, lc.buf = lc.buf[:cut], lc.buf[cut + 2:]
        if not lc.inflight:
            return odd or line or b"(empty line)"
        i, t_sent = lc.inflight.popleft()
        if line == b"STORED":
            acks.append((i, t_ns))
            if ack_us is not None:
                ack_us.append((t_ns - t_sent) / 1000.0)
        elif line.startswith(b"SERVER_ERROR") or line == b"NOT_STORED":
            lc.refused += 1
        else:
            odd = odd or line


class MemcachedCommitStream(MemcachedStream):
    STRICT = True
    # The pipelined load acknowledges about as many sets per round as
    # memcached's one-at-a-time load on a loaded machine, more on a quiet
    # one: with -m 128 a 40-round reset period could fill the cache under
    # -M (refused sets are not acknowledged, so not checked)
    CACHE_MB = 256

    def __init__(self, *a):
        super().__init__(*a)
        self.stats.commit = True
        self.refused = 0  # sets refused since the last reset

    def reset_bookkeeping(self):
        if self.refused:
            self.stats.note(f"{self.refused} sets refused (not acknowledged, so not checked) "
                            f"in the {self.rounds_since_reset} rounds before this reset: the "
                            f"cache was full (-M)")
        self.refused = 0
        super().reset_bookkeeping()

    def env(self):
        e = super().env()
        e["PMTHREADS_OUTPUT"] = self.args.commit_output
        return e

    def wait_up(self, until_ns):
        conn = super().wait_up(until_ns)
        if conn:
            conn.sock.settimeout(REPLY_TIMEOUT_S)
        return conn

    def fetch(self, conn, key_lists):
        return conn.get_many_pipelined(key_lists)

    def load(self, conn, rnd, acks):
        """Sets k<rnd>-<i> over --mc-conns connections, --mc-window in flight
        on each, until the kill; then what the dead server had released.
        Returns (sets sent, the last `stats`)."""
        conns = []
        sel = selectors.DefaultSelector()
        st = {}
        stats_buf = b""
        stats_asked = 0  # ns, 0: no `stats` in flight
        stats_next = now_ns()
        next_i = 0
        odd = None
        last_reply = now_ns()
        try:
            for _ in range(self.args.mc_conns):
                lc = LoadConn(self.port)
                conns.append(lc)
                sel.register(lc.sock, selectors.EVENT_READ, lc)
            sel.register(conn.sock, selectors.EVENT_READ, None)
            while self.killed_at is None and odd is None:
                for lc in conns:
                    if len(lc.inflight) * 2 > self.args.mc_window:
                        continue
                    t = now_ns()
                    req = []
                    while len(lc.inflight) < self.args.mc_window:
                        v = mc_value(rnd, next_i)
                        req.append(b"set k%d-%d 0 0 %d\r\n%s\r\n" % (rnd, next_i, len(v), v))
                        lc.inflight.append((next_i, t))
                        next_i += 1
                    lc.sock.sendall(b"".join(req))
                t = now_ns()
                if not stats_asked and t >= stats_next:
                    conn.send(b"stats\r\n")
                    stats_asked = t
                events = sel.select(timeout=0.05)
                if not events and now_ns() - last_reply > STALL_NS and self.killed_at is None:
                    raise TimeoutError(f"no reply to {sum(len(lc.inflight) for lc in conns)} "
                                       f"sets in flight for {STALL_NS / 1e9:.0f} s")
                for key, _ in events:
                    data = key.fileobj.recv(1 << 16)
                    if not data:
                        raise ConnectionError("memcached closed the connection")
                    t = last_reply = now_ns()
                    if key.data is None:  # the stats connection
                        stats_buf += data
                        if stats_buf.endswith(b"END\r\n"):
                            st = parse_stats(stats_buf)
                            stats_buf = b""
                            stats_asked = 0
                            stats_next = t + STATS_EVERY_NS
                        continue
                    odd = take_replies(key.data, data, t, acks, self.stats.ack_us)
        except (OSError, ConnectionError, ValueError) as ex:
            if self.killed_at is None:
                # not our kill: the server died, or stopped answering
                alive = self.proc.poll() is None
                self.stats.errors += 1
                self.stats.note(f"round {rnd}: the load failed with {ex!r}; the server "
                                + (f"hangs (stacks in {self.dump_stacks(rnd)})" if alive else
                                   f"exited with status {self.proc.poll()}"))
        if odd is not None:
            self.stats.errors += 1
            self.stats.note(f"round {rnd}: unexpected reply to a set: {odd[:80]!r}")
        sel.close()
        self.drain(conns, acks)
        self.refused += sum(lc.refused for lc in conns)
        return next_i, st

    def drain(self, conns, acks):
        """After the kill: every reply the server released before it died is
        an acknowledgement the client could have read, so it is read and
        counted (with the hold off, these are what a kill loses first)."""
        if self.killed_at is None:
            # not our kill (the server failed): nothing of this run is judged
            # by what it still sends
            for lc in conns:
                lc.close()
            return
        until = now_ns() + int(DRAIN_S * 1e9)
        for lc in conns:
            try:
                while lc.inflight and now_ns() < until:
                    lc.sock.settimeout(max(0.01, (until - now_ns()) / 1e9))
                    data = lc.sock.recv(1 << 16)
                    if not data:
                        break
                    take_replies(lc, data, now_ns(), acks, None)
            except (OSError, socket.timeout):
                pass
            lc.close()


def parse_stats(buf):
    """A `stats` reply as {name: value} (both str)."""
    st = {}
    for line in buf.decode(errors="replace").split("\r\n"):
        f = line.split(" ", 2)
        if len(f) == 3 and f[0] == "STAT":
            st[f[1]] = f[2]
    return st
