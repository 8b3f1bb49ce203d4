# SPDX-License-Identifier: BSD-3-Clause
"""self_test.py -- the soak's detectors fed outputs they must flag and ones
they must not: a soak that reports 0 is only worth something if each check
can fail.  Run by `bench/soak.py --self-test` (meson test soak-self-test)."""

import argparse
import collections
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from pmtkit.epoch_log import read_epoch_log
from pmtkit.soak.bank import BankStream
from pmtkit.soak.bptree import BptreeStream
from pmtkit.soak.memcached import EvictionWatch, MemcachedStream, mc_value
from pmtkit.soak.memcached_commit import LoadConn, MemcachedCommitStream, take_replies
from pmtkit.soak.stream import Budget, FairSlots, Stats, epoch_facts, now_ns
from pmtkit.soak.summary import summarize

OK_BANK = ("bank: 1000 accounts, 10 transfers, total 1000000 (expected 1000000), "
           "transfers received 10")
OLD_LOG_HEADER = ("t_ms,epoch,pause_us,pages,bytes_dirty,bytes_written,stage_us,persist_us,"
                  "period_us,pages_saved\n")
# counts 100 @1 ms (durable epoch 5), 200 @2 ms (6), 300 @3 ms (7)
POINTS = [(1_000_000, 100, 5), (2_000_000, 200, 6), (3_000_000, 300, 7)]


