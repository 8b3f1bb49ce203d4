# SPDX-License-Identifier: BSD-3-Clause
"""cpu_split.py -- memcached-demo/cpu-split.sh's arithmetic: where each
`perf script` sample's CPU went, and the table of medians (the script's
header says what the run measures).

  perf script -F comm,pid,tid,ip,sym | python3 -m pmtkit.cpu_split split OPS PERIOD_US
      "GROUP ACTIVITY US_PER_REQUEST" lines (and "GROUP TOTAL ..." per group)
  python3 -m pmtkit.cpu_split table OUT "MODES" ROUNDS SECONDS CONNS SET_PERCENT TRACKER
      cpu-split.md's text from OUT/MODE-rN.split and OUT/MODE-rN.result
"""

import glob
import os
import re
import statistics
import sys
import time

GROUPS = ("client", "server", "runtime", "idle", "other")
ACTIVITIES = ("TOTAL", "send", "recv", "epoll", "futex+membarrier", "tracker-ioctl",
              "page-fault", "user", "other-kernel")
# a system call's handler (the frame under do_syscall_64) -> its activity, first match
SYSCALLS = ((r"sendmsg|sendto|sendmmsg|sys_write", "send"), (r"recvfrom|recvmsg|read", "recv"),
            (r"epoll", "epoll"), (r"ioctl", "tracker-ioctl"),
            (r"futex|membarrier", "futex+membarrier"))


def group_of(comm, pid, tid):
    """The thread group of a sample: the runtime's threads (the epoch thread,
    output commit's release thread) are those of memcached-pmthreads named
    after the program that are not its main thread; every thread of Redis is
    the server's."""
    if comm == "mc_client":
        return "client"
    if re.match(r"redis-server|bio_|io_thd_", comm):
        return "server"
    if re.match(r"mc-|memcached", comm):
        return "runtime" if comm.startswith("memcached-pmthr") and pid != tid else "server"
    if comm == "swapper":
        return "idle"
    return "other"


def activity_of(group, act):
    if group == "idle":
        return "-"
    if act in ("user", "page-fault"):
        return act
    for pattern, name in SYSCALLS:
        if re.search(pattern, act):
            return name
    return "other-kernel"


def samples(lines):
    """(group, activity) of each sample of `perf script -F comm,pid,tid,ip,sym`:
    a sample's line starts with "comm pid/tid", its stack lines (leaf first)
    with white space; the activity is the system call it was in (the frame
    under do_syscall_64), a page fault, or user code."""
    head, act, prev = None, "user", ""
    for line in lines:
        if line[:1] not in (" ", "\t"):
            if not line.strip():
                continue
            if head:
                yield group_of(*head), activity_of(group_of(*head), act)
            f = line.split()
            pid, _, tid = (f[1] if len(f) > 1 else "").partition("/")
            head, act, prev = (f[0], pid, tid), "user", ""
            continue
        f = line.split()
        sym = f[1] if len(f) > 1 else ""
        if act == "user" and sym == "do_syscall_64":
            act = prev
        if act == "user" and "exc_page_fault" in sym:
            act = "page-fault"
        prev = sym
    if head:
        yield group_of(*head), activity_of(group_of(*head), act)


def split(lines, ops, period_us):
    """The .split file's lines: microseconds of CPU per request."""
    n, tot = {}, {}
    for g, a in samples(lines):
        n[(g, a)] = n.get((g, a), 0) + 1
        tot[g] = tot.get(g, 0) + 1
    out = ["%s %s %.2f" % (g, a, c * period_us / ops) for (g, a), c in n.items()]
    out += ["%s TOTAL %.2f" % (g, c * period_us / ops) for g, c in tot.items()]
    return sorted(out)


def median2(values):
    return "%.2f" % statistics.median(values)


def medians(out, modes):
    """{mode: (ops/s median, {(group, activity): median})} over the rounds'
    files, for the modes with at least one result."""
    found = {}
    for mode in modes:
        splits = sorted(glob.glob(os.path.join(out, f"{mode}-r*.split")))
        if not splits:
            continue
        ops = []
        for r in sorted(glob.glob(os.path.join(out, f"{mode}-r*.result"))):
            with open(r) as f:
                ops += [float(ln.split(",")[2]) for ln in f if ln.strip()]
        cells = {}
        for path in splits:
            with open(path) as f:
                for ln in f:
                    g, a, v = ln.split()
                    cells.setdefault((g, a), []).append(float(v))
        found[mode] = (median2(ops) if ops else "", {k: median2(v) for k, v in cells.items()})
    return found


def table(found):
    """The markdown table: one column per mode, group totals in bold."""
    modes = list(found)
    lines = ["| thread group | activity |" + "".join(
        f" {m} ({found[m][0].split('.')[0]} ops/s) |" for m in modes),
        "| --- | --- |" + " ---: |" * len(modes)]
    keys = {k for m in modes for k in found[m][1]}
    for g in GROUPS:
        for i, a in enumerate(ACTIVITIES):
            if (g, a) not in keys or (i > 0 and g in ("idle", "other")):
                continue
            line = "| " + (f"**{g}**" if i == 0 else "") + " | " + ("**all**" if i == 0 else a) + " |"
            lines.append(line + "".join(f" {found[m][1].get((g, a), '-')} |" for m in modes))
    busy = "| **busy** | client + server + runtime + other |"
    for m in modes:
        t = sum(float(found[m][1][(g, "TOTAL")]) for g in GROUPS
                if g != "idle" and (g, "TOTAL") in found[m][1])
        busy += " %.2f |" % t
    return lines + [busy]


def report(out, modes, rounds, seconds, conns, setp, tracker):
    """cpu-split.md's text."""
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return "\n".join([
        f"# CPU per request (µs), {conns} connections, {setp} % sets, tracker {tracker}", "",
        f"Command: `ROUNDS={rounds} SECONDS_PER_RUN={seconds} CONNS={conns} SET_PERCENT={setp} "
        f"TRACKER={tracker} MODES='{modes}' memcached-demo/cpu-split.sh`",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs; "
        f"load average before the table: {load}.",
        f"Medians over {rounds} round(s); ops/s while perf sampled (sampling slows every mode "
        "a little).", ""] + table(medians(out, modes.split())) + ["", ""])


def main(argv):
    if len(argv) == 3 and argv[0] == "split":
        ops, period_us = float(argv[1]), float(argv[2])
        if ops <= 0:
            sys.exit("cpu_split: no request served in the sampled window")
        for line in split(sys.stdin, ops, period_us):
            print(line)
    elif len(argv) == 8 and argv[0] == "table":
        sys.stdout.write(report(*argv[1:]))
    else:
        sys.exit(__doc__.split("\n\n")[1])


if __name__ == "__main__":
    main(sys.argv[1:])
