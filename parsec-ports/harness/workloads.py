# SPDX-License-Identifier: BSD-3-Clause
"""workloads.py -- the PARSEC and Phoenix workloads natively and under the
pmthreads runtime (unmodified binaries, LD_PRELOAD=libpmthreads.so with
PMTHREADS_HEAP=malloc, once per write tracker).

What is compared is the computation only: each workload reports the time of
its parallel phase (`time=` of parsec-ports/common/workload.c), which leaves
out process start-up, input generation and the final persist at exit.  Every
round runs native and each pmthreads configuration back to back, in an order
that rotates from round to round; a slowdown is the median over rounds of the
paired ratio pmthreads / native of the same round, with its spread."""

import statistics
from pathlib import Path
from dataclasses import dataclass

from context import Context, Progress, note
from runner import MPROTECT, NATIVE, UFFD, environment, paired, rotated, run, seconds_fact, stat_ms

WORKLOAD_LIST = Path(__file__).resolve().parent.parent / "workloads.list"


def read_suites(path: Path = WORKLOAD_LIST) -> dict:
    """suite -> workload names, in file order, from parsec-ports/workloads.list
    (the list meson.build builds from)."""
    suites: dict = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) < 4:
            raise SystemExit(f"{path}:{number}: needs suite, name, include directory and sources")
        suites.setdefault(words[0], []).append(words[1])
    return suites


SUITES = read_suites()


@dataclass
class WorkloadRun:
    suite: str
    benchmark: str
    config: str
    repeat: int
    compute_s: float | None    # the workload's own time of its computation
    wall_s: float              # the whole process, for the record
    status: str
    checksum: str
    epochs: str
    pages_persisted: str
    tracker: str
    period_p50_ms: float | None  # achieved time between epochs (PMTHREADS_STATS)
    pause_p99_ms: float | None
    pause_max_ms: float | None
    flushes_per_epoch: float | None  # device flushes per published epoch
    device_bytes_per_line: float | None  # bytes sent to storage per line written


def configs_for(ctx: Context) -> list:
    configs = [NATIVE]
    if ctx.library is not None:
        configs += [c for c in (UFFD, MPROTECT) if c.tracker in ctx.trackers]
    else:
        note("libpmthreads.so not found: workloads run natively only")
    return configs


def run_workloads(ctx: Context) -> list:
    configs = configs_for(ctx)
    found = []
    for suite, names in SUITES.items():
        for name in names:
            if ctx.only_workloads and name not in ctx.only_workloads:
                continue
            exe = ctx.binary(f"parsec-ports/{name}", f"parsec-ports/{name}/{name}")
            if exe is None:
                note(f"{name}: not built, skipped")
            else:
                found.append((suite, name, exe))
    progress = Progress(len(found) * len(configs) * ctx.repeats, "workloads")
    rows = []
    for suite, name, exe in found:
        # Not -q: the workload then prints `time=` of its computation.
        cmd = [str(exe), "-t", str(ctx.threads), "-s", ctx.scale]
        for repeat in range(1, ctx.repeats + 1):
            for config in rotated(configs, repeat):
                progress.start(f"{name} {config.name} rep {repeat}/{ctx.repeats}")
                pool_dir = ctx.pools.fresh()
                try:
                    env = environment(config, pool_dir, ctx.library, ctx.pool_size, preload=True,
                                      interval_ms=ctx.interval_ms, medium=ctx.pools.medium)
                    r = run(cmd, env, pool_dir, ctx.timeout)
                finally:
                    ctx.pools.drop(pool_dir)
                compute = seconds_fact(r.facts, "time")
                status = r.status
                if status == "ok" and compute is None:
                    status = "NOTIME"
                checksum = r.facts.get("checksum", "")
                progress.finish(f"{compute if compute is not None else float('nan'):.3f} s "
                                f"(process {r.seconds:.3f} s) {status}"
                                + (f" ({r.stderr_tail})" if status != "ok" and r.stderr_tail else ""))
                rows.append(WorkloadRun(suite, name, config.name, repeat, compute, r.seconds, status,
                                        checksum, str(r.stats.get("epochs_persisted", "")),
                                        str(r.stats.get("pages_persisted", "")),
                                        str(r.stats.get("tracker", "")),
                                        stat_ms(r.stats, "period_ns_p50"),
                                        stat_ms(r.stats, "pause_ns_p99"),
                                        stat_ms(r.stats, "pause_ns_max"),
                                        per(r.stats, "device_flushes", "epochs_persisted"),
                                        per(r.stats, "device_bytes", "lines_written")))
    return rows


def per(stats: dict, what: str, unit: str) -> float | None:
    """stats[what] / stats[unit], None when either is missing or unit is 0."""
    a, b = stats.get(what), stats.get(unit)
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


@dataclass
class Slowdown:
    suite: str
    benchmark: str
    native_s: float | None
    seconds: dict      # config name -> median compute seconds (ok runs only)
    slowdown: dict     # config name -> median of the paired ratios config / native
    spread: dict       # config name -> (min, max) of the paired ratios
    pairs: dict        # config name -> number of pairs
    period_ms: dict    # config name -> median of the runs' achieved period p50
    pause_p99_ms: dict # config name -> worst p99 pause over the runs
    flushes: dict      # config name -> median device flushes per published epoch
    bytes_per_line: dict  # config name -> median bytes sent to storage per line written
    verdict: dict      # config name -> "ok" | "MISMATCH" | "FAIL" | "-"


def _median(values: list):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(rows: list) -> list:
    """Per benchmark and configuration: the median paired slowdown against
    native, its spread, and whether every pmthreads checksum equals native."""
    out = []
    keys = []
    for r in rows:
        if (r.suite, r.benchmark) not in keys:
            keys.append((r.suite, r.benchmark))
    configs = []
    for r in rows:
        if r.config != NATIVE.name and r.config not in configs:
            configs.append(r.config)
    for suite, bench in keys:
        mine = [r for r in rows if r.benchmark == bench]
        native = {r.repeat: r.compute_s for r in mine if r.config == NATIVE.name and r.status == "ok"}
        native_sums = {r.checksum for r in mine if r.config == NATIVE.name and r.status == "ok"}
        s = Slowdown(suite, bench, _median(list(native.values())), {}, {}, {}, {}, {}, {}, {}, {}, {})
        for config in configs:
            runs = [r for r in mine if r.config == config]
            if not runs:
                s.verdict[config] = "-"
                continue
            good = [r for r in runs if r.status == "ok"]
            if len(good) < len(runs):
                s.verdict[config] = "FAIL"
            elif not native:
                s.verdict[config] = "no-native"
            elif any(r.checksum not in native_sums for r in good):
                s.verdict[config] = "MISMATCH"
            else:
                s.verdict[config] = "ok"
            if good:
                s.seconds[config] = _median([r.compute_s for r in good])
                ratios = paired({r.repeat: r.compute_s for r in good}, native)
                if ratios:
                    s.slowdown[config] = statistics.median(ratios)
                    s.spread[config] = (min(ratios), max(ratios))
                    s.pairs[config] = len(ratios)
                s.period_ms[config] = _median([r.period_p50_ms for r in good])
                p99 = [r.pause_p99_ms for r in good if r.pause_p99_ms is not None]
                s.pause_p99_ms[config] = max(p99) if p99 else None
                s.flushes[config] = _median([r.flushes_per_epoch for r in good])
                s.bytes_per_line[config] = _median([r.device_bytes_per_line for r in good])
        out.append(s)
    return out


def geomean(values: list) -> float | None:
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    return statistics.geometric_mean(values)
