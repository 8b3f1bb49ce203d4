"""workloads.py -- the PARSEC and Phoenix workloads natively and under the
pmthreads runtime (unmodified binaries, LD_PRELOAD=libpmthreads.so with
PMTHREADS_HEAP=malloc, once per write tracker)."""

import statistics
from dataclasses import dataclass

from context import Context, Progress, note
from runner import MPROTECT, NATIVE, UFFD, environment, run

SUITES = {
    "PARSEC": ["blackscholes", "canneal", "dedup", "ferret", "streamcluster", "swaptions"],
    "Phoenix": ["histogram", "kmeans", "linear_regression", "matrix_multiply", "pca",
                "reverse_index", "string_match", "word_count"],
}


@dataclass
class WorkloadRun:
    suite: str
    benchmark: str
    config: str
    repeat: int
    seconds: float
    status: str
    checksum: str
    epochs: str
    pages_persisted: str
    tracker: str


def run_workloads(ctx: Context) -> list:
    configs = [NATIVE]
    if ctx.library is not None:
        configs += [UFFD, MPROTECT]
    else:
        note("libpmthreads.so not found: workloads run natively only")
    found = []
    for suite, names in SUITES.items():
        for name in names:
            exe = ctx.binary(f"parsec-ports/{name}", f"parsec-ports/{name}/{name}")
            if exe is None:
                note(f"{name}: not built, skipped")
            else:
                found.append((suite, name, exe))
    progress = Progress(len(found) * len(configs) * ctx.repeats, "workloads")
    rows = []
    for suite, name, exe in found:
        cmd = [str(exe), "-t", str(ctx.threads), "-q"]
        if ctx.quick:
            cmd[1:1] = ["-s", "small"]
        for repeat in range(1, ctx.repeats + 1):
            # Configurations interleaved per repeat, so a burst of load on the
            # shared machine does not fall on one configuration only.
            for config in configs:
                progress.start(f"{name} {config.name} rep {repeat}/{ctx.repeats}")
                pool_dir = ctx.pools.fresh()
                try:
                    env = environment(config, pool_dir, ctx.library, ctx.pool_size, preload=True)
                    r = run(cmd, env, pool_dir, ctx.timeout)
                finally:
                    ctx.pools.drop(pool_dir)
                checksum = r.facts.get("checksum", "")
                progress.finish(f"{r.seconds:.3f} s {r.status}"
                                + (f" ({r.stderr_tail})" if r.status != "ok" and r.stderr_tail else ""))
                rows.append(WorkloadRun(suite, name, config.name, repeat, r.seconds, r.status,
                                        checksum, str(r.stats.get("epochs_persisted", "")),
                                        str(r.stats.get("pages_persisted", "")),
                                        str(r.stats.get("tracker", ""))))
    return rows


@dataclass
class Slowdown:
    suite: str
    benchmark: str
    native_s: float | None
    seconds: dict      # config name -> median seconds (ok runs only)
    slowdown: dict     # config name -> median / native median
    verdict: dict      # config name -> "ok" | "MISMATCH" | "FAIL" | "-"


def summarise(rows: list) -> list:
    """Median time per benchmark and configuration, the slowdown against
    native, and whether every pmthreads checksum equals the native one."""
    out = []
    keys = []
    for r in rows:
        if (r.suite, r.benchmark) not in keys:
            keys.append((r.suite, r.benchmark))
    for suite, bench in keys:
        mine = [r for r in rows if r.benchmark == bench]
        native = [r for r in mine if r.config == NATIVE.name and r.status == "ok"]
        native_sums = {r.checksum for r in native}
        native_s = statistics.median(r.seconds for r in native) if native else None
        seconds, slowdown, verdict = {}, {}, {}
        for config in (UFFD.name, MPROTECT.name):
            runs = [r for r in mine if r.config == config]
            if not runs:
                verdict[config] = "-"
                continue
            good = [r for r in runs if r.status == "ok"]
            if len(good) < len(runs):
                verdict[config] = "FAIL"
            elif not native:
                verdict[config] = "no-native"
            elif any(r.checksum not in native_sums for r in good):
                verdict[config] = "MISMATCH"
            else:
                verdict[config] = "ok"
            if good:
                seconds[config] = statistics.median(r.seconds for r in good)
                if native_s:
                    slowdown[config] = seconds[config] / native_s
        out.append(Slowdown(suite, bench, native_s, seconds, slowdown, verdict))
    return out


def geomean(values: list) -> float | None:
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    return statistics.geometric_mean(values)
