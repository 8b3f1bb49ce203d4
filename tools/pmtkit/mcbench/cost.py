# SPDX-License-Identifier: BSD-3-Clause
"""cost.py -- bench.sh --cost (see mcbench/__init__.py): every (load,
configuration) once per round in rotated order, one row of cost.csv per run,
cmd.txt with every parameter explicit, then report.py's tables."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from pmtkit.mcbench import options, results
from pmtkit.mcbench.servers import find_memcached_pmthreads, mc_user_args
from pmtkit.ports import MC_HOST, free_port


def server_argv(kind, pool, tracker, port, stats, s, dirs, binary, redis):
    """(argv, protocol) of one configuration's server; a memcached-pmthreads
    pool path is in dirs[pool] ("pmem", "file" or "msync"), Redis's AOF
    directory in dirs["file"]/redis."""
    user = mc_user_args()
    mc_opts = ["-l", MC_HOST, "-p", str(port), "-U", "0", "-t", str(s.threads), "-m", "256"]
    if kind == "native":
        return [s.memcached] + mc_opts + user, "memcache"
    if kind in ("pmthreads", "commit"):
        path = os.path.join(dirs[pool], "pool")
        env = (["env", "PMEM_IS_PMEM_FORCE=1", "PMTHREADS_NVM=pmem"] if pool == "pmem" else
               ["env", "-u", "PMEM_IS_PMEM_FORCE",
                "PMTHREADS_NVM=" + ("msync" if pool == "msync" else "log")])
        return env + ["PMTHREADS_STRICT=1", f"PMTHREADS_POOL={path}",
                      f"PMTHREADS_TRACKER={tracker}", f"PMTHREADS_INTERVAL_MS={s.interval}",
                      "PMTHREADS_OUTPUT=" + ("commit" if kind == "commit" else "off"),
                      f"PMTHREADS_STATS={stats}", binary] + mc_opts + user, "memcache"
    aof = os.path.join(dirs["file"], "redis")
    return [redis, "--port", str(port), "--bind", MC_HOST, "--dir", aof, "--appendonly", "yes",
            "--appendfsync", kind[len("redis-"):], "--save", "", "--daemonize", "no",
            "--protected-mode", "no", "--logfile", ""], "redis"


def fresh_storage(kind, pool, dirs):
    """A fresh pool or AOF directory for the next server."""
    if kind in ("pmthreads", "commit"):
        Path(dirs[pool], "pool").unlink(missing_ok=True)
    elif kind.startswith("redis-"):
        aof = Path(dirs["file"], "redis")
        shutil.rmtree(aof, ignore_errors=True)
        aof.mkdir(parents=True)


def our_cpu_ms():
    """CPU time of our children that ended (servers and clients, reaped)."""
    t = os.times()
    return int((t.children_user + t.children_system) * 1000)


def machine_busy():
    return results.cpu_ticks(Path("/proc/stat").read_text())[0]


def run_one(b, s, cfg, conns, setp, rnd, order, dirs):
    kind, pool, tracker = cfg
    tag = f"{results.run_tag(kind, pool, tracker)}-c{conns}-s{setp}-r{rnd}"
    log, stats = f"{b.out}/logs/{tag}.log", f"{b.out}/stats/{tag}.json"
    busy0, cpu0, t0 = machine_busy(), our_cpu_ms(), time.time_ns()
    up = False
    for _ in range(3):  # another program can take the port between free_port and the bind
        port = free_port()
        if port is None:
            b.die("no free port found")
        fresh_storage(kind, pool, dirs)
        argv, proto = server_argv(kind, pool, tracker, port, stats, s, dirs, b.binary, b.redis)
        if b.procs.start(log, port, argv):
            up = True
            break
        b.procs.stop(signal.SIGKILL)
    if not up:
        b.note(f"{tag}: server did not start (3 attempts), skipped (see {log})")
        return
    res = b.client_bench(tag, port, conns, s.duration, s.keys, s.vsize, setp, proto=proto,
                         timeout=s.duration + 60, grace0=True)
    b.procs.stop()
    t1, cpu1, busy1 = time.time_ns(), our_cpu_ms(), machine_busy()
    if b.client_status != 0 or not res:
        b.note(f"{tag}: the client failed (exit status {b.client_status}: see "
               f"{b.out}/logs/{tag}.client), run not counted")
        return
    other = results.other_load_pct(busy0, busy1, cpu1 - cpu0, t1 - t0,
                                   os.sysconf("SC_CLK_TCK"), os.cpu_count())
    st = results.cost_stats_fields(stats) if kind in ("pmthreads", "commit") else [""] * 8
    b.append_row(",".join([str(rnd), str(order), kind, pool, tracker, str(conns), str(setp), res]
                          + st + [other]))
    r = res.split(",")
    b.note(f"round {rnd}: {tag}: {r[results.CLIENT_OPS_PER_SEC]} ops/s, p50/p99 "
           f"{r[results.CLIENT_P50_US]}/{r[results.CLIENT_P99_US]} us "
           f"(others used {other} % of the CPUs)")


def _out(argv, **kw):
    try:
        return subprocess.run(argv, capture_output=True, text=True, **kw).stdout.strip()
    except OSError:
        return ""


def _df(d, col):
    """One column of df's line for directory d (fstype, source)."""
    lines = _out(["df", f"--output={col}", d]).splitlines()
    return lines[-1].replace(" ", "") if lines else ""


