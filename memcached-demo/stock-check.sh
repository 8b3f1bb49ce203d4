#!/usr/bin/env bash
# stock-check.sh -- Debian's unmodified /usr/bin/memcached under
# LD_PRELOAD=libpmthreads.so PMTHREADS_HEAP=malloc (every malloc in the
# persistent heap, every mutex a FASE boundary) must still pass memccapable,
# libmemcached's protocol conformance test (ASCII and binary).
#
# usage: stock-check.sh [LIBPMTHREADS_SO]
#   default library: $LIBPMTHREADS, else <build>/preload/libpmthreads.so, else
#   pkg-config.  NATIVE=1 runs the same check without the preload (baseline).
# environment: THREADS (4), PMTHREADS_INTERVAL_MS (100), MC_MAX_SECONDS (300).
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
	PRELOAD=(env LD_PRELOAD="$LIB" PMTHREADS_HEAP=malloc PMTHREADS_POOL="$TMP/memcached.pool"
		PMTHREADS_INTERVAL_MS="${PMTHREADS_INTERVAL_MS:-100}"
		PMTHREADS_STATS="$TMP/stats.json")
	note "$MEMCACHED with LD_PRELOAD=$LIB PMTHREADS_HEAP=malloc"
fi

start_server "$LOG" "$PORT" "${PRELOAD[@]}" "$MEMCACHED" -l "$MC_HOST" -p "$PORT" -U 0 \
	-t "$THREADS" $(mc_user_args) || exit 1
# memccapable flushes the server and runs every ASCII and binary test.
timeout 240 "$CAPABLE" -h "$MC_HOST" -p "$PORT" -t 10 >"$TMP/capable.log" 2>&1
rc=$?
cat "$TMP/capable.log"
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
if [ -f "$TMP/stats.json" ]; then
	note "runtime statistics:"
	cat "$TMP/stats.json" >&2
fi
echo "stock-check: PASS"
exit 0
