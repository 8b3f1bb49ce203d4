#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Build (if needed) and run bench_locks against the library of a build dir.
#   bench/run_bench_locks.sh [BUILDDIR] [bench_locks options...]
# BUILDDIR defaults to build/ at the top of the source tree this script is in.
set -eu
builddir=${1:-$(cd "$(dirname "$0")/.." && pwd)/build}
[ $# -gt 0 ] && shift
ninja -C "$builddir" bench/bench_locks preload/libpmthreads.so.0.1.0 >/dev/null
exec "$builddir/bench/bench_locks" --lib "$(realpath "$builddir/preload/libpmthreads.so")" "$@"
