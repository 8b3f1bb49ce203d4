#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# paired_counts.sh -- two builds of the runtime side by side on the same
# workloads, interleaved (the order alternates round by round), printing per
# run the counts that do not depend on machine load (pages copied in the
# pause, conflicts, carried-over write-backs from PMTHREADS_STATS; fault exceptions and context switches from
# perf stat) beside the workload's own computation time.
#
# Usage: paired_counts.sh BUILD_A BUILD_B [ROUNDS [WORKLOAD,...]]
#   BUILD_x: meson build directories with the PARSEC ports built
#   (preload/libpmthreads.so, parsec-ports/W).  Defaults: 3 rounds,
#   reverse_index,pca,dedup.  Pools go to /dev/shm (PMEM_IS_PMEM_FORCE=1).
#   Extra PMTHREADS_* settings can be exported by the caller.
set -eu
if [ $# -lt 2 ] || [ ! -d "$1" ] || [ ! -d "$2" ]; then
	echo "usage: paired_counts.sh BUILD_A BUILD_B [ROUNDS [WORKLOAD,...]]" >&2
	exit 2
fi
command -v perf >/dev/null || { echo "paired_counts.sh: needs perf (linux-perf)" >&2; exit 2; }
a=$(cd "$1" && pwd); b=$(cd "$2" && pwd)
rounds=${3:-3}
IFS=, read -r -a workloads <<< "${4:-reverse_index,pca,dedup}"
scratch=$(mktemp -d /dev/shm/paired_counts.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

one() {	# one() LABEL BUILD WORKLOAD
	local label=$1 build=$2 w=$3 d="$scratch/run"
	rm -rf "$d"; mkdir -p "$d"
	local out
	out=$(perf stat -x, -e page-faults,context-switches -o "$d/perf.txt" \
		env -u LD_PRELOAD PMEM_IS_PMEM_FORCE=1 PMTHREADS_POOL="$d/pool" PMTHREADS_POOL_SIZE=2G \
		PMTHREADS_TRACKER=uffd PMTHREADS_STATS="$d/stats.json" PMTHREADS_INTERVAL_MS=100 \
		PMTHREADS_HEAP=malloc LD_PRELOAD="$build/preload/libpmthreads.so" \
		"$build/parsec-ports/$w" -t 2 -s default 2>&1) || true
	local t pf st
	t=$(grep -o 'time=[0-9.]*' <<< "$out" | tail -1)
	pf=$(grep -v '^#' "$d/perf.txt" | grep . | awk -F, '{printf "%s=%s ", $3, $1}')
	st=$(python3 -c "
import json
d = json.load(open('$d/stats.json'))
print(' '.join(f'{k}={d[k]}' for k in ('pages_saved', 'conflict_pages', 'carried_epochs', 'pages_persisted',
                                      'pause_ns_p99', 'period_ns_p50') if k in d))" 2>/dev/null || echo "no stats")
	echo "$label $w $t $pf$st"
}

echo "# $(uptime)"
for r in $(seq 1 "$rounds"); do
	for w in "${workloads[@]}"; do
		if [ $((r % 2)) = 1 ]; then
			one A "$a" "$w"; one B "$b" "$w"
		else
			one B "$b" "$w"; one A "$a" "$w"
		fi
	done
done
echo "# $(uptime)"