class SoakCase(unittest.TestCase):
    """A scratch directory and the arguments a stream reads."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="pmthreads-soak-selftest.")
        self.args = argparse.Namespace(pool_dir=None, seed=1, build="build", interval_ms=50,
                                       pool_size="1G", nvm="pmem", kill_min_ms=10,
                                       kill_max_ms=500, threads=2, tick_us=1000,
                                       memcached="memcached", mc_evict=False,
                                       commit_output="commit", mc_conns=1, mc_window=4)
        self.budget = Budget(1, now_ns(), 1)

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def stream(self, cls, program):
        return cls(self.args, program, "uffd", self.budget, self.work)

    def epoch_log(self, text):
        path = f"{self.work}/e.csv"
        with open(path, "w") as f:
            f.write(text)
        return path


class BankTorn(SoakCase):
    def test_consistent_state_is_not_torn(self):
        self.assertFalse(self.stream(BankStream, "bank").parse([OK_BANK])[1])

    def test_money_not_conserved_is_torn(self):
        line = OK_BANK.replace("total 1000000 (", "total 999990 (")
        self.assertTrue(self.stream(BankStream, "bank").parse([line])[1])

    def test_ledger_disagreeing_with_counters_is_torn(self):
        line = OK_BANK.replace("received 10", "received 9")
        self.assertTrue(self.stream(BankStream, "bank").parse([line])[1])

    def test_inconsistent_is_torn(self):
        self.assertTrue(self.stream(BankStream, "bank").parse([OK_BANK, "bank: INCONSISTENT"])[1])


class BptreeTorn(SoakCase):
    def test_check_ok_is_not_torn(self):
        bt = self.stream(BptreeStream, "bptree")
        self.assertFalse(bt.parse(["recovered=5 height=1 nodes=1 check=ok"])[1])

    def test_a_hole_is_torn(self):
        bt = self.stream(BptreeStream, "bptree")
        self.assertTrue(bt.parse(["recovered=5 height=1 nodes=1 check=FAILED a thread's "
                                  "surviving inserts have holes"])[1])


class DurableRequirements(SoakCase):
    def setUp(self):
        super().setUp()
        self.bank = self.stream(BankStream, "bank")
        self.req = self.bank.requirements(POINTS, 2_500_000)

    def test_epoch_log_cutoff(self):
        self.assertEqual(self.req[0], 200)

    def test_durable_epoch_plus_two(self):
        self.assertEqual(self.req[1], 100)

    def test_durable_epoch_plus_one(self):
        self.assertEqual(self.req[2], 200)

    def test_recovering_less_than_the_cutoff_is_durable_loss(self):
        self.bank.judge(150, POINTS, 4_000_000, *self.req, 1.0)
        self.assertEqual(self.bank.stats.durable_lost, 1)

    def test_lost_work_from_the_first_unrecovered_report(self):
        self.bank.judge(150, POINTS, 4_000_000, *self.req, 1.0)
        self.assertEqual(self.bank.stats.lost_ms, [2.0])
        self.assertEqual(self.bank.stats.lost_intervals, [2.0])

    def test_recovering_everything_is_no_loss(self):
        self.bank.judge(300, POINTS, 4_000_000, *self.req, 1.0)
        self.assertEqual(self.bank.stats.durable_lost, 0)
        self.assertEqual(self.bank.stats.lost_ms, [0.0])


class EpochLogCutoff(SoakCase):
    def setUp(self):
        super().setUp()
        self.log = self.epoch_log(OLD_LOG_HEADER + "100.000,1,1000,1,4096,64,500,2500,50000,0\n"
                                  "150.000,2,1000,1,4096,64,500,2500,40000,0\n"
                                  "200.000,3,1000,1,4096,64,500,2500,50000,0\n201.0,4,1")

    def test_cutoff_is_the_line_before_the_last_epochs_and_a_cut_line_is_ignored(self):
        self.assertEqual(epoch_facts(read_epoch_log(self.log), 0)[0], int(150.0 * 1e6))

    def test_cutoff_is_the_last_epochs_pause_start_when_that_is_earlier(self):
        near = [dict(r) for r in read_epoch_log(self.log)[:3]]
        near[1]["t_ms"] = 199.0
        self.assertEqual(epoch_facts(near, 0)[0], int((200.0 - 3.0) * 1e6))

    def test_achieved_period_is_the_median_of_the_last_periods(self):
        self.assertEqual(epoch_facts(read_epoch_log(self.log), 0)[1], 50.0)

    def test_one_period_is_not_enough(self):
        self.assertIsNone(epoch_facts(read_epoch_log(self.log)[:1], 0)[1])

    def test_a_carried_over_line_is_not_what_survives(self):
        log = self.epoch_log(OLD_LOG_HEADER.rstrip("\n") + ",conflicts,durable\n"
                             "100.000,1,1000,1,4096,64,500,2500,50000,0,0,1\n"
                             "150.000,2,1000,1,4096,64,500,2500,40000,0,0,1\n"
                             "200.000,2,1000,1,4096,64,500,2500,50000,0,3,0\n")
        self.assertEqual(epoch_facts(read_epoch_log(log), 0)[0], int(100.0 * 1e6))


class FakeConn:
    """Answers gets for the soak's keys k<round>-<i> with their values, but
    for the (round, i) in lost."""

    def __init__(self, lost):
        self.lost = lost

    def get_many(self, keys):
        out = {}
        for k in keys:
            r, i = (int(x) for x in k[1:].split(b"-"))
            if (r, i) not in self.lost:
                out[k] = mc_value(r, i)
        return out

    def get_many_pipelined(self, key_lists):
        for keys in key_lists:
            yield self.get_many(keys)


class CutConn(FakeConn):
    """The server killed while it answers round 2's keys."""

    def get_many(self, keys):
        if keys[0].startswith(b"k2-"):
            raise ConnectionError("killed")
        return FakeConn.get_many(self, keys)


class WrongConn(FakeConn):
    def get_many(self, keys):
        return {k: b"x" for k in keys}


