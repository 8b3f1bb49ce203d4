#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench.sh -- memcached throughput: native vs pmthreads; and the cost of
# output commit side by side with Redis (issue 24).
#
# usage: bench.sh [--quick] [OUT_DIR]          the interval sweep (below)
#        bench.sh --cost [--quick] [OUT_DIR]   the cost table (after the sweep's
#                                              description)
# --quick: a smoke run of either (seconds, not minutes; its figures mean little).
# OUT_DIR defaults to <build>/memcached-demo/bench-<date> (cost-<date>).
#
# == The interval sweep ==
# Modes, each with 1, 2 and 4 server threads (-t):
#   native    Debian's /usr/bin/memcached
#   preload   the same binary under LD_PRELOAD=libpmthreads.so PMTHREADS_HEAP=malloc
#   pmthreads memcached-pmthreads (item memory in the pmthreads heap)
# the last two for every PMTHREADS_INTERVAL_MS in $INTERVALS.  The load is
# mc_client bench: CONNS closed-loop connections on loopback, 50 % sets / 50 %
# gets, fixed key (~10 bytes) and value ($VSIZE bytes) sizes, over $KEYS keys.
#
# environment: DURATION seconds per run (5), REPEATS (1; the report takes the
#   median), CONNS (4), KEYS (10000), VSIZE (100), SET_PERCENT (50),
#   THREAD_LIST ("1 2 4"), INTERVALS ("10 20 40 100 200 500"),
#   MODES ("native preload pmthreads"), LIBPMTHREADS, MEMCACHED_PMTHREADS,
#   PMEM_IS_PMEM_FORCE (1: the pools are on /dev/shm, emulated pmem).
#   --quick: DURATION=1, THREAD_LIST=4, INTERVALS=100 unless set.
# Each repeat runs every configuration once, so slow phases of a shared
# machine spread over all configurations instead of hitting one.
# Output: OUT_DIR/results.csv (one row per run), OUT_DIR/summary.md and the
#   PNG plots of report.py (throughput vs interval, bytes persisted per epoch
#   over time, pause distribution), OUT_DIR/stats/*.json (each run's
#   PMTHREADS_STATS), OUT_DIR/epochs/*.csv (each run's PMTHREADS_EPOCH_LOG),
#   server and client logs.
#
# Statistics: the runtime writes PMTHREADS_STATS as JSON at exit (the server is
# stopped with SIGTERM, a clean exit).  Its format is defined elsewhere; this
# script assumes only a JSON object whose (possibly nested) keys include
# something like "epochs", "bytes_written" and "pause_ns_p50", "pause_ns_p99",
# "pause_ns_max" (nested objects are flattened with "_": {"pause_ns":{"p50":..}}
# is pause_ns_p50).  Missing keys are left empty in the CSV, never an error.
#
# Note: on a 2-core machine the load generator and the server share the CPUs;
# compare modes with each other, not with published numbers.
set -u
MC_MAX_SECONDS=${MC_MAX_SECONDS:-300}
. "$(dirname "$0")/common.sh"

