# SPDX-License-Identifier: BSD-3-Clause
"""report.py -- the paper-style tables on stdout and the CSV files."""

import csv
from dataclasses import asdict
from pathlib import Path

import workloads
from runner import INTERCEPT, MPROTECT, NATIVE, PMEMOBJ, UFFD

PM_CONFIGS = (UFFD.name, MPROTECT.name)
STRESS_CONFIGS = (NATIVE.name, UFFD.name, MPROTECT.name, INTERCEPT.name, PMEMOBJ.name)


def write_csv(path: Path, rows: list):
    """Dataclass rows or dicts, one header from the first row."""
    if not rows:
        return
    dicts = [r if isinstance(r, dict) else asdict(r) for r in rows]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dicts[0].keys()))
        w.writeheader()
        w.writerows(dicts)


def fmt(v, spec: str, missing: str = "-") -> str:
    return missing if v is None else format(v, spec)


def spread(v) -> str:
    return "-" if v is None else f"{v[0]:.2f}-{v[1]:.2f}"


def slowdown_table(summary: list) -> list:
    """Lines of the slowdown table.  x = median over rounds of the paired
    ratio (pmthreads compute time / native compute time of the same round);
    range = the smallest and largest of those ratios; period = the achieved
    time between epochs (median of the runs' p50); pause p99 = the worst
    run's; fl/ep = device flushes per published epoch and B/line = bytes the
    backend sent to storage per line written (medians; 0 on emulated pmem)."""
    configs = [c for c in PM_CONFIGS if any(c in s.verdict for s in summary)]
    lines = ["", "Slowdown under pmthreads (LD_PRELOAD, PMTHREADS_HEAP=malloc) vs native: "
             "computation time only, paired rounds",
             f"{'benchmark':<18} {'suite':<8} {'native s':>9} "
             + " ".join(f"{c:>20} {'x':>6} {'range':>9} {'n':>2} {'period ms':>9} {'p99 ms':>7} "
                        f"{'fl/ep':>5} {'B/line':>6} {'check':>8}" for c in configs)]
    for suite in workloads.SUITES:
        mine = [s for s in summary if s.suite == suite]
        for s in mine:
            cells = " ".join(f"{fmt(s.seconds.get(c), '.3f'):>20} {fmt(s.slowdown.get(c), '.2f'):>6} "
                             f"{spread(s.spread.get(c)):>9} {s.pairs.get(c, 0):>2} "
                             f"{fmt(s.period_ms.get(c), '.0f'):>9} {fmt(s.pause_p99_ms.get(c), '.2f'):>7} "
                             f"{fmt(s.flushes.get(c), '.2f'):>5} {fmt(s.bytes_per_line.get(c), '.0f'):>6} "
                             f"{s.verdict.get(c, '-'):>8}" for c in configs)
            lines.append(f"{s.benchmark:<18} {s.suite:<8} {fmt(s.native_s, '.3f'):>9} {cells}")
        if mine:
            means = " ".join(f"{'':>20} {fmt(workloads.geomean([s.slowdown.get(c) for s in mine]), '.2f'):>6} "
                             f"{'':>9} {'':>2} {'':>9} {'':>7} {'':>5} {'':>6} {'':>8}" for c in configs)
            lines.append(f"{'geomean':<18} {suite:<8} {'':>9} {means}")
    return lines


def slowdown_rows(summary: list) -> list:
    rows = []
    for s in summary:
        row = {"suite": s.suite, "benchmark": s.benchmark, "native_s": s.native_s}
        for c in PM_CONFIGS:
            row[f"{c}_s"] = s.seconds.get(c)
            row[f"{c}_slowdown"] = s.slowdown.get(c)
            lo_hi = s.spread.get(c)
            row[f"{c}_slowdown_min"] = lo_hi[0] if lo_hi else None
            row[f"{c}_slowdown_max"] = lo_hi[1] if lo_hi else None
            row[f"{c}_pairs"] = s.pairs.get(c)
            row[f"{c}_period_ms"] = s.period_ms.get(c)
            row[f"{c}_pause_p99_ms"] = s.pause_p99_ms.get(c)
            row[f"{c}_flushes_per_epoch"] = s.flushes.get(c)
            row[f"{c}_device_bytes_per_line"] = s.bytes_per_line.get(c)
            row[f"{c}_check"] = s.verdict.get(c, "-")
        rows.append(row)
    for suite in workloads.SUITES:
        mine = [s for s in summary if s.suite == suite]
        if mine:
            row = {"suite": suite, "benchmark": "geomean", "native_s": None}
            for c in PM_CONFIGS:
                row[f"{c}_s"] = None
                row[f"{c}_slowdown"] = workloads.geomean([s.slowdown.get(c) for s in mine])
                for k in ("slowdown_min", "slowdown_max", "pairs", "period_ms", "pause_p99_ms",
                          "flushes_per_epoch", "device_bytes_per_line"):
                    row[f"{c}_{k}"] = None
                row[f"{c}_check"] = ""
            rows.append(row)
    return rows