class MemcachedBookkeeping(SoakCase):
    def setUp(self):
        super().setUp()
        self.mc = self.stream(MemcachedStream, "memcached")
        self.mc.acks = {1: [(i, 1000 + i) for i in range(10)],
                        2: [(i, 2000 + i) for i in range(10)]}

    def late_check(self):
        """A check long after rounds 1 and 2, every earlier kill seen."""
        self.mc.pending = dict(req_cut=99999, t_kill=99999)
        self.mc.round_no = 30
        self.mc.first_unchecked = 29

    def round_2_lost_in_its_kill(self):
        """Round 2's last keys were lost in its own kill (allowed: after that
        kill's cutoff); rounds 3-6 were killed in start-up, so the check of
        round 7 is the first to see round 2."""
        self.mc.round_no = 7
        self.mc.first_unchecked = 2
        self.mc.pending = dict(req_cut=2005, t_kill=2020)
        return self.mc.verify(FakeConn({(2, 8), (2, 9)}), "", recent_only=True)

    def test_a_round_whose_kill_no_check_saw_is_checked(self):
        first, required = self.round_2_lost_in_its_kill()
        self.assertEqual(first, 2008)
        self.assertEqual(required, [])
        self.assertEqual(len(self.mc.acks[2]), 8)

    def test_keys_lost_in_an_earlier_kill_are_not_required_later(self):
        self.round_2_lost_in_its_kill()
        self.late_check()
        first, required = self.mc.verify(FakeConn({(2, 8), (2, 9)}), "", recent_only=False)
        self.assertEqual(required, [])

    def test_a_key_that_survived_a_check_and_then_vanished_is_required(self):
        self.late_check()
        first, required = self.mc.verify(FakeConn({(1, 3)}), "", recent_only=False)
        self.assertEqual(required, [(1, 3, 1003)])

    def test_a_required_key_missing_nothing_evicted_is_durable_loss(self):
        self.mc.judge_missing([(1, 3, 1003)], "self-test", None)
        self.assertEqual((self.mc.stats.durable_lost, self.mc.stats.evicted_loss), (1, 0))

    def test_a_required_key_named_by_watch_evictions_is_evicted(self):
        self.mc.evicted_keys = {b"k1-3"}
        self.mc.judge_missing([(1, 3, 1003)], "self-test", None)
        self.assertEqual((self.mc.stats.durable_lost, self.mc.stats.evicted_loss), (0, 1))

    def test_a_required_key_missing_after_unnamed_evictions_is_evicted_loss(self):
        self.mc.evictions_unnamed = 4
        self.mc.judge_missing([(1, 3, 1003)], "self-test", None)
        self.assertEqual((self.mc.stats.durable_lost, self.mc.stats.evicted_loss), (0, 1))

    def test_a_check_the_kill_cut_short_forgets_nothing(self):
        self.late_check()
        n1 = len(self.mc.acks[1])
        with self.assertRaises(ConnectionError):
            self.mc.verify(CutConn({(1, 4)}), "", recent_only=False)
        self.assertEqual(len(self.mc.acks[1]), n1)

    def test_a_wrong_value_is_torn(self):
        self.late_check()
        self.mc.verify(WrongConn(set()), "", recent_only=False)
        self.assertEqual(self.mc.stats.torn, 1)

    def test_recovery_dropping_items_is_torn(self):
        self.late_check()
        self.mc.verify(FakeConn(set()), "[restart] relinked 5 items, dropped 2 incomplete "
                       "linked items", recent_only=False)
        self.assertEqual(self.mc.stats.torn, 1)

    def test_values_are_deterministic_and_differ_between_keys(self):
        self.assertEqual(mc_value(1, 2), mc_value(1, 2))
        self.assertNotEqual(mc_value(1, 2), mc_value(1, 3))