# == The cost table (--cost; issue 24 item 4) ==
# What output commit costs, side by side, on the same client load:
#   native          Debian's memcached ($MEMCACHED, /usr/bin/memcached)
#   pmthreads       memcached-pmthreads, output commit off
#   commit          memcached-pmthreads with PMTHREADS_OUTPUT=commit
#   redis-always    Debian's redis-server, appendonly yes, appendfsync always
#   redis-everysec  the same with appendfsync everysec
# The memcached-pmthreads rows on each pool kind of $POOLS -- pmem: a pool in
# $PMEM_DIR with PMEM_IS_PMEM_FORCE=1 PMTHREADS_NVM=pmem (emulated persistent
# memory, cache-line flushes); file: a pool in $FILE_DIR with
# PMTHREADS_NVM=msync (an ordinary file, msync at every epoch) -- and each
# tracker of $TRACKERS, with PMTHREADS_STRICT=1 (a configuration the runtime
# cannot honour fails the run instead of running without persistence).
# Redis's AOF is in $FILE_DIR too, RDB snapshots off (--save "").  Every run
# starts a fresh server on a fresh pool / AOF; memcached gets -t $THREADS
# -m 256, Redis runs as Debian configures it (one thread serving requests).
# The loads ($LOADS, CONNS:SET_PERCENT each): mc_client bench with CONNS
# closed-loop connections, SET_PERCENT % sets and the rest gets over KEYS
# prefilled keys, VSIZE-byte values, DURATION s measured; memcached's text
# protocol or Redis's RESP, the same requests.  Latency is per request, from
# its send to its reply.
# Rounds: every (load, configuration) runs once per round, the configurations'
# order rotated by one each round; report.py takes per configuration the
# median over the rounds of ops/s, p50 and p99, and the ratio to native's
# median of the same run.  The machine's load: the 1-min load average before
# the first round, and per run the CPU share used by processes that are not
# ours (machine busy time from /proc/stat minus our server's and client's CPU
# time, per core), in cost.csv.
#
# environment: ROUNDS (5), DURATION (3), LOADS ("16:90 16:50 4:90 1:90"),
#   TRACKERS ("uffd"; "uffd mprotect" adds the mprotect rows), POOLS ("pmem
#   file"), CONFIGS ("native pmthreads commit redis-always redis-everysec"),
#   THREADS memcached's -t (4), KEYS (10000), VSIZE (100), INTERVAL
#   (PMTHREADS_INTERVAL_MS, 100), PMEM_DIR (/dev/shm), FILE_DIR (/var/tmp),
#   MEMCACHED, MEMCACHED_PMTHREADS, REDIS_SERVER (default: redis-server in
#   PATH).  --quick: ROUNDS=2 DURATION=1 LOADS=16:90 unless set.
# Without redis-server the Redis rows are skipped with a message (install:
# apt-get install redis-server); nothing else is optional.
# Output in OUT_DIR: cost.csv (one row per run; the pmthreads columns are
#   from the run's PMTHREADS_STATS, which cover the server's whole life,
#   prefill included), cmd.txt (the command with every parameter explicit,
#   versions, file systems), stats/*.json, logs/, and cost.md: the markdown
#   tables of report.py (also printed).

# cpu_ticks: "busy total" jiffies of the whole machine (iowait counts as idle).
cpu_ticks() {
	local _cpu u n s i w q sq st
	read -r _cpu u n s i w q sq st _ </proc/stat
	echo "$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
}

# our_cpu_ms: CPU time of this shell's children that ended (bash's `times`,
# which must run in this shell: in a $(...) it would report the subshell's).
our_cpu_ms() {
	times >"$TMP/times"
	OUR_CPU_MS=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%d\n", t * 1000 }' "$TMP/times")
}

