#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run-t-suite.sh -- memcached's own test suite (t/*.t, run with prove) against
# memcached-pmthreads and against stock memcached under the preload.
#
# usage: run-t-suite.sh [-B PMTHREADS_BUILD_DIR] [-o OUT_DIR] [-j JOBS]
#                       [-m "MODES"] [-t "TRACKERS"] [TEST_FILE...]
#   MODES     any of: pmthreads  memcached-pmthreads-debug (the patched debug
#                                build: the cache in the pmthreads heap)
#                     stock      memcached-stock-debug (unpatched) under
#                                LD_PRELOAD=libpmthreads.so PMTHREADS_HEAP=malloc
#                     native     memcached-stock-debug without pmthreads (the
#                                baseline: what passes on this machine at all)
#             default "pmthreads stock"
#   TRACKERS  PMTHREADS_TRACKER values, default "uffd mprotect" (native: one run)
#   TEST_FILE names under t/ (e.g. restart.t 64bit.t); default: all
#   -j        test files run in parallel (default 2)
# The binaries come from fetch-and-build.sh (run here, with -S for stock and
# native; idempotent).
# Output in OUT_DIR (default <build>/memcached-demo/t-suite-<date>):
#   results.csv  mode,tracker,file,result,detail   (result: pass, fail, skip)
#   summary.md   one row per file, one column per mode/tracker
#   logs/MODE-TRACKER/FILE.log  prove -v output of each file
# Every server a test starts gets its own pool on /dev/shm (unless -e names
# one), PMEM_IS_PMEM_FORCE=1 -- or with PMT_POOL_MEDIUM=disk in PMT_DISK_DIR
# (default /var/tmp), the log backend (tools/pool-medium.sh); the pools are
# removed after each file.
# Exit status: 0 every file passed or was skipped, or failed only as listed in
# EXPECTED_FAIL in tools/pmtkit/t_suite.py; 1 another failure; 2 setup error.
set -u
DEMO_DIR=$(cd "$(dirname "$0")" && pwd)
SRC_DIR=$(cd "$DEMO_DIR/.." && pwd)

die() { echo "run-t-suite.sh: error: $*" >&2; exit 2; }
note() { echo "run-t-suite.sh: $*" >&2; }

PM_BUILD=$SRC_DIR/build
OUT=""
JOBS=2
MODES="pmthreads stock"
TRACKERS="uffd mprotect"
while getopts "B:o:j:m:t:h" opt; do
	case $opt in
	B) PM_BUILD=$OPTARG ;;
	o) OUT=$OPTARG ;;
	j) JOBS=$OPTARG ;;
	m) MODES=$OPTARG ;;
	t) TRACKERS=$OPTARG ;;
	h) sed -n '3,27p' "$0"; exit 0 ;;
	*) die "usage: $0 [-B BUILD] [-o OUT] [-j JOBS] [-m MODES] [-t TRACKERS] [FILE...]" ;;
	esac
done
shift $((OPTIND - 1))
PM_BUILD=$(cd "$PM_BUILD" 2>/dev/null && pwd) || die "no build directory $PM_BUILD"
LIB=$PM_BUILD/preload/libpmthreads.so
[ -f "$LIB" ] || die "$LIB not found: build pmthreads first"
command -v prove >/dev/null || die "prove not found (Debian package perl)"
for m in $MODES; do
	case $m in pmthreads|stock|native) ;; *) die "unknown mode $m" ;; esac
done

MC=$PM_BUILD/memcached-demo
stock_opt=""
case " $MODES " in *" stock "*|*" native "*) stock_opt=-S ;; esac
"$DEMO_DIR/fetch-and-build.sh" -B "$PM_BUILD" -o "$MC" $stock_opt >/dev/null 2>"$MC/t-suite-build.log" ||
	{ cat "$MC/t-suite-build.log" >&2; die "fetch-and-build.sh failed"; }
SRC=$(ls -d "$MC"/memcached-[0-9]*/ | head -n 1)
SRC=${SRC%/}
[ -d "$SRC/t" ] || die "memcached's t/ not found in $MC"