class MemcachedCommitCheck(SoakCase):
    """memcached-commit: every set whose "STORED" the client read must be
    back, not only those before the epoch log's cutoff."""

    def setUp(self):
        super().setUp()
        self.mc = self.stream(MemcachedCommitStream, "memcached-commit")
        self.mc.acks = {1: [(i, 1000 + i) for i in range(10)]}
        # killed at 1020, the last durable epoch began at 1005: sets 6..9
        # were acknowledged after it
        self.mc.round_no = 2
        self.mc.first_unchecked = 1
        self.mc.pending = dict(req_cut=1005, t_kill=1020)

    def test_an_acknowledged_set_missing_after_the_cutoff_is_lost(self):
        first, required = self.mc.verify(FakeConn({(1, 9)}), "", recent_only=True)
        self.assertEqual(required, [(1, 9, 1009)])
        self.mc.judge_missing(required, "self-test", None)
        self.assertEqual((self.mc.stats.durable_lost, self.mc.stats.acked_lost), (1, 1))

    def test_the_same_miss_is_allowed_without_output_commit(self):
        # the contrast: memcached's stream allows what came after the cutoff
        plain = self.stream(MemcachedStream, "memcached")
        plain.acks, plain.round_no, plain.first_unchecked, plain.pending = \
            self.mc.acks, 2, 1, self.mc.pending
        self.assertEqual(plain.verify(FakeConn({(1, 9)}), "", recent_only=True)[1], [])

    def test_every_acknowledged_set_back_is_no_loss(self):
        first, required = self.mc.verify(FakeConn(set()), "", recent_only=True)
        self.assertEqual((first, required), (None, []))
        self.mc.judge_missing(required, "self-test", None)
        self.assertEqual((self.mc.stats.durable_lost, self.mc.stats.acked_lost), (0, 0))

    def test_a_set_never_acknowledged_may_be_missing(self):
        # set 10 was sent, its "STORED" never read: not in acks, not required
        first, required = self.mc.verify(FakeConn({(1, 10)}), "", recent_only=True)
        self.assertEqual(required, [])

    def test_a_lost_set_is_counted_once(self):
        _, required = self.mc.verify(FakeConn({(1, 9)}), "", recent_only=True)
        self.mc.judge_missing(required, "self-test", None)
        self.mc.round_no, self.mc.first_unchecked = 3, 2
        _, required = self.mc.verify(FakeConn({(1, 9)}), "", recent_only=False)
        self.assertEqual(required, [])

    def test_the_server_runs_with_output_commit_unless_asked_for_off(self):
        self.assertEqual(self.mc.env()["PMTHREADS_OUTPUT"], "commit")
        self.args.commit_output = "off"
        self.assertEqual(self.mc.env()["PMTHREADS_OUTPUT"], "off")

    def test_a_disk_run_asks_for_the_log_backend_without_forced_pmem(self):
        self.assertEqual(self.mc.env()["PMEM_IS_PMEM_FORCE"], "1")
        self.args.nvm = "log"
        e = self.mc.env()
        self.assertEqual(e["PMTHREADS_NVM"], "log")
        self.assertNotIn("PMEM_IS_PMEM_FORCE", e)

    def test_loss_fails_the_run_and_has_its_columns(self):
        self.mc.judge_missing([(1, 9, 1009)], "self-test", None)
        self.mc.stats.ack_us.extend([100.0, 300.0])
        rows = summarize([Stats("bank", "uffd"), self.mc.stats], self.args, 1.0)
        self.assertEqual((rows[0]["acked_lost"], rows[1]["acked_lost"]), (None, 1))
        self.assertEqual((rows[-1]["durable_lost"], rows[-1]["acked_lost"]), (1, 1))
        self.assertEqual((rows[1]["ack_p50_ms"], rows[1]["ack_p99_ms"]), (0.1, 0.3))


class CommitLoadReplies(unittest.TestCase):
    """The pipelined load: replies answer the sets in flight in order."""

    def conn(self, n):
        lc = LoadConn.__new__(LoadConn)
        lc.inflight = collections.deque((i, 1000 * i) for i in range(n))
        lc.buf = b""
        lc.refused = 0
        return lc

    def test_stored_replies_acknowledge_in_order_across_reads(self):
        lc, acks, lat = self.conn(3), [], []
        self.assertIsNone(take_replies(lc, b"STORED\r\nSTO", 5000, acks, lat))
        self.assertIsNone(take_replies(lc, b"RED\r\n", 7000, acks, lat))
        self.assertEqual(acks, [(0, 5000), (1, 7000)])
        self.assertEqual(lat, [5.0, 6.0])
        self.assertEqual(len(lc.inflight), 1)

    def test_a_refused_set_is_not_acknowledged(self):
        lc, acks = self.conn(2), []
        take_replies(lc, b"SERVER_ERROR out of memory storing object\r\nSTORED\r\n", 9000,
                     acks, None)
        self.assertEqual(acks, [(1, 9000)])
        self.assertEqual(lc.refused, 1)

    def test_a_reply_that_is_no_answer_to_a_set_is_reported(self):
        lc, acks = self.conn(1), []
        self.assertEqual(take_replies(lc, b"ERROR\r\n", 9000, acks, None), b"ERROR")
        self.assertEqual(take_replies(self.conn(0), b"STORED\r\n", 9000, acks, None),
                         b"STORED")
        self.assertEqual(acks, [])


