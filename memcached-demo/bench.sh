#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench.sh -- memcached throughput: native vs pmthreads; and the cost of
# output commit side by side with Redis (issue 24).
#
# usage: bench.sh [--quick] [OUT_DIR]          the interval sweep (below)
#        bench.sh --cost [--quick] [OUT_DIR]   the cost table (after the sweep's
#                                              description)
# --quick: a smoke run of either (seconds, not minutes; its figures mean little).
# OUT_DIR defaults to <build>/memcached-demo/bench-<date> (cost-<date>).
#
# The bench is tools/pmtkit/mcbench/: its __init__.py describes both runs,
# their environment (DURATION, REPEATS, ROUNDS, LOADS, CONFIGS, ...) and
# their output; options.py reads them, sweep.py and cost.py run them.
set -u
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "bench.sh: error: python3 is needed (apt-get install python3)" >&2; exit 2; }
exec env PYTHONPATH="$here/../tools${PYTHONPATH:+:$PYTHONPATH}" python3 -B -m pmtkit.mcbench "$0" "$@"
