#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# crash-test.sh -- kill -9 memcached-pmthreads while it is being loaded, restart
# it on the same pool, and check what it serves.
#
# Each round: start loading keys r<round>-<i> (values a function of round and i,
# one set at a time, each acknowledgement time-stamped), kill -9 the server at
# a random moment while the client is still setting (after a random 10-90 % of
# the round's keys were acknowledged, and not before the server's epoch log
# shows an epoch durable whose quiescent point came 300 ms into the load: a
# round no key of which the durability check covers fails), restart it on the
# same pool, then check:
#   - every key acknowledged before the quiescent point of the newest epoch
#     the killed server's epoch log shows durable (minus MARGIN_MS) is served
#     with its value, in this and every earlier round: what the runtime
#     promised, however late its epochs ran on a loaded machine;
#   - no key of any round is served with a wrong value (nothing half-written);
#   - the server found nothing to drop ("dropped 0 incomplete linked items").
# and measure: how many acknowledged sets were lost, how long before the kill
# the oldest of them was acknowledged, in ms and in epoch periods the runtime
# actually achieved before the kill (median period_us of the killed run's last
# epochs, from PMTHREADS_EPOCH_LOG); at most one period is the design's promise.
# After the last round the server is stopped cleanly and checked once more.
#
# usage: crash-test.sh [MEMCACHED_PMTHREADS]
# environment: ROUNDS (3), KEYS per round (20000), VMIN/VMAX value sizes (10/1000),
#   THREADS server threads (4), PMTHREADS_INTERVAL_MS (100), MARGIN_MS (0: a
#   negative one requires sets acknowledged after the horizon, and must fail),
#   KILL_MIN_PCT/KILL_MAX_PCT kill when this share of the keys is acknowledged
#   (10/90; the load must take a few epochs: KEYS 20000 is ~1-2 s),
#   MC_MAX_SECONDS watchdog per server (600), KEEP_TMP=1 keeps the pool and logs.
# Exit status: 0 all rounds passed, 1 a check failed, 2 setup error.
set -u
. "$(dirname "$0")/common.sh"

BIN=${1:-$(find_memcached_pmthreads)} || die "memcached-pmthreads not found: run fetch-and-build.sh or pass its path"
[ -x "$BIN" ] || die "$BIN is not executable"
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-20000}
VMIN=${VMIN:-10}
VMAX=${VMAX:-1000}
THREADS=${THREADS:-4}
export PMTHREADS_INTERVAL_MS=${PMTHREADS_INTERVAL_MS:-100}
# the pool is on the medium of common.sh's tools/pool-medium.sh: emulated
# pmem on /dev/shm (PMEM_IS_PMEM_FORCE=1 unless told otherwise), or with
# PMT_POOL_MEDIUM=disk a file on a disk (the log backend)
MARGIN_MS=${MARGIN_MS:-0}
KILL_MIN_PCT=${KILL_MIN_PCT:-10}
KILL_MAX_PCT=${KILL_MAX_PCT:-90}
# room for every round's keys, so nothing is evicted
MEM_MB=$(( (ROUNDS * KEYS * (VMAX + 100) / 1048576) * 2 + 64 ))

mc_tmpdir
CLIENT=$(build_client "$TMP")
export PMTHREADS_POOL=$TMP/memcached.pool
PORT=$(free_port)
LOG=$TMP/server.log
ARGS=(-l "$MC_HOST" -p "$PORT" -U 0 -t "$THREADS" -m "$MEM_MB" -v $(mc_user_args))
note "binary $BIN, pool $PMTHREADS_POOL, port $PORT, $ROUNDS rounds of $KEYS keys," \
	"interval ${PMTHREADS_INTERVAL_MS} ms, margin ${MARGIN_MS} ms before the durable horizon"

cutoff=()     # per round: keys acknowledged before this (ns) must survive
fail=0
nstart=0

# start: the next server, with its own epoch log (epochs.N.csv) and
# statistics (stats.N.json)
start() {
	nstart=$((nstart + 1))
	start_ns[$nstart]=$(date +%s%N)
	PMTHREADS_EPOCH_LOG=$TMP/epochs.$nstart.csv PMTHREADS_STATS=$TMP/stats.$nstart.json start_server "$LOG" "$PORT" "$BIN" "${ARGS[@]}"
}

# crash_loss loss|worst ...: tools/pmtkit/crash_loss.py (lost acknowledged
# sets, and how far before the kill the oldest of them was acknowledged)
crash_loss() {
	PYTHONPATH=$SRC_DIR/tools python3 -B -m pmtkit.crash_loss "$@"
}

