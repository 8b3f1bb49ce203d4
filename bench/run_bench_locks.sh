#!/bin/sh
# Build (if needed) and run bench_locks against the library of a build dir.
#   bench/run_bench_locks.sh [BUILDDIR] [bench_locks options...]
set -eu
builddir=${1:-build}
[ $# -gt 0 ] && shift
ninja -C "$builddir" >/dev/null
exec "$builddir/bench/bench_locks" --lib "$(realpath "$builddir/preload/libpmthreads.so")" "$@"
