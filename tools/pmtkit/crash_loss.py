# SPDX-License-Identifier: BSD-3-Clause
"""crash_loss.py -- memcached-demo/crash-test.sh's loss report: how many
acknowledged sets a kill -9 lost and how long before the kill the oldest of
them was acknowledged, in ms and in the epoch periods the killed run
achieved (its header says what the test checks).

  python3 -m pmtkit.crash_loss loss KILL_NS EPOCH_LOG VERIFY_LINE WINDOWS
      the round's "  loss: ..." line; appends the loss window (achieved
      periods x 1000) to the file WINDOWS
  python3 -m pmtkit.crash_loss worst WINDOWS
      "largest loss window: N.NN achieved epoch periods"
  python3 -m pmtkit.crash_loss horizon START_NS EPOCH_LOG
      the durability horizon: a time (ns, CLOCK_REALTIME) no later than the
      quiescent point of the newest epoch the log shows durable, for a
      server started at START_NS or later; 0 when no epoch was durable.  Every
      set acknowledged before it must survive a kill: the runtime said so,
      however late its epochs ran on a loaded machine.
"""

import re
import sys

from pmtkit.epoch_log import read_epoch_log


def epoch_median(rows, column):
    """The lower median of column over the last 10 epochs with a value > 0
    (period_us: since the previous epoch began; persist_us: pause and
    write-back); 0 without any."""
    v = sorted([r[column] for r in rows if r.get(column, 0) > 0][-10:])
    return int(v[(len(v) + 1) // 2 - 1]) if v else 0


def _field(line, name):
    """The last NAME=digits of mc_client verify's line (0 when absent)."""
    found = re.findall(r"(?:^|[ ])" + name + r"=([0-9]+)", line)
    return int(found[-1]) if found else 0


def _tdiv(a, b):
    """a / b truncated toward zero, as the shell's $(( ))."""
    q = abs(a) // b
    return q if a >= 0 else -q


def periods(x1000):
    return "%d.%02d" % (x1000 // 1000, (x1000 % 1000) // 10)


def loss(kill_ns, per_us, persist_us, line):
    """(the report line, the loss window in achieved periods x 1000)."""
    acked, present = _field(line, "acked"), _field(line, "present")
    oldest, last = _field(line, "oldest_lost_ack_ns"), _field(line, "last_ack_ns")
    if oldest == 0:
        return (f"  loss: 0 of {acked} acknowledged sets lost (last ack "
                f"{_tdiv(kill_ns - last, 1000000)} ms before the kill; achieved epoch period "
                f"{per_us // 1000} ms)"), 0
    age_us = _tdiv(kill_ns - oldest, 1000)
    x1000 = _tdiv(age_us * 1000, per_us) if per_us > 0 else 0
    return (f"  loss: {acked - present} of {acked} acknowledged sets lost, the oldest "
            f"acknowledged {_tdiv(age_us, 1000)} ms before the kill = {periods(x1000)} achieved "
            f"epoch periods ({per_us // 1000} ms; median pause + write-back of an epoch: "
            f"{persist_us} us)"), x1000


def horizon(start_ns, rows):
    """START_NS plus the newest durable epoch's quiescent point as the log
    places it: a row is written when its write-back ended (t_ms, since the
    runtime started, which is after START_NS) and the quiescent point came
    no later than pause + persist (collection and write-back) before that."""
    best = 0
    for r in rows:
        if r.get("durable", 1) != 1:
            continue
        q = start_ns + int(r["t_ms"] * 1e6) - int(r.get("persist_us", 0) * 1e3) \
            - int(r.get("pause_us", 0) * 1e3)
        best = max(best, q)
    return best


def main(argv):
    if len(argv) == 5 and argv[0] == "loss":
        rows = read_epoch_log(argv[2])
        text, x1000 = loss(int(argv[1]), epoch_median(rows, "period_us"),
                           epoch_median(rows, "persist_us"), argv[3])
        print(text)
        with open(argv[4], "a") as f:
            f.write(f"{x1000}\n")
    elif len(argv) == 2 and argv[0] == "worst":
        try:
            with open(argv[1]) as f:
                worst = max([int(ln) for ln in f if ln.strip()] + [0])
        except OSError:
            worst = 0
        print(f"largest loss window: {periods(worst)} achieved epoch periods")
    elif len(argv) == 3 and argv[0] == "horizon":
        print(horizon(int(argv[1]), read_epoch_log(argv[2])))
    else:
        sys.exit(__doc__.split("\n\n")[1])


if __name__ == "__main__":
    main(sys.argv[1:])