# stats_cost FILE: "output_commit,writes_held,epochs,epochs_demanded,hold_p50_ns,hold_p99_ns,pause_p99_ns,writeback_mean_ns"
stats_cost() {
	python3 - "$1" <<'PYEOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print(",,,,,,,"); sys.exit(0)
def g(k):
    v = d.get(k)
    if isinstance(v, bool):
        return "1" if v else "0"
    return "" if v is None else str(v)
# persist_ns: collect + write-back, summed over the persisted epochs
wb = (str(d["persist_ns"] // d["epochs_persisted"])
      if isinstance(d.get("persist_ns"), int) and d.get("epochs_persisted") else "")
print(",".join([g(k) for k in ("output_commit", "output_writes_held", "epochs", "output_epochs_demanded",
                               "output_hold_ns_p50", "output_hold_ns_p99", "pause_ns_p99")] + [wb]))
PYEOF
}

# cost_cmd KIND POOL TRACKER PORT STATS: sets CMD (the server's command line)
# and PROTO (the client's protocol), and gives the server a fresh pool or AOF.
cost_cmd() {
	local kind=$1 pool=$2 tr=$3 port=$4 stats=$5 out_mode=off path user
	read -ra user <<<"$(mc_user_args)"
	PROTO=memcache
	case $kind in
	native)
		CMD=("$MEMCACHED" -l "$MC_HOST" -p "$port" -U 0 -t "$THREADS" -m 256 "${user[@]}") ;;
	pmthreads | commit)
		[ "$kind" = commit ] && out_mode=commit
		if [ "$pool" = pmem ]; then
			path=$PMEM_TMP/pool
			CMD=(env PMEM_IS_PMEM_FORCE=1 PMTHREADS_NVM=pmem)
		else
			path=$FILE_TMP/pool
			CMD=(env -u PMEM_IS_PMEM_FORCE PMTHREADS_NVM=msync)
		fi
		rm -f "$path"
		CMD+=(PMTHREADS_STRICT=1 PMTHREADS_POOL="$path" PMTHREADS_TRACKER="$tr"
			PMTHREADS_INTERVAL_MS="$INTERVAL" PMTHREADS_OUTPUT="$out_mode"
			PMTHREADS_STATS="$stats" "$BIN" -l "$MC_HOST" -p "$port" -U 0 -t "$THREADS" -m 256
			"${user[@]}") ;;
	redis-always | redis-everysec)
		PROTO=redis
		rm -rf "$FILE_TMP/redis"
		mkdir -p "$FILE_TMP/redis" || die "cannot create $FILE_TMP/redis"
		CMD=("$REDIS_SERVER" --port "$port" --bind "$MC_HOST" --dir "$FILE_TMP/redis"
			--appendonly yes --appendfsync "${kind#redis-}" --save "" --daemonize no
			--protected-mode no --logfile "") ;;
	esac
}

# cost_run KIND/POOL/TRACKER CONNS SET_PERCENT ROUND ORDER
cost_run() {
	local kind pool tr conns=$2 setp=$3 rep=$4 order=$5 port tag log stats up=0
	local res rc st t0 t1 c0 c1 cpu0 cpu1 other
	IFS=/ read -r kind pool tr <<<"$1"
	tag=$(echo "$kind-$pool-$tr" | sed 's/-\(-\)*$//')-c$conns-s$setp-r$rep
	log=$OUT/logs/$tag.log
	stats=$OUT/stats/$tag.json
	c0=$(cpu_ticks)
	our_cpu_ms
	cpu0=$OUR_CPU_MS
	t0=$(date +%s%N)
	# another program can take the port between free_port and the bind
	for _ in 1 2 3; do
		port=$(free_port)
		cost_cmd "$kind" "$pool" "$tr" "$port" "$stats"
		if start_server "$log" "$port" "${CMD[@]}"; then
			up=1
			break
		fi
		stop_server KILL
	done
	if [ "$up" = 0 ]; then
		note "$tag: server did not start (3 attempts), skipped (see $log)"
		return
	fi
	res=$(MC_GRACE_MS=0 timeout $((DURATION + 60)) "$CLIENT" bench "$MC_HOST" "$port" "$conns" \
		"$DURATION" "$KEYS" "$VSIZE" "$setp" "$PROTO" 2>>"$OUT/logs/$tag.client")
	rc=$?
	stop_server TERM
	t1=$(date +%s%N)
	our_cpu_ms
	cpu1=$OUR_CPU_MS
	c1=$(cpu_ticks)
	if [ "$rc" != 0 ] || [ -z "$res" ]; then
		note "$tag: the client failed (exit status $rc: see $OUT/logs/$tag.client), run not counted"
		return
	fi
	# the other processes' share of the machine during the run, in % of all cores
	other=$(awk -v c0="$c0" -v c1="$c1" -v ours="$((cpu1 - cpu0))" -v ns="$((t1 - t0))" \
		-v hz="$(getconf CLK_TCK)" -v ncpu="$(nproc)" 'BEGIN {
		split(c0, a, " "); split(c1, b, " ")
		busy = (b[1] - a[1]) / hz - ours / 1000
		if (busy < 0) busy = 0
		printf "%.1f", 100 * busy / (ncpu * ns / 1e9) }')
	st=",,,,,,,"
	case $kind in pmthreads | commit) st=$(stats_cost "$stats") ;; esac
	echo "$rep,$order,$kind,$pool,$tr,$conns,$setp,$res,$st,$other" >>"$COST_CSV"
	note "round $rep: $tag: $(echo "$res" | cut -d, -f3) ops/s, p50/p99 $(echo "$res" | cut -d, -f6)/$(echo "$res" | cut -d, -f7) us (others used $other % of the CPUs)"
}

