#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# soak-commit-test.sh -- `meson test memcached-commit-soak` (suite memcached):
# a short soak of memcached-pmthreads with output commit (bench/soak.sh
# --programs memcached-commit), which checks that every set whose "STORED"
# the client read is back after each kill -9 and recovery.
#   1. with the hold disabled (--commit-output off: PMTHREADS_OUTPUT=off) the
#      same check must report acknowledged sets lost -- the check can fail;
#   2. with output commit it must report none: 0 acknowledged lost, 0 torn,
#      no error, and sets were acknowledged at all.
# Both under every tracker this kernel has (uffd where it supports it).
#
# usage: soak-commit-test.sh BUILD_DIR MEMCACHED_PMTHREADS
# environment: SOAK_COMMIT_KILLS (30: kills with the hold, over the
#   trackers), SOAK_COMMIT_OFF_KILLS (6: without it), SOAK_NICE (19).
# Exit status: 0 pass, 1 fail, 77 skip.
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR MEMCACHED_PMTHREADS" >&2; exit 2; }
build=$1
mc=$2
[ -x "$mc" ] || { echo "FAIL: $mc not built (meson setup -Dmemcached=enabled)"; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: python3 not found (apt-get install python3)"; exit 77; }
# POOL_MEDIUM_DIR, PMEM_IS_PMEM_FORCE, POOL_MEDIUM_BACKEND: PMT_POOL_MEDIUM's
# choice (pmem on /dev/shm, or the log backend on a disk)
. "$here/../tools/pool-medium.sh"
tmp=$(mktemp -d "$POOL_MEDIUM_DIR/pmt-soak-commit.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# uffd when this kernel has it: under PMTHREADS_STRICT a server whose tracker
# cannot start exits at once; one that is still running after 3 s started.
trackers=mprotect
user=()
[ "$(id -u)" = 0 ] && user=(-u root)
PMTHREADS_STRICT=1 PMTHREADS_TRACKER=uffd PMTHREADS_POOL="$tmp/probe.pool" \
	PMTHREADS_POOL_SIZE=64M \
	timeout 3 "$mc" -s "$tmp/probe.sock" -U 0 "${user[@]}" >"$tmp/probe.log" 2>&1
if [ $? -eq 124 ]; then
	trackers=uffd,mprotect
else
	echo "note: the uffd tracker does not start here, mprotect only: $(tail -c 300 "$tmp/probe.log")"
fi
rm -f "$tmp/probe.pool" "$tmp/probe.sock"

# soak RUN_NAME ARGS...: runs the soak, leaves its JSON in $tmp/RUN_NAME.json
soak() {
	local name=$1
	shift
	echo "=== $name: bench/soak.sh --programs memcached-commit --trackers $trackers $*"
	SOAK_NICE=${SOAK_NICE:-19} "$here/soak.sh" --build "$build" --memcached "$mc" \
		--programs memcached-commit --trackers "$trackers" --jobs 1 --seconds 240 \
		--workdir "$tmp/$name" --json "$tmp/$name.json" --nvm "$POOL_MEDIUM_BACKEND" "$@"
	echo "(soak exit status $?)"
}

# field NAME KEY: the "all" row's KEY of run NAME
field() {
	python3 -c 'import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
print(rows[-1][sys.argv[2]])' "$tmp/$1.json" "$2"
}

fail=0
soak off --kills "${SOAK_COMMIT_OFF_KILLS:-6}" --commit-output off
off_lost=$(field off acked_lost) || off_lost=-1
if [ "$off_lost" -gt 0 ] 2>/dev/null; then
	echo "ok: without the hold the check finds $off_lost acknowledged sets lost"
else
	echo "FAIL: without the hold the check found no acknowledged set lost ($off_lost):" \
		"it cannot tell output commit from none"
	fail=1
fi

soak commit --kills "${SOAK_COMMIT_KILLS:-30}"
for k in acked_lost durable_lost torn errors acked checked; do
	eval "on_$k=\$(field commit $k)" || eval "on_$k=-1"
done
if [ "$on_acked_lost" = 0 ] && [ "$on_durable_lost" = 0 ] && [ "$on_torn" = 0 ] &&
	[ "$on_errors" = 0 ] && [ "$on_acked" -gt 0 ] 2>/dev/null && [ "$on_checked" -gt 0 ]; then
	echo "ok: with output commit $on_acked acknowledged sets over $on_checked checked" \
		"recoveries, none lost, none torn"
else
	echo "FAIL: with output commit: acknowledged lost $on_acked_lost, durable lost" \
		"$on_durable_lost, torn $on_torn, errors $on_errors, acknowledged $on_acked," \
		"checked $on_checked"
	fail=1
fi
[ $fail -eq 0 ] && echo "memcached-commit-soak: PASS" || echo "memcached-commit-soak: FAIL"
exit $fail
