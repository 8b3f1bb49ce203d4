#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Many kill -9 / recover rounds of examples/bank under both trackers (the long
# form of the `kill` test): every round checks the invariants and that at most
# about one interval of work was lost, and the summary prints how much work a
# crash lost (p50/p90/max, in ms of the program's progress).
#   bench/kill_loop.sh [BUILD_DIR] [ROUNDS]   (BUILD_DIR: build/ beside bench/ by default)
# The long soak over bank, the B+tree and memcached-pmthreads (torn FASEs,
# durable work lost, lost work in achieved epoch periods) is bench/soak.sh.
set -euo pipefail
build=${1:-$(cd "$(dirname "$0")/.." && pwd)/build}
rounds=${2:-100}
PMT_KILL_ROUNDS=$rounds PMT_BANK="$build/examples/bank" "$build/tests/test_kill"
