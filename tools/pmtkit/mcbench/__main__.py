# SPDX-License-Identifier: BSD-3-Clause
"""python3 -m pmtkit.mcbench ARGV0 [ARG...]: bench.sh's body; ARGV0 is the
command the user typed (for messages and cmd.txt)."""
import sys

from pmtkit.mcbench.main import main

if len(sys.argv) < 2:
    sys.exit("usage: python3 -m pmtkit.mcbench ARGV0 [ARG...] (run memcached-demo/bench.sh)")
main(sys.argv[1], sys.argv[2:])