cost_main() {
	ROUNDS=${ROUNDS:-$([ "$QUICK" = 1 ] && echo 2 || echo 5)}
	DURATION=${DURATION:-$([ "$QUICK" = 1 ] && echo 1 || echo 3)}
	LOADS=${LOADS:-$([ "$QUICK" = 1 ] && echo 16:90 || echo "16:90 16:50 4:90 1:90")}
	TRACKERS=${TRACKERS:-uffd}
	POOLS=${POOLS:-"pmem file"}
	CONFIGS=${CONFIGS:-"native pmthreads commit redis-always redis-everysec"}
	THREADS=${THREADS:-4}
	KEYS=${KEYS:-10000}
	VSIZE=${VSIZE:-100}
	INTERVAL=${INTERVAL:-100}
	PMEM_DIR=${PMEM_DIR:-/dev/shm}
	FILE_DIR=${FILE_DIR:-/var/tmp}
	MEMCACHED=${MEMCACHED:-/usr/bin/memcached}

	local v l c s kind pool tr rep i n order
	for v in ROUNDS DURATION THREADS KEYS VSIZE INTERVAL; do
		[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v=${!v}: a positive integer is needed"
	done
	for l in $LOADS; do
		[[ $l =~ ^([1-9][0-9]*):([0-9]+)$ ]] && [ "${BASH_REMATCH[2]}" -le 100 ] ||
			die "LOADS: '$l' is not CONNS:SET_PERCENT (e.g. 16:90: 16 connections, 90 % sets)"
	done
	[ -n "$LOADS" ] || die "LOADS is empty"
	for tr in $TRACKERS; do
		case $tr in uffd | mprotect) ;; *) die "TRACKERS: '$tr' is not uffd or mprotect" ;; esac
	done
	for pool in $POOLS; do
		case $pool in pmem | file) ;; *) die "POOLS: '$pool' is not pmem or file" ;; esac
	done
	for kind in $CONFIGS; do
		case $kind in native | pmthreads | commit | redis-always | redis-everysec) ;;
		*) die "CONFIGS: '$kind' is not one of native pmthreads commit redis-always redis-everysec" ;;
		esac
	done
	for v in PMEM_DIR FILE_DIR; do
		[ -d "${!v}" ] && [ -w "${!v}" ] || die "$v=${!v} is not a writable directory"
	done
	command -v python3 >/dev/null || die "python3 is needed (apt-get install python3)"

	OUT=${1:-${BUILD_DIR:-$SRC_DIR/build}/memcached-demo/cost-$(date +%Y%m%d-%H%M%S)}
	mkdir -p "$OUT/stats" "$OUT/logs" || die "cannot create $OUT"
	OUT=$(cd "$OUT" && pwd)
	mc_tmpdir
	CLIENT=$(build_client "$TMP")
	PMEM_TMP=$(mktemp -d "$PMEM_DIR/pmthreads-bench.XXXXXX") || die "cannot create a directory in $PMEM_DIR"
	_mc_tmpdirs+=("$PMEM_TMP")
	FILE_TMP=$(mktemp -d "$FILE_DIR/pmthreads-bench.XXXXXX") || die "cannot create a directory in $FILE_DIR"
	_mc_tmpdirs+=("$FILE_TMP")

	local cfgs=() want_redis=0
	for kind in $CONFIGS; do
		case $kind in
		native)
			[ -x "$MEMCACHED" ] || die "$MEMCACHED not found (apt-get install memcached, or set MEMCACHED)"
			cfgs+=(native/-/-) ;;
		pmthreads | commit)
			BIN=$(find_memcached_pmthreads) ||
				die "memcached-pmthreads not found (meson compile -C build with -Dmemcached=enabled, or set MEMCACHED_PMTHREADS)"
			for pool in $POOLS; do
				for tr in $TRACKERS; do
					cfgs+=("$kind/$pool/$tr")
				done
			done ;;
		redis-*) want_redis=1 ;;
		esac
	done
	REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server)}
	if [ "$want_redis" = 1 ]; then
		if [ -n "$REDIS_SERVER" ] && [ -x "$REDIS_SERVER" ]; then
			for kind in $CONFIGS; do
				case $kind in redis-*) cfgs+=("$kind/aof/-") ;; esac
			done
		else
			note "redis-server not found: the Redis rows are SKIPPED."
			note "  Install it (a benchmark dependency only): apt-get install redis-server"
			note "  (Debian 12: Redis 7.0; the package's own service need not run), or set REDIS_SERVER."
			REDIS_SERVER=""
		fi
	fi
	[ "${#cfgs[@]}" -gt 0 ] || die "nothing to run (CONFIGS='$CONFIGS')"

	local nloads nruns
	nloads=$(echo $LOADS | wc -w)
	nruns=$((ROUNDS * nloads * ${#cfgs[@]}))
	{
		echo "command: ${BENCH_CMDLINE}"
		echo "explicit: ROUNDS=$ROUNDS DURATION=$DURATION LOADS='$LOADS' TRACKERS='$TRACKERS'" \
			"POOLS='$POOLS' CONFIGS='$CONFIGS' THREADS=$THREADS KEYS=$KEYS VSIZE=$VSIZE" \
			"INTERVAL=$INTERVAL PMEM_DIR=$PMEM_DIR FILE_DIR=$FILE_DIR memcached-demo/bench.sh --cost"
		echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), Linux $(uname -r)"
		echo "load_before: $(cut -d' ' -f1-3 /proc/loadavg)"
		echo "pmem_dir: $PMEM_DIR ($(df --output=fstype "$PMEM_DIR" | tail -n 1 | tr -d ' '))"
		echo "file_dir: $FILE_DIR ($(df --output=fstype "$FILE_DIR" | tail -n 1 | tr -d ' ') on $(df --output=source "$FILE_DIR" | tail -n 1 | tr -d ' '))"
		echo "memcached: $MEMCACHED ($("$MEMCACHED" -V 2>/dev/null))"
		[ -n "${BIN:-}" ] && echo "memcached_pmthreads: $BIN ($("$BIN" -V 2>/dev/null))"
		[ -n "$REDIS_SERVER" ] && echo "redis: $REDIS_SERVER ($("$REDIS_SERVER" --version | cut -d' ' -f1-3))"
		[ "$want_redis" = 1 ] && [ -z "$REDIS_SERVER" ] && echo "redis: not installed, rows skipped"
		echo "runs: $nruns"
	} >"$OUT/cmd.txt"
	note "$nruns runs of ${DURATION} s (+ 1-1.5 s each to start, prefill, stop): ~$(((nruns * (2 * DURATION + 3) / 2 + 59) / 60)) min"

	COST_CSV=$OUT/cost.csv
	echo "round,order,kind,pool,tracker,conns,set_pct,ops,seconds,ops_per_sec,get_hits,get_misses,p50_us,p99_us,max_us,output_commit,writes_held,epochs,epochs_demanded,hold_p50_ns,hold_p99_ns,pause_p99_ns,writeback_mean_ns,other_load_pct" >"$COST_CSV"
	n=${#cfgs[@]}
	for rep in $(seq 1 "$ROUNDS"); do
		order=0
		for l in $LOADS; do
			c=${l%%:*}
			s=${l##*:}
			for i in $(seq 0 $((n - 1))); do
				order=$((order + 1))
				cost_run "${cfgs[$(((i + rep - 1) % n))]}" "$c" "$s" "$rep" "$order"
			done
		done
	done
	note "results: $COST_CSV"
	python3 "$DEMO_DIR/report.py" "$OUT" || die "report.py failed"
}

QUICK=0
COST=0
BENCH_CMDLINE="$0 $*"
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--cost) COST=1 ;;
	-h | --help) sed -n '3,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--) shift; break ;;
	-*) die "unknown option $1 (--cost, --quick, -h)" ;;
	*) break ;;
	esac
	shift
