#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# crash-test.sh -- kill -9 memcached-pmthreads while it is being loaded, restart
# it on the same pool, and check what it serves.
#
# Each round: start loading keys r<round>-<i> (values a function of round and i,
# one set at a time, each acknowledgement time-stamped), kill -9 the server at
# a random moment while the client is still setting (after a random 10-90 % of
# the round's keys were acknowledged), restart it on the same pool, then check:
#   - every key acknowledged more than one interval + margin before the kill is
#     served with its value (it was durable), in this and every earlier round;
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
#   THREADS server threads (4), PMTHREADS_INTERVAL_MS (100), MARGIN_MS (100),
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
# the pool is on /dev/shm when possible: emulated pmem unless told otherwise
export PMEM_IS_PMEM_FORCE=${PMEM_IS_PMEM_FORCE:-1}
MARGIN_MS=${MARGIN_MS:-100}
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
	"interval ${PMTHREADS_INTERVAL_MS} ms + margin ${MARGIN_MS} ms"

cutoff=()     # per round: keys acknowledged before this (ns) must survive
fail=0
nstart=0
worst_periods=0   # the largest loss window over the rounds, in achieved periods (x1000)

# start: the next server, with its own epoch log (epochs.N.csv)
start() {
	nstart=$((nstart + 1))
	PMTHREADS_EPOCH_LOG=$TMP/epochs.$nstart.csv start_server "$LOG" "$PORT" "$BIN" "${ARGS[@]}"
}

# epoch_median N COLUMN: the median of a column of server N's last 10 epochs
# (9: period_us, since the previous epoch began; 8: persist_us, pause and
# write-back)
epoch_median() {
	tail -n +2 "$TMP/epochs.$1.csv" 2>/dev/null | cut -d, -f"$2" | awk '$1 > 0' | tail -n 10 |
		sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print 0 }'
}

# loss_report ROUND KILL_NS PERIOD_US VERIFY_LINE: lost acknowledged sets, and
# how far before the kill the oldest of them was acknowledged
loss_report() {
	local r=$1 kill_ns=$2 per=$3 line=$4 acked present oldest last age_us
	acked=$(echo "$line" | sed -n 's/.* acked=\([0-9]*\).*/\1/p')
	present=$(echo "$line" | sed -n 's/.* present=\([0-9]*\).*/\1/p')
	oldest=$(echo "$line" | sed -n 's/.*oldest_lost_ack_ns=\([0-9]*\).*/\1/p')
	last=$(echo "$line" | sed -n 's/.*last_ack_ns=\([0-9]*\).*/\1/p')
	if [ -z "$oldest" ] || [ "$oldest" = 0 ]; then
		echo "  loss: 0 of $acked acknowledged sets lost (last ack $(( (kill_ns - last) / 1000000 )) ms before the kill; achieved epoch period $((per / 1000)) ms)"
		return
	fi
	age_us=$(( (kill_ns - oldest) / 1000 ))
	local x1000=0
	[ "$per" -gt 0 ] && x1000=$(( age_us * 1000 / per ))
	[ $x1000 -gt $worst_periods ] && worst_periods=$x1000
	echo "  loss: $((acked - present)) of $acked acknowledged sets lost, the oldest acknowledged" \
		"$((age_us / 1000)) ms before the kill = $(printf '%d.%02d' $((x1000 / 1000)) $(( (x1000 % 1000) / 10 )))" \
		"achieved epoch periods ($((per / 1000)) ms; median pause + write-back of an epoch: $persist us)"
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
	while kill -0 "$loader" 2>/dev/null && [ "$(wc -l <"$TMP/ack.$r")" -lt "$target" ]; do
		sleep 0.01
	done
	kill -9 "$MC_PID"
	kill_ns=$(date +%s%N)   # after the kill: no set is acknowledged later
	wait "$MC_PID" 2>/dev/null
	wait "$loader"
	per=$(epoch_median "$nstart" 9)
	persist=$(epoch_median "$nstart" 8)
	cutoff[$r]=$(( kill_ns - (PMTHREADS_INTERVAL_MS + MARGIN_MS) * 1000000 ))
	echo "round $r: killed $(( (kill_ns - t0) / 1000000 )) ms into the load; $(cat "$TMP/load.$r")"
	from=$(( $(wc -l <"$LOG") + 1 ))
	start || { fail=1; break; }
	check_log "$from"
	verify_all "$r"
	loss_report "$r" "$kill_ns" "$per" "$last_verify"
done
[ $fail -eq 0 ] && echo "largest loss window: $(printf '%d.%02d' $((worst_periods / 1000)) $(( (worst_periods % 1000) / 10 ))) achieved epoch periods"

if [ $fail -eq 0 ]; then
	echo "clean stop and restart:"
	stop_server TERM
	from=$(( $(wc -l <"$LOG") + 1 ))
	start || fail=1
	check_log "$from"
	[ $fail -eq 0 ] && verify_all "$ROUNDS"
	stop_server TERM
fi

if [ $fail -eq 0 ]; then
	echo "crash-test: PASS"
	exit 0
fi
[ -n "${KEEP_TMP:-}" ] && note "pool and logs kept in $TMP"
echo "crash-test: FAIL"
exit 1
