#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# meson-test.sh -- the `memcached-crash` test of `meson test` (suite
# memcached): a bounded crash-test.sh of memcached-pmthreads (built by the
# meson option -Dmemcached) under each write tracker.
#
# usage: meson-test.sh MEMCACHED_PMTHREADS
# Exit status: 0 pass, 1 fail.
# environment: MC_TEST_TRACKERS (the trackers to run: "auto mprotect"; auto is
#   uffd where the kernel has asynchronous userfaultfd write-protect),
#   MC_TEST_ROUNDS (2), MC_TEST_KEYS (60000), MARGIN_MS (0: sets acknowledged before the
#   durable horizon of the epoch log must survive; crash-test.sh).
set -u
DEMO_DIR=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] || { echo "usage: $0 MEMCACHED_PMTHREADS" >&2; exit 2; }
BIN=$1
[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }

fail=0
for t in ${MC_TEST_TRACKERS:-auto mprotect}; do
	echo "=== crash test, tracker $t"
	# no margin: a set acknowledged before the newest quiescent point the
	# server's epoch log shows durable must survive, however late the epochs
	# ran; a wrong value or a dropped item always fails.  60,000 keys: a
	# round's load lasts past the first durable epochs, so its durability
	# check covers keys
	out=$(PMTHREADS_TRACKER=$t ROUNDS=${MC_TEST_ROUNDS:-2} KEYS=${MC_TEST_KEYS:-60000} \
		MARGIN_MS=${MARGIN_MS:-0} THREADS=4 MC_MAX_SECONDS=120 \
		"$DEMO_DIR/crash-test.sh" "$BIN" 2>&1)
	rc=$?
	echo "$out"
	[ $rc -eq 0 ] || fail=1
done
[ $fail -eq 0 ] && echo "memcached-crash: PASS" || echo "memcached-crash: FAIL"
exit $fail