def cmd_txt(b, s, nruns, want_redis):
    """cmd.txt: the command, every parameter explicit, the machine, versions."""
    model = next((ln.split(":", 1)[1].strip() for ln in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), "")
    lines = [
        f"command: {b.cmdline}",
        f"explicit: ROUNDS={s.rounds} DURATION={s.duration} LOADS='{s.loads_text}' "
        f"TRACKERS='{' '.join(s.trackers)}' POOLS='{' '.join(s.pools)}' "
        f"CONFIGS='{' '.join(s.configs)}' THREADS={s.threads} KEYS={s.keys} VSIZE={s.vsize} "
        f"INTERVAL={s.interval} PMEM_DIR={s.pmem_dir} FILE_DIR={s.file_dir} "
        "memcached-demo/bench.sh --cost",
        "date: " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        f"machine: {os.cpu_count()} CPUs ({model}), Linux {os.uname().release}",
        "load_before: " + " ".join(Path("/proc/loadavg").read_text().split()[:3]),
        f"pmem_dir: {s.pmem_dir} ({_df(s.pmem_dir, 'fstype')})",
        f"file_dir: {s.file_dir} ({_df(s.file_dir, 'fstype')} on {_df(s.file_dir, 'source')})",
        f"memcached: {s.memcached} ({_out([s.memcached, '-V'])})"]
    if b.binary:
        lines.append(f"memcached_pmthreads: {b.binary} ({_out([b.binary, '-V'])})")
    if b.redis:
        version = " ".join(_out([b.redis, "--version"]).split(" ")[:3])
        lines.append(f"redis: {b.redis} ({version})")
    if want_redis and not b.redis:
        lines.append("redis: not installed, rows skipped")
    lines.append(f"runs: {nruns}")
    Path(b.out, "cmd.txt").write_text("\n".join(lines) + "\n")


def main(b, quick):
    try:
        s = options.cost_settings(os.environ, quick)
    except options.BadInput as e:
        b.die(str(e))
    for name, d in (("PMEM_DIR", s.pmem_dir), ("FILE_DIR", s.file_dir)):
        if not (os.path.isdir(d) and os.access(d, os.W_OK)):
            b.die(f"{name}={d} is not a writable directory")
    b.make_out("cost", ("stats", "logs"))
    b.tmp = b.procs.scratch()
    b.build_client()
    dirs = {}
    for pool, parent in (("pmem", s.pmem_dir), ("file", s.file_dir), ("msync", s.file_dir)):
        try:
            dirs[pool] = b.procs.scratch("pmthreads-bench.", parent)
        except OSError:
            b.die(f"cannot create a directory in {parent}")
    b.binary = ""
    want_redis = any(k.startswith("redis-") for k in s.configs)
    if "native" in s.configs and not os.access(s.memcached, os.X_OK):
        b.die(f"{s.memcached} not found (apt-get install memcached, or set MEMCACHED)")
    if "pmthreads" in s.configs or "commit" in s.configs:
        b.binary = find_memcached_pmthreads(os.environ) or b.die(
            "memcached-pmthreads not found (meson compile -C build with -Dmemcached=enabled, "
            "or set MEMCACHED_PMTHREADS)")
    b.redis = os.environ.get("REDIS_SERVER") or shutil.which("redis-server") or ""
    if want_redis and not (b.redis and os.access(b.redis, os.X_OK)):
        b.note("redis-server not found: the Redis rows are SKIPPED.")
        b.note("  Install it (a benchmark dependency only): apt-get install redis-server")
        b.note("  (Debian 12: Redis 7.0; the package's own service need not run), "
               "or set REDIS_SERVER.")
        b.redis = ""
    cfgs = options.cost_configurations(s.configs, s.pools, s.trackers, bool(b.redis))
    if not cfgs:
        b.die(f"nothing to run (CONFIGS='{' '.join(s.configs)}')")
    nruns = s.rounds * len(s.loads) * len(cfgs)
    cmd_txt(b, s, nruns, want_redis)
    b.note(f"{nruns} runs of {s.duration} s (+ 1-1.5 s each to start, prefill, stop): "
           f"~{options.minutes_estimate(nruns, s.duration)} min")
    b.csv = f"{b.out}/cost.csv"
    with open(b.csv, "w") as f:
        f.write(results.COST_HEADER + "\n")
    for rnd in range(1, s.rounds + 1):
        order = 0
        for conns, setp in s.loads:
            for cfg in options.round_order(cfgs, rnd):
                order += 1
                run_one(b, s, cfg, conns, setp, rnd, order, dirs)
    b.note(f"results: {b.csv}")
    b.report()