done
[ $# -le 1 ] || die "usage: bench.sh [--cost] [--quick] [OUT_DIR]"
if [ "$COST" = 1 ]; then
	cost_main "$@"
	exit 0
fi
if [ "$QUICK" = 1 ]; then
	DURATION=${DURATION:-1}
	THREAD_LIST=${THREAD_LIST:-4}
	INTERVALS=${INTERVALS:-100}
fi


DURATION=${DURATION:-5}
REPEATS=${REPEATS:-1}
CONNS=${CONNS:-4}
KEYS=${KEYS:-10000}
VSIZE=${VSIZE:-100}
SET_PERCENT=${SET_PERCENT:-50}
THREAD_LIST=${THREAD_LIST:-"1 2 4"}
INTERVALS=${INTERVALS:-"10 20 40 100 200 500"}
MODES=${MODES:-"native preload pmthreads"}
export PMEM_IS_PMEM_FORCE=${PMEM_IS_PMEM_FORCE:-1}
MEMCACHED=${MEMCACHED:-/usr/bin/memcached}

OUT=${1:-${BUILD_DIR:-$SRC_DIR/build}/memcached-demo/bench-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/stats" "$OUT/epochs" "$OUT/logs" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
mc_tmpdir
CLIENT=$(build_client "$TMP")

LIB=""
BIN=""
case " $MODES " in *" preload "*)
	LIB=$(find_libpmthreads) || die "libpmthreads.so not found (set LIBPMTHREADS or build pmthreads)" ;;
esac
case " $MODES " in *" pmthreads "*)
	BIN=$(find_memcached_pmthreads) || die "memcached-pmthreads not found (run fetch-and-build.sh or set MEMCACHED_PMTHREADS)" ;;
