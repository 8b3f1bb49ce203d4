# SPDX-License-Identifier: BSD-3-Clause
"""runner.py -- how one benchmark process is run in one configuration.

A configuration says whether the program runs natively, under the pmthreads
runtime (LD_PRELOAD or a ported binary, with a given write tracker) or is the
libpmemobj build.  Every run gets a fresh pool directory under a temporary
directory on /dev/shm, which is removed right after the run, so no run sees
another's pool and a full harness leaves nothing behind.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pmtkit.scratch import scratch_dir


@dataclass(frozen=True)
class Config:
    name: str            # column name in the tables
    kind: str            # "native" | "pmthreads" | "pmemobj"
    tracker: str = ""    # PMTHREADS_TRACKER for kind "pmthreads"
    heap: str = "malloc" # PMTHREADS_HEAP when the runtime is preloaded into a native binary


NATIVE = Config("native", "native")
UFFD = Config("pmthreads-uffd", "pmthreads", "uffd")
MPROTECT = Config("pmthreads-mprotect", "pmthreads", "mprotect")
# The runtime preloaded with PMTHREADS_HEAP=nvmalloc into a binary that never
# calls nvmalloc: locks intercepted, the gate and epochs running, nothing
# persisted -- the cost of interception alone.
INTERCEPT = Config("intercept-only", "pmthreads", "uffd", heap="nvmalloc")
PMEMOBJ = Config("pmemobj", "pmemobj")


def rotated(items: list, repeat: int) -> list:
    """items in the order of round `repeat` (1-based): each round starts one
    further along, so no configuration always runs first (or right after the
    same neighbour) while the load on a shared machine drifts."""
    k = (repeat - 1) % len(items) if items else 0
    return items[k:] + items[:k]


def paired(values: dict, baseline: dict) -> list:
    """Per-round ratios value / baseline for the rounds both have (dicts
    round -> value); the ratio of a pair, never of two medians."""
    return [values[r] / baseline[r] for r in sorted(values)
            if r in baseline and baseline[r] and values[r] is not None]


@dataclass
class Result:
    seconds: float
    status: str                   # ok | FAIL(rc) | TIMEOUT | NOEXEC
    facts: dict = field(default_factory=dict)  # last key=value of each key in stdout
    stats: dict = field(default_factory=dict)  # PMTHREADS_STATS JSON, if written
    stderr_tail: str = ""


class PoolRoot:
    """The temporary directory that holds every run's pool: on /dev/shm
    (medium "pmem": emulated persistent memory), or under disk_dir (medium
    "disk": an ordinary file, the log backend)."""

    def __init__(self, medium: str = "pmem", disk_dir: str = "/var/tmp"):
        self.medium = medium
        self.path = Path(scratch_dir("pmthreads-harness-", disk_dir if medium == "disk" else None))

    def fresh(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="run-", dir=self.path))

    def drop(self, run_dir: Path):
        shutil.rmtree(run_dir, ignore_errors=True)

    def close(self):
        shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def seconds_fact(facts: dict, key: str) -> float | None:
    """A `key=1.234` or `key=1.234s` fact as seconds, None when absent."""
    v = facts.get(key, "")
    try:
        return float(v[:-1] if v.endswith("s") else v)
    except ValueError:
        return None


def stat_ms(stats: dict, key: str) -> float | None:
    """A *_ns figure of the PMTHREADS_STATS JSON in ms, None when absent."""
    v = stats.get(key)
    return v / 1e6 if isinstance(v, (int, float)) else None


def parse_facts(text: str) -> dict:
    """Every `key=value` word of the output; a later one wins."""
    facts = {}
    for line in text.splitlines():
        for word in line.split():
            key, sep, value = word.partition("=")
            if sep and key and value:
                facts[key] = value
    return facts


def last_checksum(text: str) -> str:
    lines = [l for l in text.splitlines() if l.strip()]
    if lines and lines[-1].startswith("checksum="):
        return lines[-1].split("=", 1)[1].strip()
    return ""


def environment(config: Config, pool_dir: Path, library: Path | None, pool_size: str,
                preload: bool, interval_ms: int = 100, medium: str = "pmem") -> dict:
    """The environment of one run.  preload: inject libpmthreads.so with
    PMTHREADS_HEAP=config.heap (an unmodified binary); otherwise the binary is
    expected to be linked with the runtime already (a ported build).  medium:
    "pmem" (PMEM_IS_PMEM_FORCE=1: the pool on /dev/shm stands for persistent
    memory) or "disk" (an ordinary file: the log backend)."""
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("PMTHREADS_") or key == "LD_PRELOAD":
            del env[key]
    if medium == "pmem":
        env["PMEM_IS_PMEM_FORCE"] = "1"
    else:
        env.pop("PMEM_IS_PMEM_FORCE", None)
    if config.kind == "pmthreads":
        env["PMTHREADS_POOL"] = str(pool_dir / "pool")
        env["PMTHREADS_POOL_SIZE"] = pool_size
        env["PMTHREADS_TRACKER"] = config.tracker
        env["PMTHREADS_STATS"] = str(pool_dir / "stats.json")
        env["PMTHREADS_INTERVAL_MS"] = str(interval_ms)
        if preload:
            env["PMTHREADS_HEAP"] = config.heap
            env["LD_PRELOAD"] = str(library)
    if config.kind == "pmemobj":
        env["STRESS_POOL_SIZE"] = "256"
    return env


def run(cmd: list, env: dict, pool_dir: Path, timeout: float) -> Result:
    """Runs cmd once.  Result.seconds is the whole process's wall time
    (start-up, input generation, runtime initialisation, the final persist):
    only for the record.  What the tables compare is the time the program
    itself reports for its computation (facts `time=` / `seconds=`)."""
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, text=True, errors="replace")
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return Result(time.monotonic() - start, "TIMEOUT", parse_facts(out))
    except OSError as e:
        return Result(0.0, "NOEXEC", stderr_tail=str(e))
    seconds = time.monotonic() - start
    facts = parse_facts(proc.stdout)
    facts["checksum"] = last_checksum(proc.stdout)
    stats = {}
    stats_file = pool_dir / "stats.json"
    if stats_file.exists():
        try:
            stats = json.loads(stats_file.read_text())
        except (ValueError, OSError):
            stats = {}
    status = "ok" if proc.returncode == 0 else f"FAIL({proc.returncode})"
    tail = " | ".join(proc.stderr.strip().splitlines()[-2:])
    return Result(seconds, status, facts, stats, tail)
