#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bank_ab.sh -- examples/bank of several builds in paired alternating rounds:
# each round runs every build once, so a slow phase of a shared machine hits
# all of them.  Prints per run the transfers made and the write-back's time
# per dirty page (PMTHREADS_STATS persist_ns / pages_persisted), the bytes
# the pool's backend sent to storage per line it wrote (device_bytes /
# lines_written) and its device flushes per published epoch, then per build
# the medians and the median paired ratio of transfers to the first.
#
#   ROUNDS=10 [MEDIUM=disk] bench/bank_ab.sh NAME=BUILD_DIR NAME=BUILD_DIR ...
#
# MEDIUM=pmem (default): pools on /dev/shm with PMEM_IS_PMEM_FORCE=1 (emulated
# persistent memory); MEDIUM=disk: pools in $DISK_DIR (/var/tmp), an ordinary
# file (the log backend).  A new 1 GiB pool per run; BANK_ARGS ("-t 2 -s 4
# -n 1000000") is what each run does.
set -eu
ROUNDS=${ROUNDS:-5}
BANK_ARGS=${BANK_ARGS:--t 2 -s 4 -n 1000000}
MEDIUM=${MEDIUM:-pmem}
case $MEDIUM in
pmem) base=/dev/shm force=1 ;;
disk) base=${DISK_DIR:-/var/tmp} force= ;;
*) echo "$0: MEDIUM=$MEDIUM: pmem or disk" >&2; exit 2 ;;
esac
[ $# -ge 1 ] || { echo "usage: ROUNDS=N $0 NAME=BUILD_DIR ..." >&2; exit 2; }
for nb in "$@"; do
	[ -x "${nb#*=}/examples/bank" ] || { echo "$0: ${nb#*=}/examples/bank: not built" >&2; exit 2; }
done
dir=$(mktemp -d "$base/bank-ab.XXXXXX")
trap 'rm -rf "$dir"' EXIT
out=$dir/results
for i in $(seq 1 "$ROUNDS"); do
	for nb in "$@"; do
		name=${nb%%=*} build=${nb#*=}
		rm -f "$dir/pool"
		# shellcheck disable=SC2086
		line=$(env ${force:+PMEM_IS_PMEM_FORCE=1} PMTHREADS_POOL="$dir/pool" PMTHREADS_POOL_SIZE=1G \
			PMTHREADS_STATS="$dir/stats.json" "$build/examples/bank" $BANK_ARGS 2>&1 |
			grep -E "accounts, [0-9]+ transfers" | tail -1)
		python3 - "$i" "$name" "$line" "$dir/stats.json" >>"$out" <<'PY'
import json, re, sys
i, name, line, stats = sys.argv[1:]
t = re.search(r"accounts, (\d+) transfers", line)
d = json.load(open(stats))
print(i, name, t.group(1) if t else 0, d["persist_ns"] / max(d["pages_persisted"], 1),
      d.get("device_bytes", 0) / max(d["lines_written"], 1),
      d.get("device_flushes", 0) / max(d["epochs_persisted"], 1))
PY
		tail -1 "$out" | awk '{printf "round %s %s: %s transfers, %.0f ns per page written back, %.0f device bytes per line written, %.2f device flushes per epoch\n", $1, $2, $3, $4, $5, $6}'
	done
done
python3 - "$out" "${1%%=*}" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
base = sys.argv[2]
by = {}
for i, name, t, ns, dev, fl in rows:
    by.setdefault(name, {})[i] = (int(t), float(ns), float(dev), float(fl))
for name, runs in by.items():
    line = f"{name}: transfers median {st.median(v[0] for v in runs.values()):,.0f}, " \
           f"ns per page median {st.median(v[1] for v in runs.values()):.0f}, " \
           f"device bytes per line {st.median(v[2] for v in runs.values()):.0f}, " \
           f"flushes per epoch {st.median(v[3] for v in runs.values()):.2f}"
    if name != base:
        r = sorted(runs[i][0] / by[base][i][0] for i in runs if i in by[base] and by[base][i][0])
        line += f", paired ratio to {base}: median {st.median(r):.2f}x ({r[0]:.2f}-{r[-1]:.2f})"
    print(line)
PY