esac
[ -x "$MEMCACHED" ] || die "$MEMCACHED not found"

# stats_fields FILE: "epochs,bytes_written,bytes_per_epoch,pause_p50_ns,pause_p99_ns,pause_max_ns"
stats_fields() {
	local f=$1
	if [ ! -s "$f" ]; then
		echo ",,,,,"
		return
	fi
	if command -v python3 >/dev/null; then
		python3 - "$f" <<'EOF'
import json, sys
def flat(o, p=""):
    out = {}
    if isinstance(o, dict):
        for k, v in o.items():
            out.update(flat(v, p + "_" + str(k) if p else str(k)))
    elif isinstance(o, (int, float)) and not isinstance(o, bool):
        out[p.lower()] = o
    return out
try:
    d = flat(json.load(open(sys.argv[1])))
except Exception:
    print(",,,,,"); sys.exit(0)
def pick(*names):
    for n in names:                      # exact key, then a key ending in it
        if n in d: return d[n]
    for n in names:
        for k, v in d.items():
            if k.endswith("_" + n): return v
    return None
ep = pick("epochs", "epoch_count", "n_epochs", "persist_epochs")
by = pick("bytes_written", "bytes_persisted", "persisted_bytes", "nvm_bytes_written")
p50 = pick("pause_ns_p50", "pause_p50_ns", "pause_p50")
p99 = pick("pause_ns_p99", "pause_p99_ns", "pause_p99")
pmx = pick("pause_ns_max", "pause_max_ns", "pause_max")
bpe = by / ep if (ep and by is not None) else None
f = lambda v: "" if v is None else ("%d" % v if float(v).is_integer() else "%.1f" % v)
print(",".join(f(v) for v in (ep, by, bpe, p50, p99, pmx)))
EOF
	else
		# top-level "key": number only
		local k v out=""
		for k in epochs bytes_written - pause_ns_p50 pause_ns_p99 pause_ns_max; do
			v=""
			[ "$k" != - ] && v=$(grep -o "\"$k\"[[:space:]]*:[[:space:]]*[0-9.]*" "$f" | head -n 1 | sed 's/.*://; s/[[:space:]]//g')
			out="$out${out:+,}$v"
		done
		echo "$out" | awk -F, '{ b = ($1 > 0 && $2 != "") ? $2 / $1 : ""; print $1 "," $2 "," b "," $4 "," $5 "," $6 }'
	fi
}

