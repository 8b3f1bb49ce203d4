#!/usr/bin/env bash
# meson-test.sh -- the `memcached-crash` test of `meson test` (suite
# memcached): build memcached-pmthreads against this build's libpmthreads
# (fetch-and-build.sh; the source package comes from the machine's apt
# sources), then run a bounded crash-test.sh under each write tracker.
#
# usage: meson-test.sh PMTHREADS_BUILD_DIR OUT_DIR
# Exit status: 0 pass, 1 fail, 77 skip (the source cannot be fetched -- no
# network -- or the build tools/libraries are missing).
# environment: MC_TEST_TRACKERS (the trackers to run: "auto mprotect"; auto is
#   uffd where the kernel has asynchronous userfaultfd write-protect),
#   MC_TEST_ROUNDS (2), MC_TEST_KEYS (20000).
set -u
DEMO_DIR=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] || { echo "usage: $0 PMTHREADS_BUILD_DIR OUT_DIR" >&2; exit 2; }
BUILD=$1 OUT=$2

"$DEMO_DIR/fetch-and-build.sh" -B "$BUILD" -o "$OUT" >"$OUT.build.log" 2>&1
rc=$?
cat "$OUT.build.log"
case $rc in
0) ;;
3) echo "SKIP: the memcached source package cannot be fetched (no network?)"; exit 77 ;;
*)
	if grep -q "error: missing:" "$OUT.build.log"; then
		echo "SKIP: build dependencies missing"
		exit 77
	fi
	echo "FAIL: memcached-pmthreads did not build"
	exit 1 ;;
esac
BIN=$OUT/memcached-pmthreads

fail=0
for t in ${MC_TEST_TRACKERS:-auto mprotect}; do
	echo "=== crash test, tracker $t"
	# a generous margin: a loaded CI machine can delay an epoch; a wrong
	# value or a dropped item always fails
	out=$(PMTHREADS_TRACKER=$t ROUNDS=${MC_TEST_ROUNDS:-2} KEYS=${MC_TEST_KEYS:-20000} \
		MARGIN_MS=${MARGIN_MS:-400} THREADS=4 MC_MAX_SECONDS=120 \
		"$DEMO_DIR/crash-test.sh" "$BIN" 2>&1)
	rc=$?
	echo "$out"
	[ $rc -eq 0 ] || fail=1
done
[ $fail -eq 0 ] && echo "memcached-crash: PASS" || echo "memcached-crash: FAIL"
exit $fail
