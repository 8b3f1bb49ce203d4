# SPDX-License-Identifier: BSD-3-Clause
"""plots.py -- PNG figures through gnuplot (skipped with a note when gnuplot
is not installed): slowdown per benchmark, stress throughput per thread count,
recovery loss and time per interval."""

import shutil
import subprocess
from pathlib import Path

from context import note
from report import PM_CONFIGS, STRESS_CONFIGS

MISSING = "?"


def value(v, scale: float = 1.0) -> str:
    return MISSING if v is None else f"{v * scale:.6g}"


def gnuplot(script: str, workdir: Path, name: str):
    exe = shutil.which("gnuplot")
    if exe is None:
        note(f"gnuplot not found: {name} not drawn")
        return
    (workdir / f"{name}.gp").write_text(script)
    proc = subprocess.run([exe, f"{name}.gp"], cwd=workdir, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        note(f"gnuplot failed on {name}: {proc.stderr.strip()[-300:]}")


HEADER = f"""set terminal pngcairo size 1200,500 font ",10" noenhanced
set datafile missing "{MISSING}"
set grid ytics
set key top left
"""


def slowdown_plot(summary: list, out: Path):
    if not summary:
        return
    lines = ["# benchmark " + " ".join(PM_CONFIGS)]
    for s in summary:
        lines.append(f"{s.benchmark} " + " ".join(value(s.slowdown.get(c)) for c in PM_CONFIGS))
    (out / "slowdown.dat").write_text("\n".join(lines) + "\n")
    gnuplot(HEADER + """set output "slowdown.png"
set title "Slowdown under pmthreads vs native (lower is better)"
set ylabel "time / native time"
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set xtics rotate by -40
set yrange [0:*]
plot "slowdown.dat" using 2:xtic(1) title "uffd", "" using 3 title "mprotect", 1 with lines lt -1 notitle
""", out, "slowdown")


def stress_plot(cells: list, out: Path):
    for structure in ("bptree", "lclist"):
        mine = [c for c in cells if c.structure == structure]
        if not mine:
            continue
        puts = sorted({c.put for c in mine})
        lines = ["# put threads " + " ".join(STRESS_CONFIGS)]
        for put in puts:
            for c in sorted((c for c in mine if c.put == put), key=lambda c: c.threads):
                lines.append(f"{put} {c.threads} "
                             + " ".join(value(c.ops_per_s.get(n), 1e-6) for n in STRESS_CONFIGS))
            lines += ["", ""]  # one gnuplot data block per PUT ratio
        (out / f"stress_{structure}.dat").write_text("\n".join(lines) + "\n")
        plots = []
        for i, put in enumerate(puts):
            series = ", ".join(
                f'"stress_{structure}.dat" index {i} using 2:{3 + j} with linespoints title "{n}"'
                for j, n in enumerate(STRESS_CONFIGS))
            plots.append(f'set title "{structure}, {put}% PUT"\nplot {series}')
        gnuplot(HEADER + f"""set output "stress_{structure}.png"
set multiplot layout 1,{len(puts)}
set xlabel "threads"
set ylabel "Mops/s"
set logscale y
set xtics (1, 2, 4)
""" + "\n".join(plots) + "\nunset multiplot\n", out, f"stress_{structure}")


def recovery_plot(rows: list, out: Path):
    mine = [r for r in rows if r["backend"] == "pmthreads"]
    if not mine:
        return
    lines = ["# interval_ms lost_pct recovery_ms"]
    for r in mine:
        lines.append(f"{r['interval_ms']} {r['lost_pct']} {r['recovery_ms'] or MISSING}")
    (out / "recovery.dat").write_text("\n".join(lines) + "\n")
    gnuplot(HEADER + """set output "recovery.png"
set title "pmthreads crash recovery (insert-only B+tree, kill -9)"
set xlabel "PMTHREADS_INTERVAL_MS"
set logscale x
set ylabel "acknowledged inserts lost (%)"
set y2label "recovery time (ms)"
set ytics nomirror
set y2tics
plot "recovery.dat" using 1:2 with linespoints title "lost %", "" using 1:3 axes x1y2 with linespoints title "recovery ms"
""", out, "recovery")