# verify_all: check every round so far against the running server.
verify_all() {
	local r out rc
	for r in $(seq 1 "$1"); do
		out=$("$CLIENT" verify "$MC_HOST" "$PORT" "$r" "$KEYS" "$VMIN" "$VMAX" \
			"$TMP/ack.$r" "${cutoff[$r]}" 2>"$TMP/verify.err")
		rc=$?
		echo "  $out"
		last_verify=$out
		if [ $rc -ne 0 ]; then
			sed 's/^/    /' "$TMP/verify.err" | head -n 12
			fail=1
		fi
	done
}

# check_log: the restart must have reused the memory and dropped nothing.
check_log() {
	local from=$1
	if ! tail -n +"$from" "$LOG" | grep -q "reusing it"; then
		note "FAIL: the restarted server did not reuse its memory:"
		tail -n +"$from" "$LOG" | grep '\[restart\]' | sed 's/^/    /' >&2
		fail=1
	fi
	if tail -n +"$from" "$LOG" | grep -q "dropped [1-9]"; then
		note "FAIL: recovery found linked items with incomplete values:"
		tail -n +"$from" "$LOG" | grep "dropp" | sed "s/^/    /" >&2
		fail=1
	fi
	tail -n +"$from" "$LOG" | grep 'relinked' | sed 's/^/  /'
}

start || exit 2
for r in $(seq 1 "$ROUNDS"); do
	: >"$TMP/ack.$r"
	t0=$(date +%s%N)
	"$CLIENT" load "$MC_HOST" "$PORT" "$r" "$KEYS" "$VMIN" "$VMAX" "$TMP/ack.$r" 2>"$TMP/load.$r" &
	loader=$!
	target=$(( KEYS * (KILL_MIN_PCT + RANDOM % (KILL_MAX_PCT - KILL_MIN_PCT + 1)) / 100 ))
	killed_log=$TMP/epochs.$nstart.csv
	# Not before the durability rule covers some of the load: the server's
	# epoch log must show an epoch durable whose quiescent point came 300 ms
	# into the load (bounded: a server whose epochs never come is killed at
	# the end of the load, and the round fails on required=0).
	earliest=$(( t0 + 300 * 1000000 ))
	covered() {
		[ "$(crash_loss horizon "${start_ns[$nstart]}" "$killed_log")" -gt "$earliest" ]
	}
	while kill -0 "$loader" 2>/dev/null &&
		{ [ "$(wc -l <"$TMP/ack.$r")" -lt "$target" ] || ! covered; }; do
		sleep 0.01
	done
	# A load done sooner (a fast machine) is killed idle, once it is covered.
	for _ in $(seq 1 1000); do
		covered && break
		sleep 0.01
	done
	kill -9 "$MC_PID"
	kill_ns=$(date +%s%N)   # after the kill: no set is acknowledged later
	wait "$MC_PID" 2>/dev/null
	wait "$loader"
	# Every set acknowledged before the newest quiescent point the runtime
	# made durable before the kill must be there: what it promised, derived
	# from its own epoch log, however late its epochs ran (the time rule of
	# interval + margin failed on a loaded machine for an epoch that lagged,
	# not for a lost one).  The rule of at most one period is measured
	# below (crash_loss loss), not required.
	cutoff[$r]=$(( $(crash_loss horizon "${start_ns[$nstart]}" "$killed_log") - MARGIN_MS * 1000000 ))
	echo "round $r: killed $(( (kill_ns - t0) / 1000000 )) ms into the load; $(cat "$TMP/load.$r")"
	from=$(( $(wc -l <"$LOG") + 1 ))
	start || { fail=1; break; }
	check_log "$from"
	verify_all "$r"
	case $last_verify in
	*" required=0 "*)
		note "FAIL: round $r: no acknowledged set was old enough for the durability check" \
			"(no epoch was durable 300 ms into the load before it ended; see KEYS)"
		fail=1 ;;
	esac
	crash_loss loss "$kill_ns" "$killed_log" "$last_verify" "$TMP/loss-windows"
done
[ $fail -eq 0 ] && crash_loss worst "$TMP/loss-windows"

if [ $fail -eq 0 ]; then
	echo "clean stop and restart:"
	stop_server TERM
	from=$(( $(wc -l <"$LOG") + 1 ))
	start || fail=1
	check_log "$from"
	[ $fail -eq 0 ] && verify_all "$ROUNDS"
	stop_server TERM
	# the medium's backend ran (tools/pool-medium.sh): pmem, or the log on a disk
	if ! grep -q "\"nvm\": \"$POOL_MEDIUM_BACKEND\"" "$TMP/stats.$nstart.json"; then
		note "FAIL: the server did not run on the $POOL_MEDIUM_BACKEND backend:" \
			"$(grep '"nvm"' "$TMP/stats.$nstart.json" 2>&1)"
		fail=1
	fi
fi

if [ $fail -eq 0 ]; then
	echo "crash-test: PASS"
	exit 0
fi
[ -n "${KEEP_TMP:-}" ] && note "pool and logs kept in $TMP"
echo "crash-test: FAIL"
exit 1
