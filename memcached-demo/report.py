#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""report.py -- the tables and plots of a bench.sh run.

usage: report.py OUT_DIR

A directory of `bench.sh --cost` (it holds cost.csv) gets the cost table:
cost.md, one markdown table per load (config, pool, tracker, throughput,
ratio vs native, p50, p99: medians over the rounds), the issue's targets
checked, and the spread behind the medians.  Otherwise (the interval sweep) it reads OUT_DIR/results.csv (one row per run) and OUT_DIR/epochs/<tag>.csv (the
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


# ---- the cost table (bench.sh --cost) ----

COST_KINDS = ("native", "pmthreads", "commit", "redis-always", "redis-everysec")
TARGET_RATIO, TARGET_P99_MS, TARGET_CONNS = 0.8, 2.0, 16   # issue 24, item 4
# a machine is "loaded" when the load average before the run, or the CPU that
# processes not ours used during the runs (kernel threads working for the runs,
# the file system's journal for the fsync rows, count there), exceeds these
LOADED_BEFORE, LOADED_OTHERS_MEDIAN_PCT, LOADED_OTHERS_MAX_PCT = 1.5, 10.0, 25.0


def read_info(out):
    """cmd.txt's "key: value" lines."""
    info = {}
    path = out / "cmd.txt"
    if path.exists():
        for line in path.read_text().splitlines():
            k, _, v = line.partition(": ")
            info[k] = v
    return info


def cost_label(kind, pool, tracker, info):
    """(config, pool, tracker) as the table shows them."""
    redis = "Redis " + info.get("redis", "").rpartition("v=")[2].rstrip(")")
    config = {"native": "memcached (Debian, native)",
              "pmthreads": "memcached-pmthreads",
              "commit": "memcached-pmthreads + output commit",
              "redis-always": f"{redis}, AOF, appendfsync always",
              "redis-everysec": f"{redis}, AOF, appendfsync everysec"}[kind]
    file_dir = info.get("file_dir", "").replace(" (", ", ").rstrip(")")
    where = {"pmem": f"emulated pmem ({info.get('pmem_dir', '').replace(' (', ', ').rstrip(')')})",
             "file": f"file, log ({file_dir})",
             "msync": f"file, msync ({file_dir})",
             "aof": f"AOF file ({file_dir})",
             "-": "-"}[pool]
    return config, where, tracker


def cost_order(key):
    kind, pool, tracker = key
    return ({"-": 0, "pmem": 1, "file": 2, "msync": 3, "aof": 4}[pool], tracker,
            COST_KINDS.index(kind))


def ms(us):
    return f"{us / 1000:.3f}"


def cost_report(out):
    info = read_info(out)
    with open(out / "cost.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("report.py: cost.csv has no runs")
    loads = []
    for r in rows:
        ld = (int(r["conns"]), int(r["set_pct"]))
        if ld not in loads:
            loads.append(ld)
    loads.sort(key=lambda ld: (-ld[0], -ld[1]))
    runs = {}   # (conns, set_pct) -> (kind, pool, tracker) -> [row]
    for r in rows:
        if num(r["ops_per_sec"]) is None:
            continue
        runs.setdefault((int(r["conns"]), int(r["set_pct"])), {}).setdefault(
            (r["kind"], r["pool"], r["tracker"]), []).append(r)

    def med(rs, col):
        v = [num(r.get(col)) for r in rs if num(r.get(col)) is not None]
        return statistics.median(v) if v else None

    others = [num(r["other_load_pct"]) for r in rows if num(r["other_load_pct"]) is not None]
    before = num(info.get("load_before", "").split(" ")[0])
    loaded = ((before is not None and before >= LOADED_BEFORE) or
              (others and (statistics.median(others) > LOADED_OTHERS_MEDIAN_PCT or
                           max(others) > LOADED_OTHERS_MAX_PCT)))
    rounds = max(int(r["round"]) for r in rows)

    lines = ["# The cost of output commit, side by side (memcached-demo/bench.sh --cost)", ""]
    if loaded:
        lines += ["**MEASURED ON A LOADED MACHINE** (other processes were running: see the load "
                  "below) -- these figures show that the bench works, they are not results.", ""]
    lines += [f"Command: `{info.get('explicit', info.get('command', '?'))}`", "",
              f"- {info.get('date', '?')}; {info.get('machine', '?')}; client and servers share the CPUs",
              f"- load average before the run: {info.get('load_before', '?')}; CPU used by "
              f"processes not the bench's during the runs (% of all CPUs, per run; kernel threads "
              f"such as the file system's journal included): median "
              f"{statistics.median(others) if others else float('nan'):.1f} %, max "
              f"{max(others) if others else float('nan'):.1f} %",
              f"- {info.get('memcached', '?')}; memcached-pmthreads "
              f"{info.get('memcached_pmthreads', 'not run')}; Redis {info.get('redis', 'not run')}",
              f"- {rounds} interleaved round{'s' if rounds != 1 else ''} (order of the configurations "
              "rotated each round); "
              "throughput, p50 and p99 are medians over the rounds, per-request latency from send "
              "to reply; ratio = median ops/s / native memcached's median ops/s of this run", ""]
    targets = []
    for ld in loads:
        conns, setp = ld
        cfg = runs.get(ld, {})
        nat = med(cfg.get(("native", "-", "-"), []), "ops_per_sec")
        lines += [f"### {conns} connection{'s' if conns != 1 else ''}, {setp} % sets / "
                  f"{100 - setp} % gets", "",
                  "| config | pool | tracker | throughput (ops/s) | ratio vs native | p50 (ms) | p99 (ms) |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for key in sorted(cfg, key=cost_order):
            rs = cfg[key]
            ops = med(rs, "ops_per_sec")
            ratio = f"{ops / nat:.2f}x" if nat else "-"
            config, where, tracker = cost_label(*key, info)
            p50, p99 = med(rs, "p50_us"), med(rs, "p99_us")
            if key[0] == "commit" and any(r["output_commit"] != "1" or not num(r["writes_held"])
                                          for r in rs):
                config += " (**output commit was not in effect in some runs**)"
            lines.append(f"| {config} | {where} | {tracker} | {ops:,.0f} | {ratio} | {ms(p50)} "
                         f"| {ms(p99)} |")
            if key[0] == "commit" and key[1] == "pmem" and conns == TARGET_CONNS:
                ok_p = p99 / 1000 <= TARGET_P99_MS
                thr = (f"{ops / nat:.2f}x native ({'met' if ops / nat >= TARGET_RATIO else 'NOT met'})"
                       if nat else "no native run to compare with")
                targets.append(f"- {setp} % sets, {key[2]}: throughput {thr}, p99 {ms(p99)} ms "
                               f"({'met' if ok_p else 'NOT met'})")
        lines.append("")
    lines += [f"### Targets (issue 24): output commit on emulated pmem at {TARGET_CONNS} connections, "
              f"throughput >= {TARGET_RATIO}x native, p99 <= {TARGET_P99_MS:g} ms"
              + (" -- loaded machine, not a verdict" if loaded else ""), ""]
    lines += targets or [f"- not measured (no {TARGET_CONNS}-connection load with the commit rows on pmem)"]
    lines.append("")

    # the spread behind the medians, and what output commit did
    lines += ["### Details", "",
              "Runs, the spread of throughput over the rounds, the spread of the per-round ratio "
              "against native (same load, same round), the worst single reply; for "
              "memcached-pmthreads the runtime's statistics over the server's life (prefill "
              "included, medians over the rounds): epochs (with output commit: the share started "
              "on demand), output hold time p50 / p99, pause p99, an epoch's mean collect + write-back "
              "(dirty pages gathered, written and made durable).", "",
              "| load | config | pool | tracker | runs | ops/s min-max | paired ratio min-max "
              "| max latency (ms) | epochs | hold p50 / p99 (ms) | pause p99 (ms) | write-back mean (ms) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for ld in loads:
        cfg = runs.get(ld, {})
        native_by_round = {r["round"]: num(r["ops_per_sec"]) for r in cfg.get(("native", "-", "-"), [])}
        for key in sorted(cfg, key=cost_order):
            rs = cfg[key]
            opsv = [num(r["ops_per_sec"]) for r in rs]
            paired = [num(r["ops_per_sec"]) / native_by_round[r["round"]] for r in rs
                      if native_by_round.get(r["round"])]
            pr = f"{min(paired):.2f}-{max(paired):.2f}x" if paired else "-"
            config, where, tracker = cost_label(*key, info)
            ep, dem = med(rs, "epochs"), med(rs, "epochs_demanded")
            h50, h99, p99 = med(rs, "hold_p50_ns"), med(rs, "hold_p99_ns"), med(rs, "pause_p99_ns")
            wb = med(rs, "writeback_mean_ns")
            commit = key[0] == "commit"
            if ep is None:
                epochs = "-"
            elif commit and dem is not None:
                epochs = f"{ep:,.0f}, {100 * dem / ep:.0f} % on demand"
            else:
                epochs = f"{ep:,.0f}"
            hold = f"{h50 / 1e6:.3f} / {h99 / 1e6:.3f}" if commit and h50 is not None and h99 is not None else "-"
            pause = f"{p99 / 1e6:.3f}" if p99 is not None else "-"
            wbs = f"{wb / 1e6:.3f}" if wb is not None else "-"
            lines.append(f"| {ld[0]} conn{'s' if ld[0] != 1 else ''}, {ld[1]} % sets | {config} | {where} | {tracker} | {len(rs)} "
                         f"| {min(opsv):,.0f}-{max(opsv):,.0f} | {pr} | {ms(max(num(r['max_us']) for r in rs))} "
                         f"| {epochs} | {hold} | {pause} | {wbs} |")
    lines.append("")
    text = "\n".join(lines)
    (out / "cost.md").write_text(text + "\n")
    print(text)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: report.py OUT_DIR")
    out = Path(sys.argv[1]).resolve()
    if (out / "cost.csv").exists():
        cost_report(out)
        return
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
