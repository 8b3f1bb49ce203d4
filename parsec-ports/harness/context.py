# SPDX-License-Identifier: BSD-3-Clause
"""context.py -- what every experiment of the harness needs: where the
binaries are, the run options, the pool directory and the progress lines."""

import sys
from dataclasses import dataclass
from pathlib import Path

from runner import PoolRoot


@dataclass
class Context:
    build: Path
    library: Path | None     # libpmthreads.so, or None when it is not built
    pools: PoolRoot
    repeats: int
    quick: bool
    threads: int
    timeout: float
    pool_size: str
    out: Path
    scale: str = "default"       # workloads' -s
    interval_ms: int = 100       # PMTHREADS_INTERVAL_MS
    only_workloads: tuple = ()   # empty: every built workload
    cells: tuple = ()            # stress (structure, threads, put); empty: the full grid
    trackers: tuple = ("uffd", "mprotect")  # the pmthreads configurations to run

    def binary(self, *relative: str) -> Path | None:
        """The first of build/<relative> that is an executable file."""
        for rel in relative:
            path = self.build / rel
            if path.is_file() and path.stat().st_mode & 0o111:
                return path
        return None


class Progress:
    """`[i/n] what ... result` lines, flushed, so a long run shows it is alive."""

    def __init__(self, total: int, section: str):
        self.total = total
        self.done = 0
        print(f"== {section}: {total} runs", flush=True)

    def start(self, what: str):
        self.done += 1
        print(f"[{self.done}/{self.total}] {what} ...", end=" ", flush=True)

    def finish(self, result: str):
        print(result, flush=True)


def note(message: str):
    print(message, file=sys.stderr, flush=True)
