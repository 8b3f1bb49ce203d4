#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench.sh -- memcached throughput: native vs pmthreads.
#
# Modes, each with 1, 2 and 4 server threads (-t):
#   native    Debian's /usr/bin/memcached
#   preload   the same binary under LD_PRELOAD=libpmthreads.so PMTHREADS_HEAP=malloc
#   pmthreads memcached-pmthreads (item memory in the pmthreads heap)
# the last two for every PMTHREADS_INTERVAL_MS in $INTERVALS.  The load is
# mc_client bench: CONNS closed-loop connections on loopback, 50 % sets / 50 %
# gets, fixed key (~10 bytes) and value ($VSIZE bytes) sizes, over $KEYS keys.
#
# usage: bench.sh [OUT_DIR]     (default: <build>/memcached-demo/bench-<date>)
# environment: DURATION seconds per run (5), REPEATS (1; the report takes the
#   median), CONNS (4), KEYS (10000), VSIZE (100), SET_PERCENT (50),
#   THREAD_LIST ("1 2 4"), INTERVALS ("10 20 40 100 200 500"),
#   MODES ("native preload pmthreads"), LIBPMTHREADS, MEMCACHED_PMTHREADS,
#   PMEM_IS_PMEM_FORCE (1: the pools are on /dev/shm, emulated pmem).
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
