#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""run.py -- the pmthreads evaluation harness (issue 5), one command:

    parsec-ports/harness/run.py [BUILD_DIR] [--repeats N] [--quick] [--out DIR]
                                [--only workloads,stress,recovery] [--threads T]
                                [--interval MS] [--workloads a,b] [--cells s:t:p,...]
                                [--trackers uffd,mprotect]

* workloads: every PARSEC/Phoenix executable that is built, natively and
  under LD_PRELOAD=libpmthreads.so PMTHREADS_HEAP=malloc with
  PMTHREADS_TRACKER=uffd and =mprotect; the checksum under pmthreads must
  equal the native one; slowdown per benchmark (of the computation each
  workload times itself, not of process start-up or input generation),
  geometric mean per suite, achieved epoch period and pause p99.
* stress: B+tree and sorted-list throughput for 1, 2, 4 threads and 10/50/90 %
  PUTs: native, pmthreads (both trackers), interception only, libpmemobj.
* recovery: kill -9 during inserts, restart, lost inserts and recovery time
  for PMTHREADS_INTERVAL_MS = 10, 100, 500.

Every mode pairs: a round runs native and every other configuration back to
back, in an order that rotates from round to round, and each ratio is the
median over rounds of the ratio within a round (with its range).  --quick is
fewer rounds (3) and fewer configurations (uffd only; stress: 2 threads, 50 %
PUT), never smaller inputs: a short computation would measure noise.

