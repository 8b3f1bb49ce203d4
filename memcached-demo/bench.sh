#!/usr/bin/env bash
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
# environment: DURATION seconds per run (5), CONNS (4), KEYS (10000), VSIZE (100),
#   SET_PERCENT (50), THREAD_LIST ("1 2 4"), INTERVALS ("10 20 40 100 200 500"),
#   MODES ("native preload pmthreads"), LIBPMTHREADS, MEMCACHED_PMTHREADS,
#   PMEM_IS_PMEM_FORCE (1: the pools are on /dev/shm, emulated pmem).
# Output: OUT_DIR/results.csv, OUT_DIR/*.png (gnuplot), OUT_DIR/stats/*.json
#   (each run's PMTHREADS_STATS) and server logs.
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
mkdir -p "$OUT/stats" "$OUT/logs" || die "cannot create $OUT"
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
echo "mode,server_threads,interval_ms,ops,seconds,ops_per_sec,get_hits,get_misses,p50_us,p99_us,max_us,epochs,bytes_written,bytes_per_epoch,pause_p50_ns,pause_p99_ns,pause_max_ns" >"$CSV"

# run MODE THREADS INTERVAL
run() {
	local mode=$1 t=$2 iv=$3 port tag cmd res st
	port=$(free_port)
	tag=$mode-t$t-i$iv
	rm -f "$TMP/pool"
	case $mode in
	native) cmd=("$MEMCACHED") ;;
	preload) cmd=(env LD_PRELOAD="$LIB" PMTHREADS_HEAP=malloc PMTHREADS_POOL="$TMP/pool"
		PMTHREADS_INTERVAL_MS="$iv" PMTHREADS_STATS="$OUT/stats/$tag.json" "$MEMCACHED") ;;
	pmthreads) cmd=(env PMTHREADS_POOL="$TMP/pool" PMTHREADS_INTERVAL_MS="$iv"
		PMTHREADS_STATS="$OUT/stats/$tag.json" "$BIN") ;;
	esac
	if ! start_server "$OUT/logs/$tag.log" "$port" "${cmd[@]}" -l "$MC_HOST" -p "$port" -U 0 \
		-t "$t" -m 256 $(mc_user_args); then
		note "$tag: server did not start, skipped"
		return
	fi
	res=$(timeout $((DURATION + 120)) "$CLIENT" bench "$MC_HOST" "$port" "$CONNS" "$DURATION" \
		"$KEYS" "$VSIZE" "$SET_PERCENT" 2>>"$OUT/logs/$tag.client")
	stop_server TERM
	[ -n "$res" ] || { note "$tag: no result (see $OUT/logs/$tag.client)"; return; }
	st=",,,,,"
	[ "$mode" != native ] && st=$(stats_fields "$OUT/stats/$tag.json")
	echo "$mode,$t,$iv,$res,$st" >>"$CSV"
	note "$tag: $(echo "$res" | cut -d, -f3) ops/s"
}

for t in $THREAD_LIST; do
	for mode in $MODES; do
		if [ "$mode" = native ]; then
			run native "$t" 0
		else
			for iv in $INTERVALS; do
				run "$mode" "$t" "$iv"
			done
		fi
	done
done
note "results: $CSV"

# --- plots ---
if ! command -v gnuplot >/dev/null; then
	note "gnuplot not found, no plots"
	exit 0
fi
# series files: one per (mode, threads), columns: interval value
series() { # MODE THREADS COLUMN
	awk -F, -v m="$1" -v t="$2" -v c="$3" 'NR > 1 && $1 == m && $2 == t && $c != "" { print $3, $c }' "$CSV"
}
plot() { # FILE TITLE YLABEL COLUMN MODES...
	local png=$1 title=$2 ylabel=$3 col=$4 mode t ti=0 cmds=""
	shift 4
	for t in $THREAD_LIST; do
		ti=$((ti + 1))    # one colour per thread count
		for mode in "$@"; do
			series "$mode" "$t" "$col" >"$TMP/s-$mode-$t-$col.dat"
			[ -s "$TMP/s-$mode-$t-$col.dat" ] || continue
			if [ "$mode" = native ]; then
				# a constant: draw it across the interval range
				v=$(awk '{ print $2; exit }' "$TMP/s-$mode-$t-$col.dat")
				cmds="$cmds${cmds:+, }$v title 'native t=$t' dt 2 lc $ti"
			else
				cmds="$cmds${cmds:+, }'$TMP/s-$mode-$t-$col.dat' using 1:2 with linespoints title '$mode t=$t' lc $ti dt $([ "$mode" = preload ] && echo 3 || echo 1)"
			fi
		done
	done
	[ -n "$cmds" ] || return 0
	gnuplot <<EOF || note "gnuplot failed for $png"
set terminal $GP_TERM
set output '$OUT/$png'
set title '$title'
set xlabel 'PMTHREADS_INTERVAL_MS'
set ylabel '$ylabel'
set logscale x
set xrange [8:600]
set key outside right
set grid
plot $cmds
EOF
}
# pngcairo may be missing from some gnuplot builds: fall back to png
GP_TERM="pngcairo size 900,600 noenhanced"
gnuplot -e "set terminal pngcairo" >/dev/null 2>&1 || GP_TERM="png size 900,600 noenhanced"
plot throughput.png "memcached throughput (50% set, ${VSIZE} B values, $CONNS conns)" "ops/s" 6 native preload pmthreads
plot latency-p99.png "client p99 latency" "us" 10 native preload pmthreads
plot bytes-per-epoch.png "bytes persisted per epoch" "bytes" 14 preload pmthreads
plot pause-p99.png "epoch pause p99" "ns" 16 preload pmthreads
plot pause-max.png "epoch pause max" "ns" 17 preload pmthreads
note "plots: $(cd "$OUT" && ls *.png 2>/dev/null | tr '\n' ' ')"
