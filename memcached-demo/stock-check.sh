#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stock-check.sh -- Debian's unmodified /usr/bin/memcached under
# LD_PRELOAD=libpmthreads.so PMTHREADS_HEAP=malloc (every malloc in the
# persistent heap, every mutex a FASE boundary) must still pass memccapable,
# libmemcached's protocol conformance test (ASCII and binary), then serve a
# sustained concurrent load with every value checked (mc_client).
#
# usage: stock-check.sh [LIBPMTHREADS_SO]
#   default library: $LIBPMTHREADS, else <build>/preload/libpmthreads.so, else
#   pkg-config.  NATIVE=1 runs the same check without the preload (baseline).
# environment: THREADS (4), PMTHREADS_INTERVAL_MS (100), PMTHREADS_TRACKER,
#   MC_MAX_SECONDS (300); load phase: LOAD_SECONDS (10; 0 skips it), ROUNDS (3),
#   KEYS (10000), LOAD_VMIN/LOAD_VMAX (10/2000), CONNS (4).
# Exit status: 0 pass, 1 memccapable failed or the server died, 2 setup error.
set -u
MC_MAX_SECONDS=${MC_MAX_SECONDS:-300}
. "$(dirname "$0")/common.sh"

MEMCACHED=${MEMCACHED:-/usr/bin/memcached}
[ -x "$MEMCACHED" ] || die "$MEMCACHED not found (apt-get install memcached)"
CAPABLE=$(command -v memccapable || command -v memcapable) ||
	die "memccapable not found (apt-get install libmemcached-tools)"
THREADS=${THREADS:-4}

mc_tmpdir
PORT=$(free_port)
LOG=$TMP/server.log
if [ -n "${NATIVE:-}" ]; then
	PRELOAD=()
	note "native run (no preload)"
else
	LIB=${1:-$(find_libpmthreads)} || die "libpmthreads.so not found: build pmthreads or pass its path"
	[ -f "$LIB" ] || die "$LIB not found"
	# the pool is on tmpfs: emulated pmem unless told otherwise
	PRELOAD=(env LD_PRELOAD="$LIB" PMTHREADS_HEAP=malloc PMTHREADS_POOL="$TMP/memcached.pool"
		PMEM_IS_PMEM_FORCE="${PMEM_IS_PMEM_FORCE:-1}"
		PMTHREADS_INTERVAL_MS="${PMTHREADS_INTERVAL_MS:-100}"
		PMTHREADS_STATS="$TMP/stats.json")
	note "$MEMCACHED with LD_PRELOAD=$LIB PMTHREADS_HEAP=malloc"
fi

start_server "$LOG" "$PORT" "${PRELOAD[@]}" "$MEMCACHED" -l "$MC_HOST" -p "$PORT" -U 0 \
	-t "$THREADS" -m 256 $(mc_user_args) || exit 1
# memccapable flushes the server and runs every ASCII and binary test.
timeout 240 "$CAPABLE" -h "$MC_HOST" -p "$PORT" -t 10 >"$TMP/capable.log" 2>&1
rc=$?
cat "$TMP/capable.log"

# Sustained load (after memccapable, which flushed the server): ROUNDS
# concurrent loaders set KEYS keys each (values LOAD_VMIN..LOAD_VMAX bytes)
# while `mc_client bench` runs CONNS connections of 50 % sets / 50 % gets
# (every value checked) for LOAD_SECONDS; then every acknowledged key of every
# round must be served with its value (-m is large enough that nothing is
# evicted).
load_rc=0
if [ $rc -eq 0 ] && [ "${LOAD_SECONDS:-10}" -gt 0 ] && kill -0 "$MC_PID" 2>/dev/null; then
	CLIENT=$(build_client "$TMP") || exit 2
	ROUNDS=${ROUNDS:-3} KEYS=${KEYS:-10000}
	note "sustained load: $ROUNDS loaders x $KEYS keys + bench ${LOAD_SECONDS:-10} s"
	pids=()
	for r in $(seq 1 "$ROUNDS"); do
		"$CLIENT" load "$MC_HOST" "$PORT" "$r" "$KEYS" "${LOAD_VMIN:-10}" "${LOAD_VMAX:-2000}" \
			"$TMP/ack-$r" 2>>"$TMP/load.log" &
		pids+=($!)
	done
	"$CLIENT" bench "$MC_HOST" "$PORT" "${CONNS:-4}" "${LOAD_SECONDS:-10}" 2000 100 50 \
		>"$TMP/bench.csv" 2>>"$TMP/load.log" || load_rc=1
	for p in "${pids[@]}"; do wait "$p" || load_rc=1; done
	cat "$TMP/load.log" >&2
	note "bench (ops,seconds,ops_per_sec,get_hits,get_misses,p50_us,p99_us,max_us): $(cat "$TMP/bench.csv")"
	now=$(date +%s%N)
	for r in $(seq 1 "$ROUNDS"); do
		"$CLIENT" verify "$MC_HOST" "$PORT" "$r" "$KEYS" "${LOAD_VMIN:-10}" "${LOAD_VMAX:-2000}" \
			"$TMP/ack-$r" "$now" || load_rc=1
		[ "$(wc -l <"$TMP/ack-$r")" -eq "$KEYS" ] || { note "round $r: not every set was acknowledged"; load_rc=1; }
	done
fi
alive=1
kill -0 "$MC_PID" 2>/dev/null || alive=0
stop_server TERM
if [ $alive = 0 ]; then
	note "FAIL: the server died during the test; its log:"
	tail -n 20 "$LOG" >&2
	exit 1
fi
if [ $rc -ne 0 ] || grep -q '\[FAIL\]' "$TMP/capable.log"; then
	note "FAIL: memccapable exit status $rc"
	exit 1
fi
if [ $load_rc -ne 0 ]; then
	note "FAIL: the sustained load saw a wrong or missing value or a failed request"
	exit 1
fi
if [ -f "$TMP/stats.json" ]; then
	note "runtime statistics:"
	cat "$TMP/stats.json" >&2
fi
echo "stock-check: PASS"
exit 0