Every run gets a fresh pool in a temporary directory on /dev/shm
(PMEM_IS_PMEM_FORCE=1), removed afterwards.  Results: tables on stdout, CSV
and PNG (gnuplot) files in --out.  Exit status 1 when any run failed or any
checksum under pmthreads differed from native.
"""

import argparse
import signal
import sys
from pathlib import Path

# The harness modules sit next to this script, the shared pmtkit in tools/;
# no __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent.parent / "tools"))

import plots  # noqa: E402
import recovery  # noqa: E402
import report  # noqa: E402
import stress  # noqa: E402
import workloads  # noqa: E402
from context import Context, note  # noqa: E402
from runner import PoolRoot  # noqa: E402

SECTIONS = ("workloads", "stress", "recovery")


def default_build() -> Path:
    """build/ at the top of the source tree this script is in."""
    return Path(__file__).resolve().parent.parent.parent / "build"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build", nargs="?", type=Path, default=None,
                   help="meson build directory (default: build/ at the top of this source tree)")
    p.add_argument("--repeats", type=int, default=5,
                   help="paired rounds per benchmark (default 5; --quick: 3)")
    p.add_argument("--quick", action="store_true",
                   help="3 rounds, the uffd tracker only, one stress cell, short recovery runs")
    p.add_argument("--trackers", default=None,
                   help="pmthreads write trackers to run, comma-separated (default uffd,mprotect; "
                        "--quick: uffd)")
    p.add_argument("--interval", type=int, default=100, help="PMTHREADS_INTERVAL_MS (default 100)")
    p.add_argument("--workloads", default="",
                   help="comma-separated subset of the workloads (default: all built)")
    p.add_argument("--cells", default="",
                   help="stress cells STRUCTURE:THREADS:PUT, comma-separated "
                        "(e.g. lclist:2:50,bptree:2:50; default: the full grid)")
    p.add_argument("--out", type=Path, default=Path("harness-results"),
                   help="directory for CSV and PNG files (default ./harness-results)")
    p.add_argument("--only", default=",".join(SECTIONS),
                   help="comma-separated subset of: " + ", ".join(SECTIONS))
    p.add_argument("--threads", type=int, default=2, help="threads of the workloads (default 2)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per run (default 300)")
    p.add_argument("--pool-size", default="2G", help="PMTHREADS_POOL_SIZE (default 2G)")
    p.add_argument("--medium", choices=("pmem", "disk"), default="pmem",
                   help="pmem: pools on /dev/shm with PMEM_IS_PMEM_FORCE=1 (default); disk: pools in "
                        "--disk-dir, an ordinary file (the log backend)")
    p.add_argument("--disk-dir", default="/var/tmp", help="where --medium disk puts the pools")
    p.add_argument("--stress-preload", action="store_true",
                   help="pmthreads stress columns: native binary under LD_PRELOAD "
                        "instead of the ported build")
    args = p.parse_args()
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    for s in sections:
        if s not in SECTIONS:
            p.error(f"unknown section {s}")
    args.sections = sections
    if args.quick and "--repeats" not in sys.argv:
        args.repeats = 3
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    args.cell_list = []
    for cell in filter(None, (c.strip() for c in args.cells.split(","))):
        parts = cell.split(":")
        if len(parts) != 3 or parts[0] not in ("bptree", "lclist") or not all(
                x.isdigit() for x in parts[1:]):
            p.error(f"--cells: {cell!r} is not STRUCTURE:THREADS:PUT (bptree or lclist)")
        args.cell_list.append((parts[0], int(parts[1]), int(parts[2])))
    args.tracker_list = tuple(t.strip() for t in (args.trackers or (
        "uffd" if args.quick else "uffd,mprotect")).split(",") if t.strip())
    for t in args.tracker_list:
        if t not in ("uffd", "mprotect"):
            p.error(f"--trackers: unknown tracker {t!r} (uffd, mprotect)")
    args.workload_list = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
    return args


def tracker_mismatches(runs: list) -> set:
    """(requested, reported) tracker pairs that differ, from the stats JSON."""
    found = set()
    for r in runs:
        if r.config.startswith("pmthreads-") and r.tracker:
            requested = r.config.split("-", 1)[1]
            if r.tracker != requested:
                found.add((requested, r.tracker))
    return found


def main() -> int:
    args = parse_args()
    build = (args.build or default_build()).resolve()
    if not build.is_dir():
        note(f"no build directory {build}")
        return 2
    library = build / "preload" / "libpmthreads.so"
    if not library.exists():
        note(f"{library} not found: pmthreads configurations are skipped")
        library = None
    args.out.mkdir(parents=True, exist_ok=True)
    # A ^C or kill still removes the pools (via the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    problems = []
    tracker_notes = set()
    with PoolRoot(args.medium, args.disk_dir) as pools:
        ctx = Context(build, library, pools, args.repeats, args.quick, args.threads,
                      args.timeout, args.pool_size, args.out.resolve(),
                      interval_ms=args.interval, only_workloads=args.workload_list,
                      cells=tuple(args.cell_list), trackers=args.tracker_list)
        lines = []
        if "workloads" in args.sections:
            runs = workloads.run_workloads(ctx)
            tracker_notes |= tracker_mismatches(runs)
            report.write_csv(args.out / "workloads_runs.csv", runs)
            summary = workloads.summarise(runs)
            report.write_csv(args.out / "slowdown.csv", report.slowdown_rows(summary))
            plots.slowdown_plot(summary, args.out)
            lines += report.slowdown_table(summary)
            problems += [f"{r.benchmark} {r.config} rep {r.repeat}: {r.status}" for r in runs
                         if r.status != "ok"]
            problems += [f"{s.benchmark} {c}: checksum differs from native" for s in summary
                         for c, v in s.verdict.items() if v == "MISMATCH"]
        if "stress" in args.sections:
            runs = stress.run_stress(ctx, args.stress_preload)
            tracker_notes |= tracker_mismatches(runs)
            report.write_csv(args.out / "stress_runs.csv", runs)
            cells = stress.summarise(runs)
            report.write_csv(args.out / "stress.csv", report.stress_rows(cells))
            plots.stress_plot(cells, args.out)
            lines += report.stress_table(cells)
            problems += [f"{r.structure} t={r.threads} put={r.put} {r.config}: {r.status}"
                         for r in runs if r.status != "ok"]
            problems += [f"{c.structure} t={c.threads} put={c.put} {n}: checksum differs"
                         for c in cells for n, v in c.verdict.items() if v == "MISMATCH"]
        if "recovery" in args.sections:
            rows = recovery.run_recovery(ctx)
            plots.recovery_plot(rows, args.out)
            lines += report.recovery_table(rows)
            problems += [f"recovery {r['backend']} {r['interval_ms']}: check {r['check']}"
                         for r in rows if r["check"] != "ok"]

    print("\n".join(lines))
    # The tracker the runtime actually used, when it is not the one asked for.
    for requested, reported in sorted(tracker_notes):
        print(f"note: runs with PMTHREADS_TRACKER={requested} report tracker '{reported}' "
              "in PMTHREADS_STATS")
    print(f"\nresults in {args.out.resolve()}")
    if problems:
        print(f"\n{len(problems)} problem(s):")
        for p in problems:
            print("  " + p)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
