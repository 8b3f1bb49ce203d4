# SPDX-License-Identifier: BSD-3-Clause
"""recovery.py -- the crash/recovery experiment, run through
../recovery/crash_recover.sh (which owns the kill -9 / restart protocol) and
read back from the CSV it writes."""

import csv
import os
import subprocess
from pathlib import Path

from context import Context, note

INTERVALS_MS = (10, 100, 500)


def run_recovery(ctx: Context) -> list:
    script = Path(__file__).resolve().parent.parent / "recovery" / "crash_recover.sh"
    out_csv = ctx.out / "recovery.csv"
    out_csv.unlink(missing_ok=True)
    seconds = "2" if ctx.quick else "3"
    print(f"== recovery: {len(INTERVALS_MS)} pmthreads intervals + 1 pmemobj run, "
          f"{seconds} s of inserts each", flush=True)
    cmd = ["sh", str(script), "-b", str(ctx.build), "-s", seconds, "-t", str(ctx.threads),
           "-i", " ".join(str(i) for i in INTERVALS_MS), "-o", str(out_csv)]
    env = dict(os.environ, PMTHREADS_POOL_SIZE=ctx.pool_size)
    try:
        # The script prints its own table, a line per run, as progress.
        subprocess.run(cmd, env=env, timeout=ctx.timeout * 4, check=False)
    except subprocess.TimeoutExpired:
        note("recovery: the experiment timed out")
    if not out_csv.exists():
        note("recovery: no results (are bptree_crash / bptree_crash_pmemobj built?)")
        return []
    with out_csv.open() as f:
        return list(csv.DictReader(f))
