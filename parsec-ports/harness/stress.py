"""stress.py -- throughput of the lock-coupling B+tree and sorted list for
each thread count and PUT ratio, natively, under pmthreads (both trackers) and
with libpmemobj transactions.

The pmthreads columns run the ported build (nodes from nvmalloc, a named root)
when it exists, else the native binary under LD_PRELOAD with
PMTHREADS_HEAP=malloc; --stress-preload forces the latter.  With a fixed
operation count the set of keys written depends only on the parameters, so
every configuration must end with the native checksum."""

import statistics
from dataclasses import dataclass

from context import Context, Progress, note
from runner import MPROTECT, NATIVE, PMEMOBJ, UFFD, environment, run

THREADS = (1, 2, 4)
PUT_RATIOS = (10, 50, 90)

# Per structure: key range and operation count (full run, --quick run).  Long
# enough that start-up (pool creation, the first epoch) and scheduling noise
# do not dominate (~0.5 s natively for the B+tree), short enough for a few
# seconds per libpmemobj run; the list walks half its length per operation,
# hence its small range.
SIZES = {
    "bptree": {"full": ("100000", "4000000"), "quick": ("20000", "200000")},
    "lclist": {"full": ("500", "100000"), "quick": ("200", "20000")},
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


def binaries(ctx: Context, structure: str, force_preload: bool) -> dict:
    """config name -> (executable, preload?) for the configurations available."""
    found = {}
    native = ctx.binary(f"parsec-ports/stress/{structure}")
    if native is not None:
        found[NATIVE.name] = (native, False)
    ported = ctx.binary(f"parsec-ports/stress/{structure}-ported")
    if ctx.library is not None:
        for config in (UFFD, MPROTECT):
            if ported is not None and not force_preload:
                found[config.name] = (ported, False)
            elif native is not None:
                found[config.name] = (native, True)
    pmemobj = ctx.binary(f"parsec-ports/stress/{structure}_pmemobj")
    if pmemobj is not None:
        found[PMEMOBJ.name] = (pmemobj, False)
    return found


CONFIG_OF = {c.name: c for c in (NATIVE, UFFD, MPROTECT, PMEMOBJ)}


def run_stress(ctx: Context, force_preload: bool) -> list:
    plan = []
    for structure in SIZES:
        found = binaries(ctx, structure, force_preload)
        if NATIVE.name not in found:
            note(f"{structure}: not built, skipped")
            continue
        for name in found:
            if name != NATIVE.name:
                note(f"{structure} {name}: {found[name][0].name}"
                     + (" under LD_PRELOAD, PMTHREADS_HEAP=malloc" if found[name][1] else ""))
        keys, ops = SIZES[structure]["quick" if ctx.quick else "full"]
        for threads in THREADS:
            for put in PUT_RATIOS:
                for repeat in range(1, ctx.repeats + 1):
                    for name, (exe, preload) in found.items():
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
            env = environment(CONFIG_OF[name], pool_dir, ctx.library, ctx.pool_size, preload)
            r = run(cmd, env, pool_dir, ctx.timeout)
        finally:
            ctx.pools.drop(pool_dir)
        ops_s = float(r.facts.get("throughput_ops_s", "0") or 0)
        progress.finish(f"{ops_s:,.0f} ops/s {r.status}"
                        + (f" ({r.stderr_tail})" if r.status != "ok" and r.stderr_tail else ""))
        rows.append(StressRun(structure, threads, put, name, repeat, ops_s, r.seconds, r.status,
                              r.facts.get("checksum", ""), str(r.stats.get("tracker", ""))))
    return rows


@dataclass
class StressCell:
    structure: str
    threads: int
    put: int
    ops_per_s: dict    # config -> median throughput of the ok runs
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
        ops, verdict = {}, {}
        for name in CONFIG_OF:
            runs = [r for r in mine if r.config == name]
            if not runs:
                continue
            good = [r for r in runs if r.status == "ok"]
            if good:
                ops[name] = statistics.median(r.ops_per_s for r in good)
            if len(good) < len(runs):
                verdict[name] = "FAIL"
            elif reference and any(r.checksum not in reference for r in good):
                verdict[name] = "MISMATCH"
            else:
                verdict[name] = "ok"
        cells.append(StressCell(structure, threads, put, ops, verdict))
    return cells
