# SPDX-License-Identifier: BSD-3-Clause
"""options.py -- bench.sh's command line and environment: what each run of
the sweep and of the cost table is given, with the defaults and checks.

An environment variable set to the empty string counts as unset (the
shell's ${VAR:-default}, which bench.sh's users are used to)."""

import re
from types import SimpleNamespace

USAGE = """\
bench.sh -- memcached throughput: native vs pmthreads; and the cost of
output commit side by side with Redis (issue 24).

usage: bench.sh [--quick] [OUT_DIR]          the interval sweep (below)
       bench.sh --cost [--quick] [OUT_DIR]   the cost table (after the sweep's
                                             description)
--quick: a smoke run of either (seconds, not minutes; its figures mean little).
OUT_DIR defaults to <build>/memcached-demo/bench-<date> (cost-<date>).
"""

SWEEP_MODES = ("native", "preload", "pmthreads")
COST_KINDS = ("native", "pmthreads", "commit", "redis-always", "redis-everysec")


class BadInput(Exception):
    """A command line or environment the bench cannot run with; the message
    names the problem and the fix."""


class HelpWanted(Exception):
    """-h / --help."""


def parse_args(args):
    """(quick, cost, out_dir or None) from bench.sh's arguments."""
    quick = cost = False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--quick":
            quick = True
        elif a == "--cost":
            cost = True
        elif a in ("-h", "--help"):
            raise HelpWanted()
        elif a == "--":
            i += 1
            break
        elif a.startswith("-"):
            raise BadInput(f"unknown option {a} (--cost, --quick, -h)")
        else:
            break
        i += 1
    rest = args[i:]
    if len(rest) > 1:
        raise BadInput("usage: bench.sh [--cost] [--quick] [OUT_DIR]")
    return quick, cost, (rest[0] if rest else None)


def _get(env, name, default):
    return env.get(name) or default


def _positive(env, name, default):
    v = _get(env, name, default)
    if not re.fullmatch(r"[1-9][0-9]*", v):
        raise BadInput(f"{name}={v}: a positive integer is needed")
    return int(v)


def _count(env, name, default):
    """A whole number the sweep computes with (0 allowed)."""
    v = _get(env, name, default)
    if not re.fullmatch(r"[0-9]+", v):
        raise BadInput(f"{name}={v}: a whole number is needed")
    return int(v)


def sweep_settings(env, quick):
    """The interval sweep's parameters from env (a mapping)."""
    q = {"DURATION": "1", "THREAD_LIST": "4", "INTERVALS": "100"} if quick else {}
    s = SimpleNamespace(
        duration=_count(env, "DURATION", q.get("DURATION", "5")),
        repeats=_count(env, "REPEATS", "1"),
        conns=_get(env, "CONNS", "4"),
        keys=_count(env, "KEYS", "10000"),
        vsize=_get(env, "VSIZE", "100"),
        set_percent=_get(env, "SET_PERCENT", "50"),
        threads=_get(env, "THREAD_LIST", q.get("THREAD_LIST", "1 2 4")).split(),
        intervals=_get(env, "INTERVALS", q.get("INTERVALS", "10 20 40 100 200 500")).split(),
        modes=_words_of(env, "MODES", " ".join(SWEEP_MODES), SWEEP_MODES,
                        "one of " + " ".join(SWEEP_MODES)),
        pmem_is_pmem_force=_get(env, "PMEM_IS_PMEM_FORCE", "1"),
        memcached=_get(env, "MEMCACHED", "/usr/bin/memcached"))
    return s


def parse_loads(text):
    """[(conns, set_percent)] from LOADS ("16:90 4:50")."""
    loads = []
    for ld in text.split():
        m = re.fullmatch(r"([1-9][0-9]*):([0-9]+)", ld)
        if not m or int(m.group(2)) > 100:
            raise BadInput(f"LOADS: '{ld}' is not CONNS:SET_PERCENT "
                           "(e.g. 16:90: 16 connections, 90 % sets)")
        loads.append((int(m.group(1)), int(m.group(2))))
    if not loads:
        raise BadInput("LOADS is empty")
    return loads


def _words_of(env, name, default, allowed, what):
    words = _get(env, name, default).split()
    for w in words:
        if w not in allowed:
            raise BadInput(f"{name}: '{w}' is not {what}")
    return words


def cost_settings(env, quick):
    """The cost table's parameters from env (a mapping); the directories are
    checked by the caller (they must exist and be writable)."""
    s = SimpleNamespace(
        rounds=_positive(env, "ROUNDS", "2" if quick else "5"),
        duration=_positive(env, "DURATION", "1" if quick else "3"),
        threads=_positive(env, "THREADS", "4"),
        keys=_positive(env, "KEYS", "10000"),
        vsize=_positive(env, "VSIZE", "100"),
        interval=_positive(env, "INTERVAL", "100"))
    s.loads_text = _get(env, "LOADS", "16:90" if quick else "16:90 16:50 4:90 1:90")
    s.loads = parse_loads(s.loads_text)
    s.trackers = _words_of(env, "TRACKERS", "uffd", ("uffd", "mprotect"), "uffd or mprotect")
    s.pools = _words_of(env, "POOLS", "pmem file", ("pmem", "file", "msync"), "pmem, file or msync")
    s.configs = _words_of(env, "CONFIGS", " ".join(COST_KINDS), COST_KINDS,
                          "one of " + " ".join(COST_KINDS))
    s.pmem_dir = _get(env, "PMEM_DIR", "/dev/shm")
    s.file_dir = _get(env, "FILE_DIR", "/var/tmp")
    s.memcached = _get(env, "MEMCACHED", "/usr/bin/memcached")
    return s


def cost_configurations(configs, pools, trackers, have_redis):
    """The (kind, pool, tracker) list each round runs, in CONFIGS order with
    the Redis rows last ('-' where a column does not apply)."""
    cfgs = []
    for kind in configs:
        if kind == "native":
            cfgs.append(("native", "-", "-"))
        elif kind in ("pmthreads", "commit"):
            cfgs += [(kind, p, t) for p in pools for t in trackers]
    if have_redis:
        cfgs += [(k, "aof", "-") for k in configs if k.startswith("redis-")]
    return cfgs


def round_order(cfgs, rnd):
    """The configurations of round rnd (from 1), rotated by one per round."""
    n = len(cfgs)
    return [cfgs[(i + rnd - 1) % n] for i in range(n)]


def minutes_estimate(nruns, duration):
    """bench.sh's announcement: each run takes its duration plus 1-1.5 s to
    start, prefill and stop."""
    return (nruns * (2 * duration + 3) // 2 + 59) // 60
