#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# soak.sh -- the long kill -9 soak: examples/bank, the persistent B+tree
# (parsec-ports/recovery/bptree_crash -c) and memcached-pmthreads (without
# and, as "memcached-commit", with output commit), each under
# both trackers (uffd, mprotect), killed with SIGKILL at random moments
# (start-up, recovery and steady state) and checked after every recovery:
#   torn FASEs        bank: money conserved and ledger == accounts' counters;
#                     B+tree: structure check, keys match values, each
#                     thread's survivors a prefix; memcached: no wrong value,
#                     no incomplete item dropped by recovery.  Must be 0.
#   durable work lost anything acknowledged before the last epoch that
#                     completed before the kill (its PMTHREADS_EPOCH_LOG line)
#                     is there; bank and B+tree also by the durable epoch
#                     (pmthreads_durable_epoch advanced by 2).  Must be 0.
#                     memcached: a missing key memcached evicted (named by
#                     `watch evictions`, or counted by `stats` unnamed) is
#                     "evicted_loss" instead; it runs with -M (no evictions
#                     but the slab mover's) unless --mc-evict.
#   acked_lost        memcached-commit (PMTHREADS_OUTPUT=commit): every set
#                     whose "STORED" the client read, before the kill or
#                     after it from what the server had sent, must be back
#                     (no cutoff); each crash losing one counts in
#                     durable_lost, its keys in acked_lost.  Must be 0.
#                     Also the wait for "STORED" (ack_p50/p99_ms).  Its load
#                     pipelines: --mc-conns connections x --mc-window sets.
#                     --commit-output off: the same check without the hold
#                     (the proof that it fails; meson test
#                     memcached-commit-soak runs both).
#   lost work         per crash, in ms and in achieved epoch periods (the
#                     killed run's last period_us values): p50/p99/max.
# Pools on /dev/shm with PMEM_IS_PMEM_FORCE=1 (--nvm msync or log --pool-dir
# DIR for a disk file with msync or the log backend).  Bounded: stops after --kills in total (split
# evenly over the streams) or --seconds / --deadline HH:MM (UTC), whichever
# comes first; runs at nice 19 (SOAK_NICE to change).
#
#   bench/soak.sh [--build DIR] [--kills N] [--seconds S] [--deadline HH:MM]
#                 [--programs bank,bptree,memcached,memcached-commit]
#                 [--trackers uffd,mprotect]
#                 [--interval-ms 50] [--kill-min-ms 10] [--kill-max-ms 500]
#                 [--jobs 2] [--reset-every 40] [--json OUT] [--workdir DIR]
#                 [--mc-verify-all] [--mc-evict] [--self-test]
#                 [--commit-output commit|off] [--mc-conns 4] [--mc-window 4]
# memcached-pmthreads must be built first:
#   memcached-demo/fetch-and-build.sh -B BUILD_DIR
# (or --programs bank,bptree).  Prints a Markdown table; exit status 0 when no
# torn FASE, no durable loss and no error was found, 1 otherwise, 2 bad usage.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "soak.sh: python3 not found (apt-get install python3)" >&2; exit 2; }
exec nice -n "${SOAK_NICE:-19}" python3 "$here/soak.py" "$@"