class FakeServer:
    """A listening socket whose one connection gets reply after the request."""

    def __init__(self, reply):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        self.port = self.srv.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, args=(reply,))
        self.thread.start()

    def serve(self, reply):
        c, _ = self.srv.accept()
        c.recv(100)
        c.sendall(reply)
        c.close()

    def close(self):
        self.thread.join()
        self.srv.close()


class MemcachedServer(SoakCase):
    def test_watch_evictions_lines_are_read(self):
        # as memcached 1.6 speaks it: "OK\r\n", then lines ending in a bare "\n"
        srv = FakeServer(b"OK\r\nts=1.0 gid=5 type=eviction key=k1-3 fetch=no ttl=-1 la=1 "
                         b"clsid=6 size=200\nts=1.1 gid=6 type=eviction key=k1-4 fetch=no\n"
                         b"skipped=2\n")
        keys, skipped = EvictionWatch(srv.port).finish()
        srv.close()
        self.assertEqual(keys, {b"k1-3", b"k1-4"})
        self.assertEqual(skipped, 2)

    def test_a_port_answered_by_another_pid_is_not_checked(self):
        mc = self.stream(MemcachedStream, "memcached")
        srv = FakeServer(b"STAT pid 1\r\nSTAT curr_items 5\r\nEND\r\n")
        mc.port = srv.port
        mc.proc = subprocess.Popen(["sleep", "30"])
        up = mc.wait_up(now_ns() + int(5e9))
        srv.close()
        mc.proc.wait()
        self.assertIs(up, False)
        self.assertEqual(mc.stats.errors, 1)


class CommitDrain(SoakCase):
    def test_replies_a_killed_server_had_sent_are_acknowledgements(self):
        # what the dead server released before SIGKILL is still read
        srv = FakeServer(b"STORED\r\nSTORED\r\n")
        mc = self.stream(MemcachedCommitStream, "memcached-commit")
        lc = LoadConn(srv.port)
        lc.inflight.extend([(0, 0), (1, 0), (2, 0)])
        lc.sock.sendall(b"set k1-0 ...")
        srv.close()
        acks = []
        mc.killed_at = now_ns()
        mc.drain([lc], acks)
        self.assertEqual([i for i, _ in acks], [0, 1])


class Slots(unittest.TestCase):
    def test_one_slot_alternates_between_two_streams(self):
        # (a threading.Semaphore let the releasing stream take it straight back)
        slots, order, done = FairSlots(1), [], {}

        def take(name, other):
            for _ in range(5):
                with slots:
                    order.append(name)
                    # hold the slot until the other stream waits for it (a
                    # loaded machine may start it late)
                    give_up = time.monotonic() + 10
                    while (not slots.queue and not done.get(other)
                           and time.monotonic() < give_up):
                        time.sleep(0.001)
            done[name] = True
        ths = [threading.Thread(target=take, args=(n, o)) for n, o in ("ab", "ba")]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        self.assertIn("".join(order), ("ababababab", "bababababa"))


def run():
    """Runs every case; the exit status for the command line."""
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    print(f"soak self-test: {'PASS' if result.wasSuccessful() else 'FAIL'}")
    return 0 if result.wasSuccessful() else 1
