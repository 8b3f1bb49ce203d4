# SPDX-License-Identifier: BSD-3-Clause
"""stress.py -- throughput of the lock-coupling B+tree and sorted list for
each thread count and PUT ratio, natively, under pmthreads (both trackers),
with interception only, and with libpmemobj transactions.

The pmthreads columns run the ported build (nodes from nvmalloc, a named root)
when it exists, else the native binary under LD_PRELOAD with
PMTHREADS_HEAP=malloc; --stress-preload forces the latter.  The
intercept-only column is always the native binary under LD_PRELOAD with
PMTHREADS_HEAP=nvmalloc (locks intercepted, nothing persisted).  Throughput
is what the program reports for its timed phase (after the prefill, before
the final check).  Each round runs every configuration once, in an order
that rotates from round to round; a ratio is the median over rounds of the
paired ratio config / native of the same round.  With a fixed operation
count the set of keys written depends only on the parameters, so every
configuration must end with the native checksum."""

import statistics
from dataclasses import dataclass

from context import Context, Progress, note
from runner import (INTERCEPT, MPROTECT, NATIVE, PMEMOBJ, UFFD, environment, paired, rotated, run,
                    stat_ms)

THREADS = (1, 2, 4)
PUT_RATIOS = (10, 50, 90)

# Per structure: key range and operation count (full run, --quick run).  Long
# enough that scheduling noise does not dominate the timed phase (~0.5 s
# natively for the B+tree), short enough for a few seconds per libpmemobj
# run; the list walks half its length per operation, hence its small range.
SIZES = {
    "bptree": {"full": ("100000", "4000000"), "quick": ("100000", "1000000")},
    "lclist": {"full": ("500", "100000"), "quick": ("500", "50000")},
}


@dataclass
class StressRun:
    structure: str
    threads: int
    put: int
    config: str
    repeat: int
    ops_per_s: float
    seconds: float
    status: str
    checksum: str
    tracker: str       # the write tracker the runtime reports using (stats JSON)
    period_p50_ms: float | None
    pause_p99_ms: float | None


def binaries(ctx: Context, structure: str, force_preload: bool) -> dict:
    """config name -> (executable, preload?) for the configurations available."""
    found = {}
    native = ctx.binary(f"parsec-ports/stress/{structure}")
    if native is not None:
        found[NATIVE.name] = (native, False)
    ported = ctx.binary(f"parsec-ports/stress/{structure}-ported")
    if ctx.library is not None:
        for config in (c for c in (UFFD, MPROTECT) if c.tracker in ctx.trackers):
            if ported is not None and not force_preload:
                found[config.name] = (ported, False)
            elif native is not None:
                found[config.name] = (native, True)
        if native is not None:
            found[INTERCEPT.name] = (native, True)
    pmemobj = ctx.binary(f"parsec-ports/stress/{structure}_pmemobj")
    if pmemobj is not None:
        found[PMEMOBJ.name] = (pmemobj, False)
    return found


CONFIG_OF = {c.name: c for c in (NATIVE, UFFD, MPROTECT, INTERCEPT, PMEMOBJ)}


def cells_for(ctx: Context, structure: str) -> list:
    if ctx.cells:
        return [(t, p) for s, t, p in ctx.cells if s == structure]
    if ctx.quick:
        return [(2, 50)]
    return [(t, p) for t in THREADS for p in PUT_RATIOS]


def run_stress(ctx: Context, force_preload: bool) -> list:
    plan = []
    for structure in SIZES:
        cells = cells_for(ctx, structure)
        if not cells:
            continue
        found = binaries(ctx, structure, force_preload)
        if NATIVE.name not in found:
            note(f"{structure}: not built, skipped")
            continue
        for name in found:
            if name != NATIVE.name:
                note(f"{structure} {name}: {found[name][0].name}"
                     + (f" under LD_PRELOAD, PMTHREADS_HEAP={CONFIG_OF[name].heap}"
                        if found[name][1] else ""))
        keys, ops = SIZES[structure]["quick" if ctx.quick else "full"]
        for threads, put in cells:
            for repeat in range(1, ctx.repeats + 1):
                for name in rotated(list(found), repeat):
                    exe, preload = found[name]
                    plan.append((structure, threads, put, repeat, name, exe, preload, keys, ops))
    progress = Progress(len(plan), "stress")
    rows = []
    for structure, threads, put, repeat, name, exe, preload, keys, ops in plan:
        progress.start(f"{structure} t={threads} put={put}% {name} rep {repeat}/{ctx.repeats}")
        pool_dir = ctx.pools.fresh()
        try:
            cmd = [str(exe), "-t", str(threads), "-u", str(put), "-k", keys, "-n", ops, "-q"]
            if name == PMEMOBJ.name:
                cmd += ["-P", str(pool_dir / "pmemobj.pool")]
            env = environment(CONFIG_OF[name], pool_dir, ctx.library, ctx.pool_size, preload,
                              interval_ms=ctx.interval_ms, medium=ctx.pools.medium)
            r = run(cmd, env, pool_dir, ctx.timeout)
        finally:
            ctx.pools.drop(pool_dir)
        ops_s = float(r.facts.get("throughput_ops_s", "0") or 0)
        progress.finish(f"{ops_s:,.0f} ops/s {r.status}"
                        + (f" ({r.stderr_tail})" if r.status != "ok" and r.stderr_tail else ""))
        rows.append(StressRun(structure, threads, put, name, repeat, ops_s,
                              float(r.facts.get("seconds", "0") or 0), r.status,
                              r.facts.get("checksum", ""), str(r.stats.get("tracker", "")),
                              stat_ms(r.stats, "period_ns_p50"), stat_ms(r.stats, "pause_ns_p99")))
    return rows


@dataclass
class StressCell:
    structure: str
    threads: int
    put: int
    ops_per_s: dict    # config -> median throughput of the ok runs
    ratio: dict        # config -> median of the paired throughput ratios config / native
    spread: dict       # config -> (min, max) of those ratios
    pairs: dict        # config -> number of pairs
    verdict: dict      # config -> ok | MISMATCH | FAIL


def summarise(rows: list) -> list:
    cells = []
    seen = []
    for r in rows:
        key = (r.structure, r.threads, r.put)
        if key not in seen:
            seen.append(key)
    for structure, threads, put in seen:
        mine = [r for r in rows if (r.structure, r.threads, r.put) == (structure, threads, put)]
        reference = {r.checksum for r in mine if r.config == NATIVE.name and r.status == "ok"}
        native = {r.repeat: r.ops_per_s for r in mine if r.config == NATIVE.name and r.status == "ok"}
        cell = StressCell(structure, threads, put, {}, {}, {}, {}, {})
        for name in CONFIG_OF:
            runs = [r for r in mine if r.config == name]
            if not runs:
                continue
            good = [r for r in runs if r.status == "ok"]
            if good:
                cell.ops_per_s[name] = statistics.median(r.ops_per_s for r in good)
                ratios = paired({r.repeat: r.ops_per_s for r in good}, native)
                if ratios:
                    cell.ratio[name] = statistics.median(ratios)
                    cell.spread[name] = (min(ratios), max(ratios))
                    cell.pairs[name] = len(ratios)
            if len(good) < len(runs):
                cell.verdict[name] = "FAIL"
            elif reference and any(r.checksum not in reference for r in good):
                cell.verdict[name] = "MISMATCH"
            else:
                cell.verdict[name] = "ok"
        cells.append(cell)
    return cells
