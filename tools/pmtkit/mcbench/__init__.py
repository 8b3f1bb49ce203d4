# SPDX-License-Identifier: BSD-3-Clause
"""mcbench -- memcached-demo/bench.sh: memcached throughput, native vs
pmthreads (the interval sweep), and the cost of output commit side by side
with Redis (--cost).

  bench.sh [--quick] [OUT_DIR]          the interval sweep (sweep.py)
  bench.sh --cost [--quick] [OUT_DIR]   the cost table (cost.py)

  options.py   the command line and the environment: defaults, checks
  results.py   the CSV rows: PMTHREADS_STATS columns, the other processes' load
  servers.py   servers with a watchdog, free ports, the client, the binaries
  main.py      the entry point

== The interval sweep ==
Modes, each with 1, 2 and 4 server threads (-t):
  native    Debian's /usr/bin/memcached
  preload   the same binary under LD_PRELOAD=libpmthreads.so PMTHREADS_HEAP=malloc
  pmthreads memcached-pmthreads (item memory in the pmthreads heap)
the last two for every PMTHREADS_INTERVAL_MS in $INTERVALS.  The load is
mc_client bench: CONNS closed-loop connections on loopback, 50 % sets / 50 %
gets, fixed key (~10 bytes) and value ($VSIZE bytes) sizes, over $KEYS keys.

environment: DURATION seconds per run (5), REPEATS (1; the report takes the
  median), CONNS (4), KEYS (10000), VSIZE (100), SET_PERCENT (50),
  THREAD_LIST ("1 2 4"), INTERVALS ("10 20 40 100 200 500"),
  MODES ("native preload pmthreads"), LIBPMTHREADS, MEMCACHED_PMTHREADS,
  PMEM_IS_PMEM_FORCE (1: the pools are on /dev/shm, emulated pmem).
  --quick: DURATION=1, THREAD_LIST=4, INTERVALS=100 unless set.
Each repeat runs every configuration once, so slow phases of a shared
machine spread over all configurations instead of hitting one.
Output: OUT_DIR/results.csv (one row per run), OUT_DIR/summary.md and the
  PNG plots of report.py (throughput vs interval, bytes persisted per epoch
  over time, pause distribution), OUT_DIR/stats/*.json (each run's
  PMTHREADS_STATS), OUT_DIR/epochs/*.csv (each run's PMTHREADS_EPOCH_LOG),
  server and client logs.

Statistics: the runtime writes PMTHREADS_STATS as JSON at exit (the server is
stopped with SIGTERM, a clean exit).  The sweep assumes only a JSON object
whose (possibly nested) keys include something like "epochs",
"bytes_written" and "pause_ns_p50", "pause_ns_p99", "pause_ns_max" (nested
objects are flattened with "_": {"pause_ns":{"p50":..}} is pause_ns_p50).
Missing keys are left empty in the CSV, never an error.

== The cost table (--cost; issue 24 item 4) ==
What output commit costs, side by side, on the same client load:
  native          Debian's memcached ($MEMCACHED, /usr/bin/memcached)
  pmthreads       memcached-pmthreads, output commit off
  commit          memcached-pmthreads with PMTHREADS_OUTPUT=commit
  redis-always    Debian's redis-server, appendonly yes, appendfsync always
  redis-everysec  the same with appendfsync everysec
The memcached-pmthreads rows on each pool kind of $POOLS -- pmem: a pool in
$PMEM_DIR with PMEM_IS_PMEM_FORCE=1 PMTHREADS_NVM=pmem (emulated persistent
memory, cache-line flushes); file: a pool in $FILE_DIR, an ordinary file
with PMTHREADS_NVM=log (a record of the changed lines and one fdatasync an
epoch); msync: the same file with PMTHREADS_NVM=msync (every fence an msync,
the backend before the log) -- and each
tracker of $TRACKERS, with PMTHREADS_STRICT=1 (a configuration the runtime
cannot honour fails the run instead of running without persistence).
Redis's AOF is in $FILE_DIR too, RDB snapshots off (--save "").  Every run
starts a fresh server on a fresh pool / AOF; memcached gets -t $THREADS
-m 256, Redis runs as Debian configures it (one thread serving requests).
The loads ($LOADS, CONNS:SET_PERCENT each): mc_client bench with CONNS
closed-loop connections, SET_PERCENT % sets and the rest gets over KEYS
prefilled keys, VSIZE-byte values, DURATION s measured; memcached's text
protocol or Redis's RESP, the same requests.  Latency is per request, from
its send to its reply.
Rounds: every (load, configuration) runs once per round, the configurations'
order rotated by one each round; report.py takes per configuration the
median over the rounds of ops/s, p50 and p99, and the ratio to native's
median of the same run.  The machine's load: the 1-min load average before
the first round, and per run the CPU share used by processes that are not
ours (machine busy time from /proc/stat minus our server's and client's CPU
time, per core), in cost.csv.

environment: ROUNDS (5), DURATION (3), LOADS ("16:90 16:50 4:90 1:90"),
  TRACKERS ("uffd"; "uffd mprotect" adds the mprotect rows), POOLS ("pmem
  file"; msync adds the msync rows), CONFIGS ("native pmthreads commit redis-always redis-everysec"),
  THREADS memcached's -t (4), KEYS (10000), VSIZE (100), INTERVAL
  (PMTHREADS_INTERVAL_MS, 100), PMEM_DIR (/dev/shm), FILE_DIR (/var/tmp),
  MEMCACHED, MEMCACHED_PMTHREADS, REDIS_SERVER (default: redis-server in
  PATH).  --quick: ROUNDS=2 DURATION=1 LOADS=16:90 unless set.
Without redis-server the Redis rows are skipped with a message (install:
apt-get install redis-server); nothing else is optional.
Output in OUT_DIR: cost.csv (one row per run; the pmthreads columns are
  from the run's PMTHREADS_STATS, which cover the server's whole life,
  prefill included), cmd.txt (the command with every parameter explicit,
  versions, file systems), stats/*.json, logs/, and cost.md: the markdown
  tables of report.py (also printed).

Both: OUT_DIR defaults to <build>/memcached-demo/bench-<date> (cost-<date>);
<build> is $BUILD_DIR or build/.  Every server is killed at exit and by a
watchdog after $MC_MAX_SECONDS (300); scratch directories go at exit unless
KEEP_TMP is set.  Note: on a 2-core machine the load generator and the
server share the CPUs; compare modes with each other, not with published
numbers.
"""
