#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_pmtkit.py -- the shared pieces of tools/pmtkit (meson test pmtkit):
the percentile every report quotes, the epoch-log reader, the memcached
client against a server speaking the protocol from a script."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pmtkit.epoch_log import read_epoch_log  # noqa: E402
from pmtkit.memcached_client import MemcachedClient  # noqa: E402
from pmtkit.percentile import percentile  # noqa: E402
from pmtkit.scratch import scratch_dir  # noqa: E402


class Percentile(unittest.TestCase):
    def test_nearest_rank_of_a_hundred(self):
        values = list(range(100, 0, -1))  # 100 .. 1, unsorted on purpose
        self.assertEqual(percentile(values, 50), 50)
        self.assertEqual(percentile(values, 99), 99)
        self.assertEqual(percentile(values, 100), 100)

    def test_nearest_rank_is_a_measured_value_never_a_blend(self):
        self.assertEqual(percentile([1.0, 2.0], 50), 1.0)
        self.assertEqual(percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 50), 3.0)
        self.assertEqual(percentile([10.0, 20.0, 30.0], 99), 30.0)

    def test_where_the_rounded_index_differed(self):
        # the soak's old definition, sorted[round(q * (n - 1))], is one rank
        # higher for an even count at p50 and one lower at p99 for some counts
        self.assertEqual(percentile([4, 3, 2, 1], 50), 2)            # old: 3
        self.assertEqual(percentile(range(1, 61), 99), 60)           # old: 59
        self.assertEqual(percentile(range(1, 161), 99), 159)         # old: 158

    def test_a_single_value_is_every_percentile(self):
        self.assertEqual(percentile([7], 1), 7)
        self.assertEqual(percentile([7], 99), 7)

    def test_no_values_is_nan(self):
        v = percentile([], 50)
        self.assertNotEqual(v, v)


class EpochLog(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pmtkit-test.")
        self.path = os.path.join(self.dir, "epochs.csv")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, text):
        with open(self.path, "w") as f:
            f.write(text)

    def test_rows_are_floats_by_column_name(self):
        self.write("t_ms,epoch,pause_us,conflicts,durable\n1.5,1,200,0,1\n3.0,2,300,2,0\n")
        self.assertEqual(read_epoch_log(self.path),
                         [dict(t_ms=1.5, epoch=1.0, pause_us=200.0, conflicts=0.0, durable=1.0),
                          dict(t_ms=3.0, epoch=2.0, pause_us=300.0, conflicts=2.0, durable=0.0)])

    def test_a_line_the_kill_cut_short_is_skipped(self):
        self.write("t_ms,epoch,pause_us\n1.5,1,200\n3.0,2")
        self.assertEqual(len(read_epoch_log(self.path)), 1)

    def test_a_line_cut_inside_a_number_or_garbled_is_skipped(self):
        self.write("t_ms,epoch,pause_us\n1.5,1,200\n3.0,2,3x\n4.0,3,\n")
        self.assertEqual(read_epoch_log(self.path), [dict(t_ms=1.5, epoch=1.0, pause_us=200.0)])

    def test_no_log_is_no_rows(self):
        self.assertEqual(read_epoch_log(os.path.join(self.dir, "absent.csv")), [])


class ScriptedServer:
    """Accepts one connection; for each (request, reply) it reads until the
    request's last bytes arrived, then sends the reply."""

    def __init__(self, script):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        self.port = self.srv.getsockname()[1]
        self.received = b""
        self.thread = threading.Thread(target=self.serve, args=(script,))
        self.thread.start()

    def serve(self, script):
        c, _ = self.srv.accept()
        answered = 0  # bytes of self.received already answered
        for request, reply in script:
            while request not in self.received[answered:]:
                chunk = c.recv(65536)
                if not chunk:
                    break
                self.received += chunk
            answered = self.received.index(request, answered) + len(request)
            c.sendall(reply)
        c.close()

    def close(self):
        self.thread.join(timeout=10)
        self.srv.close()


