#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""report.py -- the tables and plots of a bench.sh run.

usage: report.py OUT_DIR

Reads OUT_DIR/results.csv (one row per run) and OUT_DIR/epochs/<tag>.csv (the
PMTHREADS_EPOCH_LOG of each pmthreads run, tag = MODE-tTHREADS-iINTERVAL-rREPEAT)
and writes:

  summary.md                 the tables below, also printed
  throughput.png             ops/s against the interval, per mode and thread count
  bytes-per-epoch.png        average bytes persisted per epoch against the interval
  bytes-over-time-tN.png     bytes persisted at each epoch over the run (the
                             paper's Figure 8), one line per interval
  pause-cdf-tN.png           distribution of the pauses under load (Figure 9)
  plotdata/                  the data files behind the plots

Throughput is the median over the repeats; the ratio is native's median over
the mode's (above 1: slower than native).  Pause percentiles are exact, over
every epoch of every repeat that ended inside the client's measured window
(start-up epochs pause no client, and the client's prefill is not measured);
"max incl. start-up" is over all epochs.  Bytes per epoch are
over epochs under load as well: bytes written to NVM (only the 64-byte lines
that changed), bytes dirty (whole pages the tracker reported), and what the
line diff saved.
"""

import csv
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

# pmtkit sits in tools/; no __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from pmtkit.epoch_log import read_epoch_log  # noqa: E402
from pmtkit.percentile import percentile  # noqa: E402


def read_rows(out):
    with open(out / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def num(v, default=None):
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def fmt_bytes(b):
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= size:
            return f"{b / size:.2f} {unit}"
    return f"{b:.0f} B"


class Config:
    """All repeats of one (mode, threads, interval)."""

    def __init__(self, mode, threads, interval):
        self.mode, self.threads, self.interval = mode, threads, interval
        self.ops, self.p99 = [], []
        self.epochs_all, self.epochs_load = [], []   # epoch rows, all repeats
        self.first_run_epochs = None                 # epoch rows of the first repeat

    def tag(self, rep):
        return f"{self.mode}-t{self.threads}-i{self.interval}-r{rep}"


def gather(out, rows):
    configs = {}
    for r in rows:
        key = (r["mode"], int(r["server_threads"]), int(r["interval_ms"]))
        c = configs.setdefault(key, Config(*key))
        ops = num(r["ops_per_sec"])
        if ops is None:
            continue
        c.ops.append(ops)
        if num(r["p99_us"]) is not None:
            c.p99.append(num(r["p99_us"]))
        if c.mode == "native":
            continue
        rep = r.get("repeat") or "1"
        ep = read_epoch_log(out / "epochs" / f"{c.tag(rep)}.csv")
        load_ms = num(r.get("load_start_ms"), 0.0)
        end_ms = load_ms + 1000 * num(r.get("seconds"), 0.0)
        c.epochs_all += ep
        c.epochs_load += [e for e in ep if load_ms <= e["t_ms"] <= end_ms]
        if c.first_run_epochs is None and ep:
            c.first_run_epochs = (ep, load_ms)
    return configs


def summary(configs):
    lines = []
    threads = sorted({c.threads for c in configs.values()})
    modes = [m for m in ("native", "preload", "pmthreads") if any(c.mode == m for c in configs.values())]
    native = {t: statistics.median(configs[("native", t, 0)].ops)
              for t in threads if ("native", t, 0) in configs and configs[("native", t, 0)].ops}

    lines += ["## Throughput (median of the repeats) and pauses under load", "",
              "| threads | mode | interval ms | runs | ops/s | slowdown vs native | client p99 us "
              "| epochs | pause p50 / p99 / max ms | max incl. start-up ms |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for t in threads:
        for m in modes:
            for c in sorted((c for c in configs.values() if c.mode == m and c.threads == t),
                            key=lambda c: c.interval):
                if not c.ops:
                    continue
                ops = statistics.median(c.ops)
                ratio = f"{native[t] / ops:.2f}x" if t in native and ops > 0 else "-"
                p99 = f"{statistics.median(c.p99):.0f}" if c.p99 else "-"
                iv = "-" if m == "native" else str(c.interval)
                if c.epochs_load:
                    pauses = [e["pause_us"] / 1000 for e in c.epochs_load]
                    pause = (f"{percentile(pauses, 50):.2f} / {percentile(pauses, 99):.2f} / "
                             f"{max(pauses):.2f}")
                    pmax_all = f"{max(e['pause_us'] for e in c.epochs_all) / 1000:.2f}"
                    n = str(len(c.epochs_load))
                else:
                    pause, pmax_all, n = "-", "-", "-"
                lines.append(f"| {t} | {m} | {iv} | {len(c.ops)} | {ops:,.0f} | {ratio} | {p99} "
                             f"| {n} | {pause} | {pmax_all} |")
    lines.append("")

    lines += ["## Bytes persisted per interval under load (the paper's Table 2)", "",
              "| threads | mode | interval ms | bytes written / epoch | dirty pages / epoch "
              "| saved by the line diff | NVM write rate |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for t in threads:
        for m in modes:
            if m == "native":
                continue
            for c in sorted((c for c in configs.values() if c.mode == m and c.threads == t),
                            key=lambda c: c.interval):
                ep = c.epochs_load
                if not ep:
                    continue
                written = sum(e["bytes_written"] for e in ep)
                dirty = sum(e["bytes_dirty"] for e in ep)
                span_s = sum(c.interval for _ in ep) / 1000  # epochs come every interval
                saved = f"{100 * (1 - written / dirty):.0f} %" if dirty else "-"
                lines.append(f"| {t} | {m} | {c.interval} | {fmt_bytes(written / len(ep))} "
                             f"| {fmt_bytes(dirty / len(ep))} | {saved} "
                             f"| {fmt_bytes(written / span_s)}/s |")
    lines.append("")
    return lines


def have_gnuplot():
    return shutil.which("gnuplot") is not None


def gnuplot(out, script):
    term = "pngcairo size 900,600 noenhanced"
    probe = subprocess.run(["gnuplot", "-e", "set terminal pngcairo"], capture_output=True)
    if probe.returncode != 0:
        term = "png size 900,600 noenhanced"
    r = subprocess.run(["gnuplot"], input=f"set terminal {term}\n{script}", text=True,
                       capture_output=True, cwd=out)
    if r.returncode != 0:
        print(f"report.py: gnuplot failed: {r.stderr.strip()}", file=sys.stderr)


def plots(out, configs):
    data = out / "plotdata"
    data.mkdir(exist_ok=True)
    threads = sorted({c.threads for c in configs.values()})
    made = []

    # ops/s and bytes per epoch against the interval
    for name, title, ylabel, value in (
            ("throughput.png", "memcached throughput (median of the repeats)", "ops/s",
             lambda c: statistics.median(c.ops) if c.ops else None),
            ("bytes-per-epoch.png", "bytes persisted per epoch under load", "bytes",
             lambda c: (sum(e["bytes_written"] for e in c.epochs_load) / len(c.epochs_load))
             if c.epochs_load else None)):
        series = []
        for ti, t in enumerate(threads, 1):
            nat = configs.get(("native", t, 0))
            if name == "throughput.png" and nat is not None and nat.ops:
                series.append(f"{statistics.median(nat.ops)} title 'native t={t}' dt 2 lc {ti}")
            for m, dt in (("preload", 3), ("pmthreads", 1)):
                pts = [(c.interval, value(c)) for c in configs.values()
                       if c.mode == m and c.threads == t]
                pts = sorted(p for p in pts if p[1] is not None)
                if not pts:
                    continue
                f = data / f"{name[:-4]}-{m}-t{t}.dat"
                f.write_text("".join(f"{x} {y}\n" for x, y in pts))
                series.append(f"'{f}' using 1:2 with linespoints title '{m} t={t}' lc {ti} dt {dt}")
        if series:
            gnuplot(out, f"set output '{name}'\nset title '{title}'\n"
                    f"set xlabel 'PMTHREADS_INTERVAL_MS'\nset ylabel '{ylabel}'\nset logscale x\n"
                    f"set xrange [8:600]\nset key outside right\nset grid\n"
                    f"plot {', '.join(series)}\n")
            made.append(name)

    # Figure 8 and 9 per thread count: the persistent build when measured,
    # else the preload one.
    for t in threads:
        mode = "pmthreads" if any(c.mode == "pmthreads" and c.threads == t and c.epochs_all
                                  for c in configs.values()) else "preload"
        mine = sorted((c for c in configs.values()
                       if c.mode == mode and c.threads == t and c.epochs_all),
                      key=lambda c: c.interval)
        if not mine:
            continue
        over_time, cdf = [], []
        for ci, c in enumerate(mine, 1):
            ep, load_ms = c.first_run_epochs
            f = data / f"bytes-over-time-{mode}-t{t}-i{c.interval}.dat"
            f.write_text("".join(f"{(e['t_ms'] - load_ms) / 1000:.3f} {e['bytes_written']:.0f}\n"
                                 for e in ep))
            over_time.append(f"'{f}' using 1:2 with steps title '{c.interval} ms' lc {ci}")
            pauses = sorted(e["pause_us"] / 1000 for e in c.epochs_load)
            if pauses:
                f = data / f"pause-cdf-{mode}-t{t}-i{c.interval}.dat"
                f.write_text("".join(f"{p:.3f} {(k + 1) / len(pauses):.5f}\n"
                                     for k, p in enumerate(pauses)))
                cdf.append(f"'{f}' using 1:2 with steps title '{c.interval} ms' lc {ci}")
        gnuplot(out, f"set output 'bytes-over-time-t{t}.png'\n"
                f"set title 'bytes persisted per epoch over time ({mode}, {t} threads, first repeat)'\n"
                "set xlabel 'seconds since the measured load started (before 0: start-up, prefill)'\n"
                "set ylabel 'bytes written to NVM'\nset logscale y\nset key outside right\n"
                f"set grid\nplot {', '.join(over_time)}\n")
        made.append(f"bytes-over-time-t{t}.png")
        if cdf:
            gnuplot(out, f"set output 'pause-cdf-t{t}.png'\n"
                    f"set title 'quiescence pause distribution under load ({mode}, {t} threads)'\n"
                    "set xlabel 'pause (ms)'\nset ylabel 'fraction of epochs'\nset logscale x\n"
                    f"set yrange [0:1.02]\nset key outside right\nset grid\nplot {', '.join(cdf)}\n")
            made.append(f"pause-cdf-t{t}.png")
    return made


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: report.py OUT_DIR")
    out = Path(sys.argv[1]).resolve()
    if not (out / "results.csv").exists():
        sys.exit(f"report.py: {out / 'results.csv'} not found; run bench.sh first")
    configs = gather(out, read_rows(out))
    if not configs:
        sys.exit("report.py: results.csv has no runs")
    text = "\n".join(["# memcached: native vs pmthreads", ""] + summary(configs))
    (out / "summary.md").write_text(text + "\n")
    print(text)
    if have_gnuplot():
        made = plots(out, configs)
        print(f"report.py: plots in {out}: {' '.join(made)}", file=sys.stderr)
    else:
        print("report.py: gnuplot not found, no plots", file=sys.stderr)


if __name__ == "__main__":
    main()
