# SPDX-License-Identifier: BSD-3-Clause
"""pmtkit.soak -- the long kill -9 soak (bench/soak.sh runs it; see its header).

Streams: one per (program, tracker).  Each stream runs its program on its own
pool, kills it with SIGKILL at a random moment after exec (start-up, recovery
and steady state alike), and lets the next run of the same program recover.
After each recovery it checks:

  torn FASE        the recovered state shows part of a critical section:
                   bank: money not conserved or the ledger disagrees with the
                   accounts' transfer counters (a transfer half done);
                   bptree: bpt_check fails (structure), a key does not match
                   its value, or a thread's surviving inserts have a hole;
                   memcached: a present key with a wrong value, or recovery
                   found linked items with incomplete values ("dropped N").
  durable lost     work acknowledged as durable before the kill is missing:
                   (a) everything acknowledged before the start of the last
                   epoch that completed before the kill (the killed run's
                   PMTHREADS_EPOCH_LOG: that epoch's pause began no later than
                   t_ms - (persist_us - stage_us + pause_us), and after the
                   previous line's t_ms: the earlier of the two; mapped to the
                   driver's clock from the exec time, a lower bound of the
                   runtime's clock origin, so the check never asks too much);
                   (b) bank and bptree: a count read before a durable epoch
                   that a later progress line shows advanced by two
                   (pmthreads_durable_epoch; by one is the documented rule, see
                   "durable_rule1" in the summary).
                   memcached: a set acknowledged before (a), and every set a
                   later check found, must be there after every later crash
                   unless memcached evicted it: keys `watch evictions` named,
                   or any missing key when `stats` counted evictions it did
                   not name (the slab mover's) -- "evicted_loss", not durable
                   loss.  Runs with -M (a full cache refuses sets) unless
                   --mc-evict.
  acknowledged     memcached-commit (memcached-pmthreads with output commit,
  lost             PMTHREADS_OUTPUT=commit: a reply leaves the server once
                   the epoch holding what it answers is durable): every set
                   whose "STORED" the client read -- before the kill, or
                   after it from what the dead server had sent -- must be
                   back, no cutoff.  A crash losing one counts in durable
                   lost, the sets in acked_lost; its lost-work columns stay
                   empty.  --commit-output off runs the same check without
                   the hold, to show that it fails then.
  lost work        kill time - time the first unrecovered piece of work was
                   reported (bank/bptree: the first progress line whose count
                   exceeds what was recovered, resolution one tick; memcached:
                   the acknowledgement of the first acknowledged set that is
                   missing); 0 when everything acknowledged survived.  Also in
                   achieved epoch periods: the median period_us of the last
                   (up to 4) epochs of the killed run.

Bounded: stops after --kills kills in total or at --deadline / --seconds,
whichever comes first.  Exit status: 0 no torn FASE, no durable loss, no
error; 1 otherwise; 2 bad arguments.

Modules: stream.py (what every stream shares: clock, epoch-log cutoff,
counters, bounds, the run/kill/judge loop), bank.py, bptree.py,
memcached.py, memcached_commit.py (one per program), summary.py (the
table), main.py (the command line), self_test.py (the detectors fed cases
they must and must not flag; meson test soak-self-test).
"""
