"""report.py -- the paper-style tables on stdout and the CSV files."""

import csv
from dataclasses import asdict
from pathlib import Path

import workloads
from runner import MPROTECT, NATIVE, PMEMOBJ, UFFD

PM_CONFIGS = (UFFD.name, MPROTECT.name)
STRESS_CONFIGS = (NATIVE.name, UFFD.name, MPROTECT.name, PMEMOBJ.name)


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


def slowdown_table(summary: list) -> list:
    """Lines of the slowdown table, and writes nothing.  Slowdown = median
    wall time under pmthreads / median native wall time."""
    lines = ["", "Slowdown under pmthreads (LD_PRELOAD, PMTHREADS_HEAP=malloc) vs native",
             f"{'benchmark':<18} {'suite':<8} {'native s':>9} "
             + " ".join(f"{c + ' s':>20} {'x':>6} {'check':>9}" for c in PM_CONFIGS)]
    for suite in workloads.SUITES:
        mine = [s for s in summary if s.suite == suite]
        for s in mine:
            cells = " ".join(f"{fmt(s.seconds.get(c), '.3f'):>20} {fmt(s.slowdown.get(c), '.2f'):>6} "
                             f"{s.verdict.get(c, '-'):>9}" for c in PM_CONFIGS)
            lines.append(f"{s.benchmark:<18} {s.suite:<8} {fmt(s.native_s, '.3f'):>9} {cells}")
        if mine:
            means = " ".join(f"{'':>20} {fmt(workloads.geomean([s.slowdown.get(c) for s in mine]), '.2f'):>6} {'':>9}"
                             for c in PM_CONFIGS)
            lines.append(f"{'geomean':<18} {suite:<8} {'':>9} {means}")
    return lines


def slowdown_rows(summary: list) -> list:
    rows = []
    for s in summary:
        row = {"suite": s.suite, "benchmark": s.benchmark, "native_s": s.native_s}
        for c in PM_CONFIGS:
            row[f"{c}_s"] = s.seconds.get(c)
            row[f"{c}_slowdown"] = s.slowdown.get(c)
            row[f"{c}_check"] = s.verdict.get(c, "-")
        rows.append(row)
    for suite in workloads.SUITES:
        mine = [s for s in summary if s.suite == suite]
        if mine:
            row = {"suite": suite, "benchmark": "geomean", "native_s": None}
            for c in PM_CONFIGS:
                row[f"{c}_s"] = None
                row[f"{c}_slowdown"] = workloads.geomean([s.slowdown.get(c) for s in mine])
                row[f"{c}_check"] = ""
            rows.append(row)
    return rows


def stress_table(cells: list) -> list:
    lines = []
    for structure, title in (("bptree", "B+tree (order 32, lock-free descent, leaf locks)"),
                             ("lclist", "sorted list (hand-over-hand)")):
        mine = [c for c in cells if c.structure == structure]
        if not mine:
            continue
        lines += ["", f"{title}: throughput in Mops/s (median); ! = checksum differs from native",
                  f"{'threads':>7} {'put%':>5} " + " ".join(f"{c:>19}" for c in STRESS_CONFIGS)]
        for c in mine:
            vals = []
            for name in STRESS_CONFIGS:
                v = c.ops_per_s.get(name)
                flag = {"ok": "", "MISMATCH": "!", "FAIL": " FAIL"}.get(c.verdict.get(name, ""), "")
                vals.append(f"{fmt(None if v is None else v / 1e6, '.3f') + flag:>19}")
            lines.append(f"{c.threads:>7} {c.put:>5} " + " ".join(vals))
    return lines


def stress_rows(cells: list) -> list:
    rows = []
    for c in cells:
        row = {"structure": c.structure, "threads": c.threads, "put_percent": c.put}
        for name in STRESS_CONFIGS:
            row[f"{name}_ops_s"] = c.ops_per_s.get(name)
            row[f"{name}_check"] = c.verdict.get(name, "")
        rows.append(row)
    return rows


def recovery_table(rows: list) -> list:
    if not rows:
        return []
    lines = ["", "Crash recovery: insert-only B+tree, kill -9, restart",
             f"{'backend':<10} {'interval':>8} {'inserted':>10} {'recovered':>10} {'lost %':>7} "
             f"{'lost/ΔT':>7} {'epoch ms':>8} {'lost/ep':>7} {'recovery ms':>11} {'runtime ms':>10} "
             f"{'pool MiB':>9} {'used MiB':>9} check",
             "(lost/ΔT: the inserts lost, in intervals' worth of inserts at the run's mean rate;",
             " epoch ms: the time between epochs the run achieved at the end; lost/ep: the loss in those)"]
    for r in rows:
        rt = r.get("rt_recovery_ms") or "-"
        lost_iv, epoch_ms, lost_ep = "-", r.get("epoch_ms") or "-", "-"
        try:
            rate_ms = float(r["inserted"]) / float(r["seconds"]) / 1000
            per_interval = rate_ms * float(r["interval_ms"])
            if per_interval > 0:
                lost_iv = f"{float(r['lost']) / per_interval:.2f}"
            if epoch_ms != "-" and rate_ms * float(epoch_ms) > 0:
                lost_ep = f"{float(r['lost']) / (rate_ms * float(epoch_ms)):.2f}"
        except (KeyError, ValueError, ZeroDivisionError):
            pass
        lines.append(f"{r['backend']:<10} {r['interval_ms']:>8} {r['inserted']:>10} {r['recovered']:>10} "
                     f"{float(r['lost_pct']):>7.2f} {lost_iv:>7} {epoch_ms:>8} {lost_ep:>7} "
                     f"{r['recovery_ms']:>11} {rt:>10} "
                     f"{int(float(r['pool_bytes'])) / 2**20:>9.1f} {int(float(r['pool_used_bytes'])) / 2**20:>9.1f} "
                     f"{r['check']}")
    return lines
