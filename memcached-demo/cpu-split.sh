#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# cpu-split.sh -- where the CPU goes per request: native memcached against
# memcached-pmthreads with output commit (and, with MODES, without it, with
# output commit on a file pool, and Redis with appendfsync always), under the
# cost table's client load (mc_client bench).
#
# Usage: memcached-demo/cpu-split.sh [OUT_DIR]
#
# Each run starts a fresh server, runs `mc_client bench` for $SECONDS s, and
# samples the whole machine with `perf record -a -g` for the 2 s in its
# middle.  Each sample is put in a thread group (client; server: memcached's
# own threads; runtime: pmthreads' epoch thread; idle: no thread ran) and an
# activity (the system call it was in: send, recv, epoll, the tracker's ioctl,
# futex + membarrier; a page fault; user code; other), and the table gives
# microseconds of CPU per request: samples x sampling period / requests
# served in the sampled window (the run's ops/s x 2 s).  The modes alternate,
# ROUNDS times.  The machine must be quiet: every thread on it counts.
#
# Modes: native (Debian's memcached), pmthreads (memcached-pmthreads, emulated
# pmem on /dev/shm, output commit off), commit (the same with output commit),
# commit-file (output commit on a pool in $FILE_DIR: the log backend on the
# disk), redis-always (redis-server, AOF in $FILE_DIR, appendfsync always; its
# threads count as the server's).
# Environment: ROUNDS (2), SECONDS_PER_RUN (6), CONNS (16), SET_PERCENT (90),
#   TRACKER (uffd), MODES ("native commit"), FILE_DIR (/var/tmp), KEYS (10000),
#   VSIZE (100), THREADS (4), MEMCACHED (/usr/bin/memcached),
#   MEMCACHED_PMTHREADS / BUILD_DIR (where memcached-pmthreads is).
# Needs perf (Debian: linux-perf) and the right to sample the whole machine
# (root, or kernel.perf_event_paranoid <= 0).
set -u
# shellcheck source=memcached-demo/common.sh
. "$(dirname "$0")/common.sh"

ROUNDS=${ROUNDS:-2}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-6}
CONNS=${CONNS:-16}
SET_PERCENT=${SET_PERCENT:-90}
TRACKER=${TRACKER:-uffd}
MODES=${MODES:-"native commit"}
FILE_DIR=${FILE_DIR:-/var/tmp}
KEYS=${KEYS:-10000}
VSIZE=${VSIZE:-100}
THREADS=${THREADS:-4}
MEMCACHED=${MEMCACHED:-/usr/bin/memcached}
WINDOW=2	# seconds sampled

command -v perf >/dev/null || die "perf not found (apt-get install linux-perf)"
[ "$SECONDS_PER_RUN" -ge $((WINDOW + 2)) ] || die "SECONDS_PER_RUN must be at least $((WINDOW + 2))"
for m in $MODES; do
	case $m in native | pmthreads | commit | commit-file) ;;
	redis-always) command -v redis-server >/dev/null ||
		die "MODES: redis-always needs redis-server (apt-get install redis-server)" ;;
	*) die "MODES: '$m' is not one of native pmthreads commit commit-file redis-always" ;;
	esac
done
[ -x "$MEMCACHED" ] || die "$MEMCACHED not found (apt-get install memcached)"
BIN=$(find_memcached_pmthreads) || die "memcached-pmthreads not found (build with -Dmemcached, or set MEMCACHED_PMTHREADS)"