class Client(unittest.TestCase):
    def talk(self, script, body):
        srv = ScriptedServer(script)
        c = MemcachedClient(srv.port, timeout=10)
        try:
            return body(c)
        finally:
            c.close()
            srv.close()
            self.sent = srv.received

    def test_store_sends_a_set_and_returns_the_reply(self):
        reply = self.talk([(b"abc\r\n", b"STORED\r\n")],
                          lambda c: c.store("k1", b"abc", flags=7, exptime=60))
        self.assertEqual(reply, "STORED")
        self.assertEqual(self.sent, b"set k1 7 60 3\r\nabc\r\n")

    def test_gets_keyed_by_the_callers_keys_values_split_across_reads(self):
        value = b"x" * 200000  # more than one recv
        reply = (b"VALUE k1 5 200000 77\r\n" + value + b"\r\nVALUE k2 0 2 78\r\nhi\r\nEND\r\n")
        got = self.talk([(b"\r\n", reply)], lambda c: c.gets(["k1", "k2", "k3"]))
        self.assertEqual(got, {"k1": (5, 77, value), "k2": (0, 78, b"hi")})
        self.assertEqual(self.sent, b"gets k1 k2 k3\r\n")

    def test_get_many_with_bytes_keys(self):
        got = self.talk([(b"\r\n", b"VALUE k1-2 0 3\r\nabc\r\nEND\r\n")],
                        lambda c: c.get_many([b"k1-2", b"k1-3"]))
        self.assertEqual(got, {b"k1-2": b"abc"})

    def test_pipelined_gets_in_flight_together_answer_each_list_in_turn(self):
        got = self.talk([(b"get c\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\nVALUE c 0 2\r\nyz\r\n"
                          b"END\r\n")],
                        lambda c: list(c.get_many_pipelined([[b"a", b"b"], [b"c"]])))
        self.assertEqual(got, [{b"a": b"x"}, {b"c": b"yz"}])
        self.assertEqual(self.sent, b"get a b\r\nget c\r\n")

    def test_an_unexpected_reply_is_an_error(self):
        with self.assertRaises(ConnectionError):
            self.talk([(b"\r\n", b"SERVER_ERROR out of memory\r\n")],
                      lambda c: c.get_many([b"k"]))

    def test_stats_keep_values_with_spaces(self):
        st = self.talk([(b"\r\n", b"STAT pid 42\r\nSTAT 1:total_pages 3\r\n"
                         b"STAT version 1.6 x\r\nEND\r\n")], lambda c: c.stats("slabs"))
        self.assertEqual(st, {"pid": "42", "1:total_pages": "3", "version": "1.6 x"})
        self.assertEqual(self.sent, b"stats slabs\r\n")

    def test_ttl_from_meta_get(self):
        got = self.talk([(b"\r\n", b"HD t3598\r\n"), (b"\r\n", b"HD t-1\r\n"),
                         (b"\r\n", b"EN\r\n")],
                        lambda c: (c.ttl("a"), c.ttl("b"), c.ttl("c")))
        self.assertEqual(got, (3598, -1, None))

    def test_a_closed_connection_is_a_connection_error(self):
        with self.assertRaises(ConnectionError):
            self.talk([(b"\r\n", b"")], lambda c: c.command("version"))


class Scratch(unittest.TestCase):
    def test_a_fresh_directory_under_the_parent_given(self):
        parent = tempfile.mkdtemp(prefix="pmtkit-test.")
        try:
            d = scratch_dir("x.", parent)
            self.assertTrue(os.path.isdir(d))
            self.assertEqual(os.path.dirname(d), parent)
            self.assertTrue(os.path.basename(d).startswith("x."))
            self.assertNotEqual(d, scratch_dir("x.", parent))
        finally:
            shutil.rmtree(parent)

    def test_on_dev_shm_when_there_is_one(self):
        if not os.path.isdir("/dev/shm"):
            self.skipTest("no /dev/shm here")
        d = scratch_dir("pmtkit-test.")
        try:
            self.assertEqual(os.path.dirname(d), "/dev/shm")
        finally:
            os.rmdir(d)


ROOT = Path(__file__).resolve().parent.parent


class Users(unittest.TestCase):
    """Every script that imports pmtkit finds it from where it sits and gets
    as far as its usage message (no ImportError, whatever the current
    directory)."""

    def usage(self, script, *args, status):
        p = subprocess.run([sys.executable, str(ROOT / script), *args], cwd="/",
                           capture_output=True, text=True, timeout=60)
        self.assertNotIn("Traceback", p.stderr, p.stderr)
        self.assertEqual(p.returncode, status, p.stdout + p.stderr)
        self.assertIn("usage", (p.stdout + p.stderr).lower())

    def test_soak(self):
        self.usage("bench/soak.py", "--help", status=0)

    def test_soak_refuses_an_unknown_program(self):
        p = subprocess.run([sys.executable, str(ROOT / "bench/soak.py"), "--programs", "bnak"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown program 'bnak'", p.stderr)

    def test_memcached_restart_check(self):
        self.usage("memcached-demo/restart-check.py", status=2)

    def test_memcached_report(self):
        self.usage("memcached-demo/report.py", status=1)

    def test_memcached_evict_point(self):
        self.usage("memcached-demo/evict-point.py", status=1)

    def test_harness(self):
        self.usage("parsec-ports/harness/run.py", "--help", status=0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
