#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Fuzz everything that reads a pool file (fuzz/fuzz_pool.c) for SECONDS.
#
# usage: fuzz/run.sh SECONDS [FUZZER_OPTIONS...]
#
# Builds the harness with clang, ASan and UBSan in build-fuzz/ (meson option
# fuzz), makes a seed corpus from real programs' pools (bank and
# persist_structs of a plain build, build-fuzz-seeds/, clean exits and
# kill -9 at random moments; nothing binary is kept in the tree), and runs
# libFuzzer at nice 19.  The corpus grows in build-fuzz/fuzz-corpus across
# runs; a crash, hang or sanitizer report leaves its input in
# build-fuzz/fuzz-artifacts/ and the script exits non-zero.
set -eu
secs=${1:?usage: fuzz/run.sh SECONDS [FUZZER_OPTIONS...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
fb=$root/build-fuzz
sb=$root/build-fuzz-seeds

if [ ! -d "$fb" ]; then
	CC=clang CXX=clang++ meson setup "$fb" "$root" -Dfuzz=true -Dtests=false -Dbench=false \
		-Dparsec=false -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C "$fb" fuzz/fuzz_pool >/dev/null
if [ ! -d "$sb" ]; then
	meson setup "$sb" "$root" -Dtests=true -Dbench=false -Dparsec=false >/dev/null
fi
ninja -C "$sb" examples/bank tests/persist_structs >/dev/null

seeds=$fb/fuzz-seeds
corpus=$fb/fuzz-corpus
art=$fb/fuzz-artifacts
mkdir -p "$seeds" "$corpus" "$art"
if [ -z "$(ls -A "$seeds")" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	bank=$sb/examples/bank
	ps=$sb/tests/persist_structs
	export PMTHREADS_POOL_SIZE=1M PMTHREADS_INTERVAL_MS=5
	PMTHREADS_POOL=$tmp/fresh.pool "$bank" -t 1 -s 0 -n 1 >/dev/null 2>&1 || true
	PMTHREADS_POOL=$tmp/bank.pool "$bank" -t 2 -s 1 -n 64 >/dev/null 2>&1 || true
	PMTHREADS_POOL=$tmp/structs.pool "$ps" build 40 60 exit >/dev/null 2>&1 || true
	PMTHREADS_POOL=$tmp/structs-kill.pool "$ps" build 30 30 kill >/dev/null 2>&1 || true
	i=0
	for ms in 7 23 61 150 400; do
		i=$((i + 1))
		PMTHREADS_POOL=$tmp/bank-kill$i.pool "$bank" -t 3 -s 5 -n 200 >/dev/null 2>&1 &
		pid=$!
		sleep "$(awk "BEGIN { print $ms / 1000 }")"
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	for p in "$tmp"/*.pool; do
		[ -s "$p" ] || continue
		python3 "$root/fuzz/pool2seed.py" "$p" "$seeds/$(basename "$p" .pool)"
		python3 "$root/fuzz/pool2seed.py" --reseal "$p" "$seeds/$(basename "$p" .pool)-reseal"
	done
	# A format-3 pool (the same layout; the harness reseals its header) for
	# pmthreads-recover upgrade's path.
	python3 -c 'import struct, sys
f = open(sys.argv[1], "r+b"); f.seek(8); f.write(struct.pack("<I", 3))' "$tmp/bank.pool" &&
		python3 "$root/fuzz/pool2seed.py" --reseal "$tmp/bank.pool" "$seeds/bank-v3-reseal"
fi

# A UBSan report must stop the run like an ASan one (UBSan alone would print
# it and go on, unseen with the target's stderr closed).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
start=$(date +%s)
status=0
nice -n 19 "$fb/fuzz/fuzz_pool" -max_total_time="$secs" -max_len=65536 -timeout=20 \
	-rss_limit_mb=4096 -close_fd_mask=3 -artifact_prefix="$art/" -print_final_stats=1 \
	"$@" "$corpus" "$seeds" || status=$?
echo "fuzz/run.sh: ran $(( $(date +%s) - start )) s, exit $status; findings in $art:" >&2
ls -l "$art" >&2
exit $status
