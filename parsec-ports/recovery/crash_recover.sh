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

# value_of KEY FILE: the value of the last `KEY=value` word in FILE.
value_of() {
    grep -o "$1=[^ ]*" "$2" 2>/dev/null | tail -n 1 | cut -d= -f2
}

printf '%-9s %8s %9s %9s %10s %10s %9s %7s %11s %14s %9s %9s %s\n' backend asked_ms period_ms last_ms \
    inserted recovered lost lost_% recovery_ms rt_recovery_ms pool_MiB used_MiB check
[ -n "$csv" ] && echo "backend,interval_ms,threads,seconds,inserted,recovered,lost,lost_pct,recovery_ms,rt_recovery_ms,pool_bytes,pool_used_bytes,check,period_ms,period_last_ms" >"$csv"

# median_period EPOCH_LOG LAST: the median period_us of the log's epochs (of
# its last LAST epochs when LAST > 0) in ms; nothing without a log.
median_period() {
    [ -s "$1" ] || return 0
    awk -F, 'NR > 1 && $9 > 0 { print $9 }' "$1" | { if [ "$2" -gt 0 ]; then tail -n "$2"; else cat; fi; } |
        sort -n | awk '{ v[NR] = $1 } END { if (NR > 0) printf "%.1f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) / 1000 }'
}

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
    inserted=$(value_of inserted "$dir/run.out")
    inserted=${inserted:-0}

    PMTHREADS_POOL=$pool PMTHREADS_POOL_SIZE=${PMTHREADS_POOL_SIZE:-1G} \
        PMTHREADS_INTERVAL_MS=$interval PMTHREADS_STATS=$dir/stats.json \
        STRESS_T0_NS=$(date +%s%N) \
        "$exe" -r -P "$pool" >"$dir/recover.out" 2>"$dir/recover.err" || true
    recovered=$(value_of recovered "$dir/recover.out")
    recovered=${recovered:-0}
    recovery_ms=$(value_of recovery_ms "$dir/recover.out")
    check=$(value_of check "$dir/recover.out")
    [ -n "$check" ] || check="FAILED($(head -c 80 "$dir/recover.err" | tr '\n,' '  '))"
    rt_ns=$(grep -o '"recovery_ns": *[0-9]*' "$dir/stats.json" 2>/dev/null | grep -o '[0-9]*$' || true)
    # achieved period: median of the epoch log's period_us (column 9; 0 for
    # the first epoch, which has no predecessor), over the run and over its
    # last 5 epochs
    period_ms=$(median_period "$dir/epochs.csv" 0)
    period_last_ms=$(median_period "$dir/epochs.csv" 5)
    pool_bytes=$(stat -c %s "$pool" 2>/dev/null || echo 0)
    used_bytes=$(( $(du -k "$pool" 2>/dev/null | cut -f1 || echo 0) * 1024 ))

    awk -v b="$backend" -v i="$interval" -v t="$threads" -v s="$seconds" -v ins="$inserted" \
        -v rec="$recovered" -v rms="${recovery_ms:-nan}" -v rtns="${rt_ns:-}" \
        -v pb="$pool_bytes" -v ub="$used_bytes" -v ck="$check" -v csv="$csv" \
        -v pm="${period_ms:-}" -v pl="${period_last_ms:-}" 'BEGIN {
        lost = ins - rec; if (lost < 0) lost = 0
        pct = ins > 0 ? 100 * lost / ins : 0
        rt = rtns == "" ? "-" : sprintf("%.2f", rtns / 1e6)
        printf "%-9s %8s %9s %9s %10d %10d %9d %7.2f %11s %14s %9.1f %9.1f %s\n", b, i, (pm == "" ? "-" : pm), (pl == "" ? "-" : pl), ins, rec, lost, pct, rms, rt, pb / 1048576, ub / 1048576, ck
        if (csv != "")
            printf "%s,%s,%s,%s,%d,%d,%d,%.4f,%s,%s,%.0f,%.0f,%s,%s,%s\n", b, i, t, s, ins, rec, lost, pct, rms, (rt == "-" ? "" : rt), pb, ub, ck, pm, pl >> csv
    }'
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
