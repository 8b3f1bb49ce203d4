# SPDX-License-Identifier: BSD-3-Clause
"""results.py -- the rows of bench.sh's CSV files: the columns read from a
run's PMTHREADS_STATS and the share of the machine other processes used.

A stats file that is missing or not JSON leaves its columns empty, never an
error: a run whose server died still has its client's figures."""

import json

SWEEP_HEADER = ("mode,server_threads,interval_ms,ops,seconds,ops_per_sec,get_hits,get_misses,"
                "p50_us,p99_us,max_us,epochs,bytes_written,bytes_per_epoch,pause_p50_ns,"
                "pause_p99_ns,pause_max_ns,repeat,load_start_ms")
COST_HEADER = ("round,order,kind,pool,tracker,conns,set_pct,ops,seconds,ops_per_sec,get_hits,"
               "get_misses,p50_us,p99_us,max_us,output_commit,writes_held,epochs,epochs_demanded,"
               "hold_p50_ns,hold_p99_ns,pause_p99_ns,writeback_mean_ns,other_load_pct")
# mc_client bench's one line: ops,seconds,ops_per_sec,get_hits,get_misses,p50_us,p99_us,max_us
CLIENT_OPS_PER_SEC, CLIENT_P50_US, CLIENT_P99_US = 2, 5, 6


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def flatten(obj, prefix=""):
    """The numbers of a JSON object by lower-case key path joined with "_"
    ({"pause_ns": {"p50": 1}} -> {"pause_ns_p50": 1}); booleans are not numbers."""
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}_{k}" if prefix else str(k)))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out[prefix.lower()] = obj
    return out


def _pick(flat, *names):
    """The first of names present as a key, else the first a key ends in."""
    for n in names:
        if n in flat:
            return flat[n]
    for n in names:
        for k, v in flat.items():
            if k.endswith("_" + n):
                return v
    return None


def _number(v):
    if v is None:
        return ""
    return "%d" % v if float(v).is_integer() else "%.1f" % v


def sweep_stats_fields(path):
    """epochs,bytes_written,bytes_per_epoch,pause_p50_ns,pause_p99_ns,pause_max_ns
    of the sweep's CSV, under whatever names the stats file uses."""
    d = _load(path)
    if d is None:
        return ["", "", "", "", "", ""]
    d = flatten(d)
    ep = _pick(d, "epochs", "epoch_count", "n_epochs", "persist_epochs")
    by = _pick(d, "bytes_written", "bytes_persisted", "persisted_bytes", "nvm_bytes_written")
    p50 = _pick(d, "pause_ns_p50", "pause_p50_ns", "pause_p50")
    p99 = _pick(d, "pause_ns_p99", "pause_p99_ns", "pause_p99")
    pmx = _pick(d, "pause_ns_max", "pause_max_ns", "pause_max")
    bpe = by / ep if (ep and by is not None) else None
    return [_number(v) for v in (ep, by, bpe, p50, p99, pmx)]


def cost_stats_fields(path):
    """output_commit,writes_held,epochs,epochs_demanded,hold_p50_ns,hold_p99_ns,
    pause_p99_ns,writeback_mean_ns of the cost table's CSV (the runtime's own
    top-level keys; writeback_mean_ns is persist_ns per persisted epoch)."""
    d = _load(path)
    if not isinstance(d, dict):
        return [""] * 8

    def g(k):
        v = d.get(k)
        if isinstance(v, bool):
            return "1" if v else "0"
        return "" if v is None else str(v)
    wb = (str(d["persist_ns"] // d["epochs_persisted"])
          if isinstance(d.get("persist_ns"), int) and d.get("epochs_persisted") else "")
    return [g(k) for k in ("output_commit", "output_writes_held", "epochs",
                           "output_epochs_demanded", "output_hold_ns_p50",
                           "output_hold_ns_p99", "pause_ns_p99")] + [wb]


def cpu_ticks(stat_text):
    """(busy, total) jiffies of the whole machine from /proc/stat's text
    (iowait counts as idle)."""
    f = [int(x) for x in stat_text.split("\n", 1)[0].split()[1:9]]
    u, n, s, i, w, q, sq, st = f + [0] * (8 - len(f))
    return u + n + s + q + sq + st, u + n + s + i + w + q + sq + st


def other_load_pct(busy0, busy1, ours_ms, elapsed_ns, hz, ncpu):
    """The share of all CPUs (%) that processes other than ours kept busy: the
    machine's busy time minus our CPU time, over the run's wall time."""
    busy = (busy1 - busy0) / hz - ours_ms / 1000
    busy = max(busy, 0)
    return "%.1f" % (100 * busy / (ncpu * elapsed_ns / 1e9))


def run_tag(kind, pool, tracker):
    """A cost run's name: the columns that apply ("native", "commit-pmem-uffd",
    "redis-always-aof")."""
    return f"{kind}-{pool}-{tracker}".rstrip("-")