CSV=$OUT/results.csv
# load_start_ms: from the server's launch to the start of mc_client's
# measured window (it prefills its keys for 1 s + 20 us per key first), so
# that the report can tell the epochs of that window from those of start-up
# and prefill.
echo "mode,server_threads,interval_ms,ops,seconds,ops_per_sec,get_hits,get_misses,p50_us,p99_us,max_us,epochs,bytes_written,bytes_per_epoch,pause_p50_ns,pause_p99_ns,pause_max_ns,repeat,load_start_ms" >"$CSV"

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# run MODE THREADS INTERVAL REPEAT
run() {
	local mode=$1 t=$2 iv=$3 rep=$4 port tag cmd res st launched started
	port=$(free_port)
	tag=$mode-t$t-i$iv-r$rep
	rm -f "$TMP/pool"
	case $mode in
	native) cmd=("$MEMCACHED") ;;
	preload) cmd=(env LD_PRELOAD="$LIB" PMTHREADS_HEAP=malloc PMTHREADS_POOL="$TMP/pool"
		PMTHREADS_INTERVAL_MS="$iv" PMTHREADS_STATS="$OUT/stats/$tag.json"
		PMTHREADS_EPOCH_LOG="$OUT/epochs/$tag.csv" "$MEMCACHED") ;;
	pmthreads) cmd=(env PMTHREADS_POOL="$TMP/pool" PMTHREADS_INTERVAL_MS="$iv"
		PMTHREADS_STATS="$OUT/stats/$tag.json" PMTHREADS_EPOCH_LOG="$OUT/epochs/$tag.csv"
		"$BIN") ;;
	esac
	launched=$(now_ms)
	if ! start_server "$OUT/logs/$tag.log" "$port" "${cmd[@]}" -l "$MC_HOST" -p "$port" -U 0 \
		-t "$t" -m 256 $(mc_user_args); then
		note "$tag: server did not start, skipped"
		return
	fi
	started=$(now_ms)
	res=$(timeout $((DURATION + 120)) "$CLIENT" bench "$MC_HOST" "$port" "$CONNS" "$DURATION" \
		"$KEYS" "$VSIZE" "$SET_PERCENT" 2>>"$OUT/logs/$tag.client")
	stop_server TERM
	[ -n "$res" ] || { note "$tag: no result (see $OUT/logs/$tag.client)"; return; }
	st=",,,,,"
	[ "$mode" != native ] && st=$(stats_fields "$OUT/stats/$tag.json")
	echo "$mode,$t,$iv,$res,$st,$rep,$((started - launched + 1000 + KEYS / 50))" >>"$CSV"
	note "$tag: $(echo "$res" | cut -d, -f3) ops/s"
}

for rep in $(seq 1 "$REPEATS"); do
	for t in $THREAD_LIST; do
		for mode in $MODES; do
			if [ "$mode" = native ]; then
				run native "$t" 0 "$rep"
			else
				for iv in $INTERVALS; do
					run "$mode" "$t" "$iv" "$rep"
				done
			fi
		done
	done
done
note "results: $CSV"
python3 "$DEMO_DIR/report.py" "$OUT" || die "report.py failed"
