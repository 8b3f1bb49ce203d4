# SPDX-License-Identifier: BSD-3-Clause
"""recovery_row.py -- one row of parsec-ports/recovery/crash_recover.sh (its
header says what each column means): read from the run's directory, printed
as a table line, appended to the CSV when one is asked for.

  python3 -m pmtkit.recovery_row DIR BACKEND INTERVAL THREADS SECONDS [CSV]
  python3 -m pmtkit.recovery_row --header | --csv-header

DIR holds run.out (the killed run's output), recover.out / recover.err (the
restart's), stats.json (its PMTHREADS_STATS), epochs.csv (the killed run's
PMTHREADS_EPOCH_LOG) and pool."""

import os
import re
import statistics
import sys

from pmtkit.epoch_log import read_epoch_log

HEADER = ("%-9s %8s %9s %9s %10s %10s %9s %7s %11s %14s %9s %9s %s" % (
    "backend", "asked_ms", "period_ms", "last_ms", "inserted", "recovered", "lost", "lost_%",
    "recovery_ms", "rt_recovery_ms", "pool_MiB", "used_MiB", "check"))
CSV_HEADER = ("backend,interval_ms,threads,seconds,inserted,recovered,lost,lost_pct,recovery_ms,"
              "rt_recovery_ms,pool_bytes,pool_used_bytes,check,period_ms,period_last_ms")


def _text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def value_of(key, text):
    """The value of the last `KEY=value` word in text (None: there is none)."""
    found = re.findall(re.escape(key) + r"=([^ \n]*)", text)
    return found[-1] if found else None


def median_period(epoch_log, last=0):
    """The median period_us of the log's epochs (of its last `last` when
    last > 0) as ms with one decimal; the first epoch (period 0, it has no
    predecessor) does not count.  '' without a log or periods."""
    periods = [r["period_us"] for r in read_epoch_log(epoch_log) if r.get("period_us", 0) > 0]
    if last > 0:
        periods = periods[-last:]
    return "%.1f" % (statistics.median(periods) / 1000) if periods else ""


def measure(d):
    """The row's values from run directory d."""
    rec_out = _text(os.path.join(d, "recover.out"))
    check = value_of("check", rec_out)
    if not check:
        err = _text(os.path.join(d, "recover.err")).encode()[:80].decode(errors="replace")
        check = "FAILED(%s)" % err.replace("\n", " ").replace(",", " ")
    rt = re.search(r'"recovery_ns": *([0-9]*)', _text(os.path.join(d, "stats.json")))
    try:
        st = os.stat(os.path.join(d, "pool"))
        pool_bytes, used_bytes = st.st_size, -(-st.st_blocks // 2) * 1024
    except OSError:
        pool_bytes = used_bytes = 0
    return dict(inserted=int(value_of("inserted", _text(os.path.join(d, "run.out"))) or 0),
                recovered=int(value_of("recovered", rec_out) or 0),
                recovery_ms=value_of("recovery_ms", rec_out) or "nan",
                rt_ns=rt.group(1) if rt else "", check=check,
                period_ms=median_period(os.path.join(d, "epochs.csv")),
                period_last_ms=median_period(os.path.join(d, "epochs.csv"), 5),
                pool_bytes=pool_bytes, used_bytes=used_bytes)


def format_row(backend, interval, threads, seconds, m):
    """(table line, CSV line) of measure()'s values; lost is 0 when the tree
    holds more than the last printed count (later inserts survived too)."""
    ins, rec = m["inserted"], m["recovered"]
    lost = max(ins - rec, 0)
    pct = 100 * lost / ins if ins > 0 else 0
    rt = "%.2f" % (int(m["rt_ns"]) / 1e6) if m["rt_ns"] else "-"
    table = "%-9s %8s %9s %9s %10d %10d %9d %7.2f %11s %14s %9.1f %9.1f %s" % (
        backend, interval, m["period_ms"] or "-", m["period_last_ms"] or "-", ins, rec, lost, pct,
        m["recovery_ms"], rt, m["pool_bytes"] / 1048576, m["used_bytes"] / 1048576, m["check"])
    csv = "%s,%s,%s,%s,%d,%d,%d,%.4f,%s,%s,%.0f,%.0f,%s,%s,%s" % (
        backend, interval, threads, seconds, ins, rec, lost, pct, m["recovery_ms"],
        "" if rt == "-" else rt, m["pool_bytes"], m["used_bytes"], m["check"], m["period_ms"],
        m["period_last_ms"])
    return table, csv


def main(argv):
    if argv in (["--header"], ["--csv-header"]):
        print(HEADER if argv[0] == "--header" else CSV_HEADER)
        return
    if len(argv) not in (5, 6):
        sys.exit("usage: python3 -m pmtkit.recovery_row DIR BACKEND INTERVAL THREADS SECONDS [CSV]")
    d, backend, interval, threads, seconds = argv[:5]
    table, csv = format_row(backend, interval, threads, seconds, measure(d))
    print(table, flush=True)
    if len(argv) == 6 and argv[5]:
        with open(argv[5], "a") as f:
            f.write(csv + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
