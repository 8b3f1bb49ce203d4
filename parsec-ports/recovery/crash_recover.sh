#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# crash_recover.sh -- the crash/recovery experiment: for each persistence
# interval, insert into the pmthreads B+tree (bptree_crash) for a fixed time,
# kill -9 it, restart it in recover mode and report how many acknowledged
# inserts survived, how long recovery took and how big the pool is.  The same
# is done once with the libpmemobj build for comparison (every acknowledged
# insert there is a committed transaction, so nothing should be lost).
#
#   crash_recover.sh [-b BUILD_DIR] [-s SECONDS] [-t THREADS]
#                    [-i "10 100 500"] [-o OUT.csv] [-k]
#
#   -b  meson build directory (default: build/ at the top of the source tree
#       this script is in)
#   -s  seconds of inserting before the kill (default 2)
#   -t  inserting threads (default 2)
#   -i  PMTHREADS_INTERVAL_MS values (default "10 100 500")
#   -o  also write the rows as CSV to this file
#   -k  keep the pool directory (printed) instead of removing it
#
# Columns: inserted = the last count the program had printed (it prints every
# 10 ms, flushed) before the kill; recovered = keys in the verified recovered
# tree; lost = inserted - recovered (0 when the tree holds more than the last
# printed count: inserts acknowledged after that print survived too);
# recovery_ms = from just before exec of the restarted process until the tree
# was verified; rt_recovery_ms = the runtime's own "recovery_ns" from
# PMTHREADS_STATS; pool_MiB = pool file size; used_MiB = pages the pool really
# occupies in /dev/shm.  asked_ms = PMTHREADS_INTERVAL_MS; period_ms = the
# period the killed run achieved: the median of the period_us column of its
# PMTHREADS_EPOCH_LOG (time from one quiescent point's start to the next),
# and period_last_ms the median of its last 5 epochs (the tree, and with it
# the pages an epoch dirties, grows during the run).  The achieved period,
# not the asked one, bounds what a crash can lose.
set -eu

build=
seconds=2
threads=2
intervals="10 100 500"
csv=
keep=no
while getopts b:s:t:i:o:k opt; do
    case $opt in
        b) build=$OPTARG ;;
        s) seconds=$OPTARG ;;
        t) threads=$OPTARG ;;
        i) intervals=$OPTARG ;;
        o) csv=$OPTARG ;;
        k) keep=yes ;;
        *) sed -n '3,19p' "$0" >&2; exit 2 ;;
    esac
done
if [ -z "$build" ]; then
    # parsec-ports/recovery/ -> the source tree's top -> its build/
    here=$(cd "$(dirname "$0")" && pwd)
    build=$here/../../build
fi
if [ ! -d "$build" ]; then
    echo "crash_recover.sh: no build directory $build; give one with -b BUILD_DIR" >&2
    exit 2
fi
exe_pmthreads=$build/parsec-ports/recovery/bptree_crash
exe_pmemobj=$build/parsec-ports/recovery/bptree_crash_pmemobj

work=$(mktemp -d /dev/shm/pmthreads-recovery.XXXXXX)
cleanup() {
    if [ "$keep" = yes ]; then echo "pools kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

export PMEM_IS_PMEM_FORCE=1
tools=$(cd "$(dirname "$0")/../../tools" && pwd)

# The table and CSV rows: tools/pmtkit/recovery_row.py (it reads each run's
# directory: outputs, PMTHREADS_STATS, epoch log, pool).
row() {
    PYTHONPATH=$tools python3 -B -m pmtkit.recovery_row "$@"
}
row --header
[ -n "$csv" ] && row --csv-header >"$csv"

# one_run BACKEND INTERVAL EXE: the experiment once; prints a table row.
one_run() {
    backend=$1 interval=$2 exe=$3
    dir=$work/$backend-$interval
    mkdir -p "$dir"
    pool=$dir/pool
    # A fresh pool per run; the pmthreads runtime takes its pool from the
    # environment, the pmemobj build from -P.
    PMTHREADS_POOL=$pool PMTHREADS_POOL_SIZE=${PMTHREADS_POOL_SIZE:-1G} \
        PMTHREADS_INTERVAL_MS=$interval PMTHREADS_EPOCH_LOG=$dir/epochs.csv STRESS_POOL_SIZE=256 \
        "$exe" -t "$threads" -P "$pool" >"$dir/run.out" 2>"$dir/run.err" &
    pid=$!
    sleep "$seconds"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    PMTHREADS_POOL=$pool PMTHREADS_POOL_SIZE=${PMTHREADS_POOL_SIZE:-1G} \
        PMTHREADS_INTERVAL_MS=$interval PMTHREADS_STATS=$dir/stats.json \
        STRESS_T0_NS=$(date +%s%N) \
        "$exe" -r -P "$pool" >"$dir/recover.out" 2>"$dir/recover.err" || true
    row "$dir" "$backend" "$interval" "$threads" "$seconds" "$csv"
    rm -f "$pool"
}

if [ -x "$exe_pmthreads" ]; then
    for interval in $intervals; do
        one_run pmthreads "$interval" "$exe_pmthreads"
    done
else
    echo "($exe_pmthreads not built: the pmthreads rows are skipped)" >&2
fi
if [ -x "$exe_pmemobj" ]; then
    one_run pmemobj - "$exe_pmemobj"
else
    echo "($exe_pmemobj not built: the pmemobj row is skipped)" >&2
fi
