# SPDX-License-Identifier: BSD-3-Clause
"""pmtkit -- the Python the project's scripts share (standard library only).

  percentile.py         the one percentile definition (nearest rank)
  epoch_log.py          reading a PMTHREADS_EPOCH_LOG, a line cut by a kill included
  memcached_client.py   a memcached text-protocol client
  scratch.py            temporary directories for pools (on /dev/shm; the tests'
                        PMT_POOL_MEDIUM=disk puts them in PMT_DISK_DIR)
  ports.py              a free loopback port for a test server
  recovery_row.py       parsec-ports/recovery/crash_recover.sh's table and CSV rows
  cpu_split.py          memcached-demo/cpu-split.sh's sample classes, medians, table
  t_suite.py            memcached-demo/run-t-suite.sh's verdicts, rows, summary
  crash_loss.py         memcached-demo/crash-test.sh's loss report
  posix_conformance.py  tools/posix-conformance's command line, results, table
  soak/                 the kill -9 soak behind bench/soak.sh, one module per program
  mcbench/              memcached-demo/bench.sh: the interval sweep and the cost table

Its Python users (bench/soak.py, memcached-demo/*.py, parsec-ports/harness/)
put tools/ on sys.path and import it from there; see pmtkit_path in each.
The shell scripts run a module with PYTHONPATH=<src>/tools python3 -B -m
pmtkit.NAME (bench.sh: pmtkit.mcbench); each module's docstring shows its
command line.
"""