OUT=${1:-${BUILD_DIR:-$SRC_DIR/build}/memcached-demo/cpu-split-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
mc_tmpdir
CLIENT=$(build_client "$TMP")
read -ra USER_ARGS <<<"$(mc_user_args)"

# cpu_split split|table ...: tools/pmtkit/cpu_split.py (the samples' thread
# groups and activities, the medians and the table).
cpu_split() {
	PYTHONPATH=$SRC_DIR/tools python3 -B -m pmtkit.cpu_split "$@"
}

# split PERF_DATA OPS PERIOD_US: "group activity us_per_request" lines.
split() {
	perf script -i "$1" -F comm,pid,tid,ip,sym 2>/dev/null | cpu_split split "$2" "$3"
}

run() {
	local mode=$1 rep=$2 port pool tag res ops freq proto=memcache
	tag=$mode-r$rep
	port=$(free_port)
	pool=$TMP/pool
	rm -f "$pool"
	case $mode in
	native) CMD=("$MEMCACHED") ;;
	pmthreads | commit)
		CMD=(env PMEM_IS_PMEM_FORCE=1 PMTHREADS_NVM=pmem PMTHREADS_STRICT=1 PMTHREADS_POOL="$pool"
			PMTHREADS_TRACKER="$TRACKER" PMTHREADS_OUTPUT="$([ "$mode" = commit ] && echo commit || echo off)"
			PMTHREADS_STATS="$OUT/$tag.stats.json" "$BIN") ;;
	commit-file)
		pool=$(mktemp -u "$FILE_DIR/cpu-split-pool.XXXXXX")
		CMD=(env -u PMEM_IS_PMEM_FORCE PMTHREADS_NVM=log PMTHREADS_STRICT=1 PMTHREADS_POOL="$pool"
			PMTHREADS_TRACKER="$TRACKER" PMTHREADS_OUTPUT=commit
			PMTHREADS_STATS="$OUT/$tag.stats.json" "$BIN") ;;
	redis-always)
		proto=redis
		pool=$(mktemp -d "$FILE_DIR/cpu-split-aof.XXXXXX")
		CMD=(redis-server --port "$port" --bind "$MC_HOST" --dir "$pool" --appendonly yes
			--appendfsync always --save "" --daemonize no --protected-mode no --logfile "") ;;
	esac
	if [ "$mode" = redis-always ]; then
		start_server "$OUT/$tag.log" "$port" "${CMD[@]}" ||
			{ note "$tag: the server did not start (see $OUT/$tag.log)"; rm -rf "$pool"; return; }
	else
		start_server "$OUT/$tag.log" "$port" "${CMD[@]}" -l "$MC_HOST" -p "$port" -U 0 -t "$THREADS" \
			-m 256 "${USER_ARGS[@]}" || { note "$tag: the server did not start (see $OUT/$tag.log)"; return; }
	fi
	# The prefill takes ~1 s + 20 us per key (MC_GRACE_MS=0: the window starts right after it).
	( sleep "$(awk -v k="$KEYS" -v s="$SECONDS_PER_RUN" -v w="$WINDOW" \
		'BEGIN { printf "%.2f", 1 + k * 0.00002 + (s - w) / 2 }')"
	  perf record -q -a -g -o "$OUT/$tag.perf.data" -- sleep "$WINDOW" >/dev/null 2>&1 ) &
	local perf_pid=$!
	res=$(MC_GRACE_MS=0 timeout $((SECONDS_PER_RUN + 60)) "$CLIENT" bench "$MC_HOST" "$port" "$CONNS" \
		"$SECONDS_PER_RUN" "$KEYS" "$VSIZE" "$SET_PERCENT" "$proto" 2>>"$OUT/$tag.client")
	wait "$perf_pid"
	stop_server TERM
	case $mode in commit-file | redis-always) rm -rf "$pool" ;; esac
	if [ -z "$res" ] || [ ! -s "$OUT/$tag.perf.data" ]; then
		note "$tag: no result (see $OUT/$tag.client)"
		return
	fi
	ops=$(echo "$res" | awk -F, -v w="$WINDOW" '{ printf "%d", $3 * w }')
	freq=$(perf report -i "$OUT/$tag.perf.data" --header-only 2>/dev/null |
		sed -n 's/.*cpu-clock.*sample_freq } = \([0-9]*\).*/\1/p' | head -1)
	[ -n "$freq" ] || freq=4000
	echo "$res" >"$OUT/$tag.result"
	split "$OUT/$tag.perf.data" "$ops" "$(awk -v f="$freq" 'BEGIN { print 1e6 / f }')" >"$OUT/$tag.split"
	note "$tag: $(echo "$res" | awk -F, '{ printf "%.0f ops/s, p99 %.3f ms", $3, $7 / 1000 }')"
}

for rep in $(seq 1 "$ROUNDS"); do
	for mode in $MODES; do
		run "$mode" "$rep"
	done
done

# The table: one column per mode, each cell the median over the rounds.
cpu_split table "$OUT" "$MODES" "$ROUNDS" "$SECONDS_PER_RUN" "$CONNS" "$SET_PERCENT" "$TRACKER" |
	tee "$OUT/cpu-split.md"
note "table in $OUT/cpu-split.md"