def stress_table(cells: list) -> list:
    lines = []
    configs = [n for n in STRESS_CONFIGS if any(n in c.verdict for c in cells)]
    for structure, title in (("bptree", "B+tree (order 32, lock-free descent, leaf locks)"),
                             ("lclist", "sorted list (hand-over-hand)")):
        mine = [c for c in cells if c.structure == structure]
        if not mine:
            continue
        lines += ["", f"{title}: Mops/s (median) and x native (median of paired ratios, "
                      "[min-max], n pairs); ! = checksum differs from native",
                  f"{'threads':>7} {'put%':>5} " + " ".join(f"{c:>30}" for c in configs)]
        for c in mine:
            vals = []
            for name in configs:
                v = c.ops_per_s.get(name)
                flag = {"ok": "", "MISMATCH": "!", "FAIL": " FAIL"}.get(c.verdict.get(name, ""), "")
                text = fmt(None if v is None else v / 1e6, '.3f') + flag
                if name != NATIVE.name and name in c.ratio:
                    text += f" {c.ratio[name]:.2f}x [{spread(c.spread[name])}] {c.pairs[name]}"
                vals.append(f"{text:>30}")
            lines.append(f"{c.threads:>7} {c.put:>5} " + " ".join(vals))
    return lines


def stress_rows(cells: list) -> list:
    rows = []
    for c in cells:
        row = {"structure": c.structure, "threads": c.threads, "put_percent": c.put}
        for name in STRESS_CONFIGS:
            row[f"{name}_ops_s"] = c.ops_per_s.get(name)
            row[f"{name}_x_native"] = c.ratio.get(name)
            lo_hi = c.spread.get(name)
            row[f"{name}_x_min"] = lo_hi[0] if lo_hi else None
            row[f"{name}_x_max"] = lo_hi[1] if lo_hi else None
            row[f"{name}_check"] = c.verdict.get(name, "")
        rows.append(row)
    return rows


def recovery_table(rows: list) -> list:
    if not rows:
        return []
    lines = ["", "Crash recovery: insert-only B+tree, kill -9, restart",
             f"{'backend':<10} {'asked ms':>8} {'period ms':>9} {'last ms':>7} {'inserted':>10} "
             f"{'recovered':>10} {'lost %':>7} {'lost/per':>8} {'recovery ms':>11} {'runtime ms':>10} "
             f"{'pool MiB':>9} {'used MiB':>9} check",
             "(asked: PMTHREADS_INTERVAL_MS; period: the achieved time between epochs, median over the",
             " killed run (its epoch log), last: over its last 5 epochs; lost/per: the inserts lost, in",
             " achieved periods' worth of inserts at the run's mean rate)"]
    for r in rows:
        rt = r.get("rt_recovery_ms") or "-"
        period, last, lost_per = r.get("period_ms") or "-", r.get("period_last_ms") or "-", "-"
        try:
            rate_ms = float(r["inserted"]) / float(r["seconds"]) / 1000
            if last != "-" and rate_ms * float(last) > 0:
                lost_per = f"{float(r['lost']) / (rate_ms * float(last)):.2f}"
        except (KeyError, ValueError, ZeroDivisionError):
            pass
        lines.append(f"{r['backend']:<10} {r['interval_ms']:>8} {period:>9} {last:>7} {r['inserted']:>10} "
                     f"{r['recovered']:>10} {float(r['lost_pct']):>7.2f} {lost_per:>8} "
                     f"{r['recovery_ms']:>11} {rt:>10} "
                     f"{int(float(r['pool_bytes'])) / 2**20:>9.1f} {int(float(r['pool_used_bytes'])) / 2**20:>9.1f} "
                     f"{r['check']}")
    return lines