[ -n "$OUT" ] || OUT=$MC/t-suite-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT/logs" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
# POOL_MEDIUM_DIR, PMEM_IS_PMEM_FORCE: PMT_POOL_MEDIUM's choice
. "$SRC_DIR/tools/pool-medium.sh"
SCRATCH=$(mktemp -d "$POOL_MEDIUM_DIR/mc-t-suite.XXXXXX") || die "mktemp failed"
trap 'rm -rf "$SCRATCH"' EXIT

FILES=("$@")
[ $# -gt 0 ] || read -ra FILES <<<"$(cd "$SRC/t" && echo *.t)"

# A directory that looks like memcached's build tree to t/lib/MemcachedTest.pm
# (it runs ./memcached-debug and ./timedrun from the current directory): t/ is
# the source's, memcached-debug a wrapper that gives each server its own pool.
# make_tree DIR MODE TRACKER
make_tree() {
	local dir=$1 mode=$2 tracker=$3 bin env
	mkdir -p "$dir/pools"
	ln -sfn "$SRC/t" "$dir/t"
	cp -f "$MC/timedrun" "$dir/timedrun"
	case $mode in
	pmthreads) bin=$MC/memcached-pmthreads-debug; env="" ;;
	stock) bin=$MC/memcached-stock-debug; env="LD_PRELOAD=$LIB PMTHREADS_HEAP=malloc" ;;
	native) bin=$MC/memcached-stock-debug; env="" ;;
	esac
	if [ "$mode" = native ]; then
		ln -sfn "$bin" "$dir/memcached-debug"
		return
	fi
	cat >"$dir/memcached-debug" <<EOF
#!/bin/sh
# run-t-suite.sh: $mode, tracker $tracker; a pool per server (-e overrides it
# in memcached-pmthreads)
exec env $env PMTHREADS_TRACKER=$tracker ${PMEM_IS_PMEM_FORCE:+PMEM_IS_PMEM_FORCE=$PMEM_IS_PMEM_FORCE} \\
	PMTHREADS_POOL="\$(mktemp -u "$dir/pools/pool.XXXXXX")" "$bin" "\$@"
EOF
	chmod +x "$dir/memcached-debug"
}

# run_file DIR FILE LOG: prints "pass", "skip: why" or "fail: what"
run_file() {
	local dir=$1 f=$2 log=$3 rc
	(cd "$dir" && timeout 900 prove -v "t/$f") >"$log" 2>&1
	rc=$?
	rm -rf "$dir/pools"/* 2>/dev/null
	t_suite verdict "$f" "$log" "$rc"
}
# the verdicts, results.csv's rows and summary.md: tools/pmtkit/t_suite.py
t_suite() {
	PYTHONPATH=$TOOLS python3 -B -m pmtkit.t_suite "$@"
}
export -f run_file t_suite
export TOOLS=$SRC_DIR/tools

CSV=$OUT/results.csv
echo "mode,tracker,file,result,detail" >"$CSV"
unexpected=0
for mode in $MODES; do
	trs=$TRACKERS
	[ "$mode" = native ] && trs=none
	for tr in $trs; do
		tag=$mode-$tr
		dir=$SCRATCH/$tag
		make_tree "$dir" "$mode" "$tr"
		mkdir -p "$OUT/logs/$tag"
		note "$tag: ${#FILES[@]} files, $JOBS at a time"
		t0=$(date +%s)
		printf '%s\n' "${FILES[@]}" |
			xargs -P "$JOBS" -I{} bash -c 'r=$(run_file "$1" "$2" "$3"); printf "%s\t%s\n" "$2" "$r"' _ \
				"$dir" {} "$OUT/logs/$tag/{}.log" >"$OUT/$tag.tsv"
		t_suite collect "$OUT/$tag.tsv" "$mode" "$tr" "$CSV" "$(($(date +%s) - t0))" || unexpected=1
		rm -f "$OUT/$tag.tsv"
	done
done

t_suite summary "$CSV" >"$OUT/summary.md"
cat "$OUT/summary.md" | tail -n "$(echo $MODES $TRACKERS | wc -w)"
note "results: $OUT/results.csv, $OUT/summary.md, logs in $OUT/logs"
exit $unexpected
