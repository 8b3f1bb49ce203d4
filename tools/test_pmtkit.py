#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_pmtkit.py -- the shared pieces of tools/pmtkit (meson test pmtkit):
the percentile every report quotes, the epoch-log reader, the memcached
client against a server speaking the protocol from a script, bench.sh's
options, CSV columns and server commands (mcbench)."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pmtkit import cpu_split  # noqa: E402
from pmtkit import crash_loss  # noqa: E402
from pmtkit.epoch_log import read_epoch_log  # noqa: E402
from pmtkit.mcbench import cost as mc_cost  # noqa: E402
from pmtkit.mcbench import options as mc_options  # noqa: E402
from pmtkit.mcbench import results as mc_results  # noqa: E402
from pmtkit.mcbench import servers as mc_servers  # noqa: E402
from pmtkit.mcbench import sweep as mc_sweep  # noqa: E402
from pmtkit import memcached_build  # noqa: E402
from pmtkit.memcached_client import MemcachedClient  # noqa: E402
from pmtkit.percentile import percentile  # noqa: E402
from pmtkit import posix_conformance as posix  # noqa: E402
from pmtkit import ports  # noqa: E402
from pmtkit import recovery_row  # noqa: E402
from pmtkit import scratch  # noqa: E402
from pmtkit.scratch import scratch_dir  # noqa: E402
from pmtkit import t_suite  # noqa: E402


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


class PoolMedium(unittest.TestCase):
    """PMT_POOL_MEDIUM, the suite's switch between emulated pmem and a disk."""

    def setUp(self):
        self.saved = {k: os.environ.get(k) for k in ("PMT_POOL_MEDIUM", "PMT_DISK_DIR")}

    def tearDown(self):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def test_pmem_forces_pmem_and_disk_removes_the_force(self):
        os.environ["PMT_POOL_MEDIUM"] = "pmem"
        self.assertEqual(scratch.env_for_pools({}), {"PMEM_IS_PMEM_FORCE": "1"})
        self.assertEqual(scratch.env_for_pools({"PMEM_IS_PMEM_FORCE": "0"}), {"PMEM_IS_PMEM_FORCE": "0"})
        os.environ["PMT_POOL_MEDIUM"] = "disk"
        self.assertEqual(scratch.env_for_pools({"PMEM_IS_PMEM_FORCE": "1", "A": "b"}), {"A": "b"})

    def test_the_default_medium_is_the_disk(self):
        os.environ.pop("PMT_POOL_MEDIUM", None)
        self.assertEqual(scratch.pool_medium(), "disk")
        self.assertEqual(scratch.env_for_pools({"PMEM_IS_PMEM_FORCE": "1"}), {})

    def test_no_disk_skips_by_default_and_fails_when_asked(self):
        if not os.path.isdir("/dev/shm") or not scratch._in_memory("/dev/shm"):
            self.skipTest("no /dev/shm in memory here")
        os.environ["PMT_DISK_DIR"] = "/dev/shm"
        os.environ.pop("PMT_POOL_MEDIUM", None)
        with self.assertRaises(SystemExit) as cm:
            scratch.pool_dir("x.")
        self.assertEqual(cm.exception.code, 77)
        os.environ["PMT_POOL_MEDIUM"] = "disk"
        with self.assertRaises(SystemExit) as cm:
            scratch.pool_dir("x.")
        self.assertNotEqual(cm.exception.code, 77)

    def test_disk_pools_go_to_pmt_disk_dir_never_to_memory(self):
        os.environ["PMT_POOL_MEDIUM"] = "disk"
        parent = tempfile.mkdtemp(prefix="pmtkit-test.", dir="/var/tmp")
        try:
            os.environ["PMT_DISK_DIR"] = parent
            if scratch._in_memory(parent):
                self.skipTest("/var/tmp is in memory here")
            self.assertEqual(os.path.dirname(scratch.pool_dir("x.")), parent)
        finally:
            shutil.rmtree(parent)
        if os.path.isdir("/dev/shm"):
            os.environ["PMT_DISK_DIR"] = "/dev/shm"
            with self.assertRaises(SystemExit):
                scratch.pool_dir("x.")

    def test_an_unknown_medium_is_refused(self):
        os.environ["PMT_POOL_MEDIUM"] = "ssd"
        with self.assertRaises(SystemExit):
            scratch.pool_medium()


class BenchOptions(unittest.TestCase):
    """memcached-demo/bench.sh's command line and environment (mcbench/options.py)."""

    def test_flags_then_the_output_directory(self):
        self.assertEqual(mc_options.parse_args([]), (False, False, None))
        self.assertEqual(mc_options.parse_args(["--cost", "--quick", "out"]), (True, True, "out"))
        self.assertEqual(mc_options.parse_args(["--quick", "--", "-odd"]), (True, False, "-odd"))

    def test_bad_command_lines_name_the_options(self):
        with self.assertRaisesRegex(mc_options.BadInput, r"unknown option --qiuck \(--cost"):
            mc_options.parse_args(["--qiuck"])
        with self.assertRaisesRegex(mc_options.BadInput, "usage: bench.sh"):
            mc_options.parse_args(["a", "b"])
        with self.assertRaises(mc_options.HelpWanted):
            mc_options.parse_args(["--cost", "-h"])

    def test_sweep_defaults_and_quick(self):
        s = mc_options.sweep_settings({}, quick=False)
        self.assertEqual((s.duration, s.repeats, s.keys, s.threads, s.intervals, s.modes),
                         (5, 1, 10000, ["1", "2", "4"], ["10", "20", "40", "100", "200", "500"],
                          ["native", "preload", "pmthreads"]))
        self.assertEqual(s.pmem_is_pmem_force, "1")
        q = mc_options.sweep_settings({"INTERVALS": "", "THREAD_LIST": "2"}, quick=True)
        self.assertEqual((q.duration, q.threads, q.intervals), (1, ["2"], ["100"]))

    def test_sweep_refuses_an_unknown_mode(self):
        with self.assertRaisesRegex(mc_options.BadInput, "MODES: 'pmthread' is not one of"):
            mc_options.sweep_settings({"MODES": "native pmthread"}, quick=False)

    def test_cost_defaults_and_quick(self):
        s = mc_options.cost_settings({}, quick=False)
        self.assertEqual((s.rounds, s.duration, s.threads, s.interval, s.loads),
                         (5, 3, 4, 100, [(16, 90), (16, 50), (4, 90), (1, 90)]))
        self.assertEqual((s.pools, s.trackers, s.pmem_dir, s.file_dir),
                         (["pmem", "file"], ["uffd"], "/dev/shm", "/var/tmp"))
        q = mc_options.cost_settings({}, quick=True)
        self.assertEqual((q.rounds, q.duration, q.loads), (2, 1, [(16, 90)]))
        q = mc_options.cost_settings({"ROUNDS": "3", "LOADS": "4:50"}, quick=True)
        self.assertEqual((q.rounds, q.loads), (3, [(4, 50)]))

    def test_cost_checks_each_parameter(self):
        for env, msg in (({"ROUNDS": "0"}, "ROUNDS=0: a positive integer"),
                         ({"VSIZE": "1k"}, "VSIZE=1k: a positive integer"),
                         ({"LOADS": "16:101"}, "'16:101' is not CONNS:SET_PERCENT"),
                         ({"LOADS": "0:50"}, "'0:50' is not CONNS:SET_PERCENT"),
                         ({"LOADS": "  "}, "LOADS is empty"),
                         ({"TRACKERS": "uffd soft"}, "TRACKERS: 'soft' is not uffd or mprotect"),
                         ({"POOLS": "disk"}, "POOLS: 'disk' is not pmem, file or msync"),
                         ({"CONFIGS": "redis"}, "CONFIGS: 'redis' is not one of native")):
            with self.assertRaisesRegex(mc_options.BadInput, msg):
                mc_options.cost_settings(env, quick=False)

    def test_configurations_in_configs_order_redis_last(self):
        cfgs = mc_options.cost_configurations(
            ["redis-always", "native", "commit"], ["pmem", "file"], ["uffd", "mprotect"], True)
        self.assertEqual(cfgs, [("native", "-", "-"), ("commit", "pmem", "uffd"),
                                ("commit", "pmem", "mprotect"), ("commit", "file", "uffd"),
                                ("commit", "file", "mprotect"), ("redis-always", "aof", "-")])
        self.assertEqual(mc_options.cost_configurations(["redis-always"], ["pmem"], ["uffd"],
                                                        False), [])

    def test_each_round_rotates_the_order_by_one(self):
        self.assertEqual(mc_options.round_order("abc", 1), ["a", "b", "c"])
        self.assertEqual(mc_options.round_order("abc", 2), ["b", "c", "a"])
        self.assertEqual(mc_options.round_order("abc", 4), ["a", "b", "c"])

    def test_minutes_announced(self):
        self.assertEqual(mc_options.minutes_estimate(140, 3), 11)   # the README's default run
        self.assertEqual(mc_options.minutes_estimate(1, 1), 1)


class BenchResults(unittest.TestCase):
    """The CSV columns of bench.sh (mcbench/results.py)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pmtkit-test.")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def stats(self, text):
        path = os.path.join(self.dir, "stats.json")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_sweep_columns_from_nested_or_suffixed_keys(self):
        # a boolean is not a number: "epochs": true does not hide the nested count
        p = self.stats('{"epochs": true, "run": {"epochs": 4}, "io": {"bytes_written": 10}, '
                       '"pause_ns": {"p50": 5, "p99": 7.25, "max": 9}}')
        self.assertEqual(mc_results.sweep_stats_fields(p), ["4", "10", "2.5", "5", "7.2", "9"])

    def test_sweep_columns_prefer_an_exact_key(self):
        p = self.stats('{"x_epochs": 1, "epochs": 2, "bytes_written": 8}')
        self.assertEqual(mc_results.sweep_stats_fields(p)[:3], ["2", "8", "4"])

    def test_missing_or_broken_stats_leave_the_columns_empty(self):
        self.assertEqual(mc_results.sweep_stats_fields(os.path.join(self.dir, "none")), [""] * 6)
        self.assertEqual(mc_results.sweep_stats_fields(self.stats('{"epochs": 3')), [""] * 6)
        self.assertEqual(mc_results.cost_stats_fields(self.stats("")), [""] * 8)
        self.assertEqual(mc_results.sweep_stats_fields(self.stats('{"epochs": 0}'))[:3],
                         ["0", "", ""])

    def test_cost_columns(self):
        p = self.stats('{"output_commit": true, "output_writes_held": 12, "epochs": 30, '
                       '"output_epochs_demanded": 29, "output_hold_ns_p50": 100, '
                       '"output_hold_ns_p99": 900, "pause_ns_p99": 50, '
                       '"persist_ns": 1000, "epochs_persisted": 3}')
        self.assertEqual(mc_results.cost_stats_fields(p),
                         ["1", "12", "30", "29", "100", "900", "50", "333"])
        p = self.stats('{"output_commit": false, "persist_ns": 1000, "epochs_persisted": 0}')
        self.assertEqual(mc_results.cost_stats_fields(p), ["0"] + [""] * 7)

    def test_headers_have_the_columns_the_rows_fill(self):
        client = "1,2,3,4,5,6,7,8"
        self.assertEqual(len(mc_results.SWEEP_HEADER.split(",")), 3 + 8 + 6 + 2)
        self.assertEqual(len(mc_results.COST_HEADER.split(",")), 7 + len(client.split(",")) + 8 + 1)
        self.assertEqual(mc_results.COST_HEADER.split(",")[7 + mc_results.CLIENT_P99_US], "p99_us")

    def test_cpu_ticks_count_iowait_as_idle(self):
        busy, total = mc_results.cpu_ticks("cpu  10 1 5 100 7 2 3 4 0 0\ncpu0 1 2 3\n")
        self.assertEqual((busy, total), (10 + 1 + 5 + 2 + 3 + 4, 132))

    def test_other_load_is_machine_busy_minus_ours(self):
        # 2 CPUs, 1 s: 150 jiffies at 100 Hz busy = 1.5 s, ours 0.5 s -> 1 s of 2 = 50 %
        self.assertEqual(mc_results.other_load_pct(0, 150, 500, 10**9, 100, 2), "50.0")
        self.assertEqual(mc_results.other_load_pct(0, 10, 900, 10**9, 100, 2), "0.0")

    def test_run_tags(self):
        self.assertEqual(mc_results.run_tag("native", "-", "-"), "native")
        self.assertEqual(mc_results.run_tag("redis-always", "aof", "-"), "redis-always-aof")
        self.assertEqual(mc_results.run_tag("commit", "pmem", "uffd"), "commit-pmem-uffd")


class BenchWatchdog(unittest.TestCase):
    """A server bench.sh starts cannot outlive it (mcbench/servers.py)."""

    def start(self, max_seconds):
        self.dir = tempfile.mkdtemp(prefix="pmtkit-test.")
        self.procs = mc_servers.Processes({}, max_seconds, lambda msg: None)
        port = ports.free_port()
        listen = ("import socket, time; s = socket.socket(); "
                  f"s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)")
        self.assertTrue(self.procs.start(os.path.join(self.dir, "log"), port,
                                         [sys.executable, "-c", listen]))
        return self.procs.server

    def tearDown(self):
        self.procs.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_the_watchdog_kills_a_server_its_bench_left(self):
        p = self.start(1)
        self.assertEqual(os.getsid(p.watchdog.pid), p.watchdog.pid)  # survives the bench's kill
        self.assertEqual(p.wait(timeout=30), -signal.SIGKILL)

    def test_a_stopped_server_takes_its_watchdog_along(self):
        p = self.start(300)
        self.procs.stop()
        self.assertEqual(p.returncode, -signal.SIGTERM)
        self.assertIsNotNone(p.watchdog.poll())


class BenchServers(unittest.TestCase):
    """The commands bench.sh starts (mcbench/sweep.py, cost.py, servers.py)."""

    def test_ports_below_the_ephemeral_range(self):
        self.assertEqual(ports.port_range_below_ephemeral("32768\t60999\n"), (12768, 20000))
        self.assertEqual(ports.port_range_below_ephemeral("20000 60999"), (10000, 10000))
        self.assertEqual(ports.port_range_below_ephemeral("1024 60999"), (20000, 40000))
        self.assertEqual(ports.port_range_below_ephemeral(""), (20000, 40000))

    def test_a_free_port_can_be_bound(self):
        p = ports.free_port()
        with socket.socket() as s:
            s.bind((ports.MC_HOST, p))

    def test_load_start(self):
        self.assertEqual(mc_sweep.load_start_ms(1000, 1300, 10000), 300 + 1000 + 200)

    def test_sweep_commands(self):
        s = mc_options.sweep_settings({"MEMCACHED": "/mc"}, quick=True)
        self.assertEqual(mc_sweep.server_argv("native", s, "lib.so", "mcp", "P", 100, "S", "E"),
                         ["/mc"])
        self.assertEqual(mc_sweep.server_argv("preload", s, "lib.so", "mcp", "P", 100, "S", "E"),
                         ["env", "LD_PRELOAD=lib.so", "PMTHREADS_HEAP=malloc", "PMTHREADS_POOL=P",
                          "PMTHREADS_INTERVAL_MS=100", "PMTHREADS_STATS=S",
                          "PMTHREADS_EPOCH_LOG=E", "/mc"])
        self.assertEqual(mc_sweep.server_argv("pmthreads", s, "lib.so", "mcp", "P", 20, "S", "E"),
                         ["env", "PMTHREADS_POOL=P", "PMTHREADS_INTERVAL_MS=20",
                          "PMTHREADS_STATS=S", "PMTHREADS_EPOCH_LOG=E", "mcp"])

    def test_cost_commands(self):
        s = mc_options.cost_settings({"MEMCACHED": "/mc", "THREADS": "2", "INTERVAL": "50"},
                                     quick=True)
        dirs = {"pmem": "/shm/d", "file": "/var/d", "msync": "/var/m"}
        user = mc_servers.mc_user_args()
        mc = ["-l", "127.0.0.1", "-p", "99", "-U", "0", "-t", "2", "-m", "256"] + user
        argv, proto = mc_cost.server_argv("native", "-", "-", 99, "S", s, dirs, "mcp", "rs")
        self.assertEqual((argv, proto), (["/mc"] + mc, "memcache"))
        argv, _ = mc_cost.server_argv("commit", "msync", "uffd", 99, "S", s, dirs, "mcp", "rs")
        self.assertEqual(argv[:5], ["env", "-u", "PMEM_IS_PMEM_FORCE", "PMTHREADS_NVM=msync",
                                    "PMTHREADS_STRICT=1"])
        self.assertEqual(argv[5], "PMTHREADS_POOL=/var/m/pool")
        argv, _ = mc_cost.server_argv("commit", "file", "mprotect", 99, "S", s, dirs, "mcp", "rs")
        self.assertEqual(argv, ["env", "-u", "PMEM_IS_PMEM_FORCE", "PMTHREADS_NVM=log",
                                "PMTHREADS_STRICT=1", "PMTHREADS_POOL=/var/d/pool",
                                "PMTHREADS_TRACKER=mprotect", "PMTHREADS_INTERVAL_MS=50",
                                "PMTHREADS_OUTPUT=commit", "PMTHREADS_STATS=S", "mcp"] + mc)
        argv, _ = mc_cost.server_argv("pmthreads", "pmem", "uffd", 99, "S", s, dirs, "mcp", "rs")
        self.assertEqual(argv[:4] + argv[7:8], ["env", "PMEM_IS_PMEM_FORCE=1", "PMTHREADS_NVM=pmem",
                                                "PMTHREADS_STRICT=1", "PMTHREADS_OUTPUT=off"])
        argv, proto = mc_cost.server_argv("redis-everysec", "aof", "-", 99, "S", s, dirs, "mcp",
                                          "rs")
        self.assertEqual(proto, "redis")
        self.assertEqual(argv, ["rs", "--port", "99", "--bind", "127.0.0.1", "--dir",
                                "/var/d/redis", "--appendonly", "yes", "--appendfsync",
                                "everysec", "--save", "", "--daemonize", "no",
                                "--protected-mode", "no", "--logfile", ""])


class RecoveryRow(unittest.TestCase):
    """parsec-ports/recovery/crash_recover.sh's rows (pmtkit/recovery_row.py)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pmtkit-test.")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, text):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def epochs(self, periods):
        self.write("epochs.csv", "t_ms,epoch,pause_us,pages,bytes_dirty,bytes_written,stage_us,"
                   "persist_us,period_us\n" +
                   "".join(f"{i},{i},1,1,1,1,1,1,{p}\n" for i, p in enumerate(periods)))
        return os.path.join(self.dir, "epochs.csv")

    def test_the_last_value_of_a_key(self):
        text = "inserted=5 x\\ninserted=12 reinserted=99\\n"
        self.assertEqual(recovery_row.value_of("inserted", "inserted=5 x\ninserted=12 y\n"), "12")
        self.assertIsNone(recovery_row.value_of("check", text))

    def test_median_period_skips_the_first_epoch_and_takes_the_last(self):
        log = self.epochs([0, 4000, 1000, 3000, 2000, 9000, 8000, 7000])
        self.assertEqual(recovery_row.median_period(log), "4.0")           # of 1,2,3,4,7,8,9 ms
        self.assertEqual(recovery_row.median_period(log, 5), "7.0")        # of 3,2,9,8,7 ms
        self.assertEqual(recovery_row.median_period(log, 4), "7.5")        # of 2,9,8,7 ms
        self.assertEqual(recovery_row.median_period(os.path.join(self.dir, "none")), "")

    def test_a_row_from_a_run_directory(self):
        self.write("run.out", "inserted=100\ninserted=200\n")
        self.write("recover.out", "recovered=150 recovery_ms=12.5 check=ok\n")
        self.write("stats.json", '{"epochs": 3, "recovery_ns": 2500000}')
        self.epochs([0, 10000, 30000])
        with open(os.path.join(self.dir, "pool"), "wb") as f:
            f.truncate(10 << 20)  # sparse: 10 MiB long, nothing occupied
        table, csv = recovery_row.format_row("pmthreads", "10", "2", "1",
                                             recovery_row.measure(self.dir))
        self.assertEqual(table.split(), ["pmthreads", "10", "20.0", "20.0", "200", "150", "50",
                                         "25.00", "12.5", "2.50", "10.0", "0.0", "ok"])
        self.assertEqual(csv.split(",")[:10] + csv.split(",")[12:],
                         ["pmthreads", "10", "2", "1", "200", "150", "50", "25.0000", "12.5",
                          "2.50", "ok", "20.0", "20.0"])
        self.assertEqual(csv.split(",")[10:12], [str(10 << 20), "0"])

    def test_a_failed_recovery_and_more_recovered_than_printed(self):
        self.write("run.out", "inserted=10\n")
        self.write("recover.out", "recovered=11\n")
        self.write("recover.err", "pool: bad, header\nsecond line\n")
        table, csv = recovery_row.format_row("pmemobj", "-", "2", "1",
                                             recovery_row.measure(self.dir))
        self.assertEqual(table.split()[4:10], ["10", "11", "0", "0.00", "nan", "-"])
        self.assertTrue(table.endswith("FAILED(pool: bad  header second line )"), table)
        self.assertEqual(csv.split(",")[9], "")

    def test_header_and_row_have_the_same_columns(self):
        m = dict(inserted=1, recovered=1, recovery_ms="1", rt_ns="", check="ok", period_ms="",
                 period_last_ms="", pool_bytes=0, used_bytes=0)
        table, csv = recovery_row.format_row("b", "1", "1", "1", m)
        self.assertEqual(len(table.split()), len(recovery_row.HEADER.split()))
        self.assertEqual(len(csv.split(",")), len(recovery_row.CSV_HEADER.split(",")))


PERF_SCRIPT = """\
mc_client   100/101
\tffffffff81001000 __sys_sendto
\tffffffff81002000 __x64_sys_sendto
\tffffffff81003000 do_syscall_64
\tffffffff81004000 entry_SYSCALL_64_after_hwframe
\t7f0000001000 send

memcached-pmthr 200/200
\tffffffff81001000 clear_page_erms
\tffffffff81002000 exc_page_fault
\t55550001000 item_alloc

memcached-pmthr 200/205
\tffffffff81005000 __x64_sys_ioctl
\tffffffff81003000 do_syscall_64

mc-worker 200/203
\tffffffff81005000 __x64_sys_pread64
\tffffffff81003000 do_syscall_64

mc-worker 200/203
\t55550002000 process_command

swapper     0/0
\tffffffff81009000 default_idle

kworker/0:1 30/30
\tffffffff81005000 worker_thread
"""


class CpuSplit(unittest.TestCase):
    """memcached-demo/cpu-split.sh's samples, medians and table (pmtkit/cpu_split.py)."""

    def test_each_sample_has_a_group_and_an_activity(self):
        self.assertEqual(list(cpu_split.samples(PERF_SCRIPT.splitlines(True))),
                         [("client", "send"), ("server", "page-fault"),
                          ("runtime", "tracker-ioctl"), ("server", "recv"), ("server", "user"),
                          ("idle", "-"), ("other", "user")])  # no system call frame

    def test_every_thread_of_redis_is_the_server(self):
        for comm in ("redis-server", "bio_aof", "bio_close_file", "io_thd_1"):
            self.assertEqual(cpu_split.group_of(comm, "7", "9"), "server")
        self.assertEqual(cpu_split.group_of("memcached-pmthr", "7", "9"), "runtime")
        self.assertEqual(cpu_split.group_of("memcached-pmthr", "7", "7"), "server")

    def test_the_handler_under_do_syscall_64_names_the_call(self):
        for handler, act in (("__x64_sys_epoll_wait", "epoll"), ("__x64_sys_futex", "futex+membarrier"),
                             ("__x64_sys_membarrier", "futex+membarrier"),
                             ("ksys_write", "send"), ("__x64_sys_nanosleep", "other-kernel")):
            text = f"mc_client 1/1\n\tf {handler}\n\tf do_syscall_64\n"
            self.assertEqual(list(cpu_split.samples(text.splitlines(True))), [("client", act)])

    def test_the_frame_nearest_the_leaf_decides(self):
        # a fault in a system call's copy is a page fault; a call under a fault is the call
        for frames, act in ((["exc_page_fault", "_copy_to_user", "__x64_sys_recvfrom",
                              "do_syscall_64"], "page-fault"),
                            (["__x64_sys_recvfrom", "do_syscall_64", "exc_page_fault"], "recv"),
                            (["sendto_readable", "do_syscall_64"], "send")):  # send's names first
            text = "mc_client 1/1\n" + "".join(f"\tf {fr}\n" for fr in frames)
            self.assertEqual(list(cpu_split.samples(text.splitlines(True))), [("client", act)])

    def test_microseconds_per_request(self):
        # 2 server samples at 250 us each over 100 requests: 5 us per request
        lines = cpu_split.split(PERF_SCRIPT.splitlines(True), 100, 250)
        self.assertIn("server TOTAL 7.50", lines)
        self.assertIn("server recv 2.50", lines)
        self.assertIn("idle - 2.50", lines)
        self.assertEqual(lines, sorted(lines))

    def test_medians_and_table(self):
        out = tempfile.mkdtemp(prefix="pmtkit-test.")
        try:
            for mode, rnd, ops, server, send in (("native", 1, 100, 4.0, 1.0),
                                                 ("native", 2, 300, 6.0, 2.0),
                                                 ("commit", 1, 50, 9.0, 3.0)):
                with open(os.path.join(out, f"{mode}-r{rnd}.result"), "w") as f:
                    f.write(f"1,1,{ops}.0,1,1,1,1,1\n")
                with open(os.path.join(out, f"{mode}-r{rnd}.split"), "w") as f:
                    f.write(f"client TOTAL 1.00\nidle - 0.50\nidle TOTAL 0.50\nother user 0.25\n"
                            f"server TOTAL {server}\nserver send {send}\n")
            with open(os.path.join(out, "commit-r1.split"), "a") as f:
                f.write("runtime TOTAL 2.00\nruntime user 2.00\n")
            found = cpu_split.medians(out, ["native", "commit", "pmthreads"])
            self.assertEqual(list(found), ["native", "commit"])   # pmthreads had no run
            self.assertEqual(found["native"][0], "200.00")
            self.assertEqual(found["native"][1][("server", "TOTAL")], "5.00")
            self.assertEqual(cpu_split.table(found), [
                "| thread group | activity | native (200 ops/s) | commit (50 ops/s) |",
                "| --- | --- | ---: | ---: |",
                "| **client** | **all** | 1.00 | 1.00 |",
                "| **server** | **all** | 5.00 | 9.00 |",
                "|  | send | 1.50 | 3.00 |",
                "| **runtime** | **all** | - | 2.00 |",
                "|  | user | - | 2.00 |",
                "| **idle** | **all** | 0.50 | 0.50 |",   # other's parts are not shown
                "| **busy** | client + server + runtime + other | 6.00 | 12.00 |"])
        finally:
            shutil.rmtree(out)


class TSuite(unittest.TestCase):
    """memcached-demo/run-t-suite.sh's verdicts, rows and summary (pmtkit/t_suite.py)."""

    def test_verdicts(self):
        self.assertEqual(t_suite.verdict("a.t", "ok 1\nAll tests successful.\n", 0), "pass")
        self.assertEqual(t_suite.verdict("ssl.t", "t/ssl.t .. skipped: SSL not enabled\n", 0),
                         "skip: SSL not enabled")
        self.assertEqual(t_suite.verdict("x.t", "1..0 # skip no extstore\n", 0), "skip: ")
        # another file's skip line is not this file's
        self.assertEqual(t_suite.verdict("a.t", "t/b.t .. skipped: x\n", 1)[:5], "fail:")
        log = ("not ok 3 - get, then set\nnot ok 4\n# Looks like\nDubious, test returned 2\n"
               "Failed 2/9 subtests\n")
        self.assertEqual(t_suite.verdict("a.t", log, 1),
                         "fail: not ok 3 - get; then set not ok 4 Dubious; test returned 2 ")
        self.assertEqual(len(t_suite.verdict("a.t", "not ok " + "x" * 500, 1)), 206)

    def test_rows_quote_the_detail(self):
        self.assertEqual(t_suite.csv_row("stock", "uffd", "a.t", "pass"), 'stock,uffd,a.t,pass,""')
        self.assertEqual(t_suite.csv_row("stock", "uffd", "a.t", 'fail: not ok 1 "q"'),
                         "stock,uffd,a.t,fail,\"not ok 1 'q'\"")
        self.assertEqual(t_suite.csv_row("native", "none", "b.t", "skip: "),
                         'native,none,b.t,skip,""')

    def test_collect_counts_and_tells_expected_failures_apart(self):
        d = tempfile.mkdtemp(prefix="pmtkit-test.")
        try:
            out = os.path.join(d, "results.csv")
            tsv = "b.t\tfail: not ok 2\na.t\tpass\nc.t\tskip: no ssl\nd.t\tfail: Dubious\n"
            notes, unexpected = t_suite.collect(tsv, "pmthreads", "uffd", ("b.t",), out, 7)
            self.assertTrue(unexpected)
            self.assertEqual(notes, ["pmthreads-uffd: b.t failed (expected: see README)",
                                     "pmthreads-uffd: d.t FAILED: Dubious",
                                     "pmthreads-uffd: 1 pass, 1 skip, 2 fail in 7 s"])
            with open(out) as f:
                self.assertEqual([ln.split(",")[2] for ln in f], ["a.t", "b.t", "c.t", "d.t"])
            _, unexpected = t_suite.collect("b.t\tfail: x\n", "pmthreads", "uffd", ("b.t",), out, 1)
            self.assertFalse(unexpected)
        finally:
            shutil.rmtree(d)

    def test_summary(self):
        rows = [dict(mode="stock", tracker="uffd", file="b.t", result="fail", detail="x" * 70),
                dict(mode="stock", tracker="uffd", file="a.t", result="pass", detail=""),
                dict(mode="native", tracker="none", file="a.t", result="skip", detail="why")]
        self.assertEqual(t_suite.summary(rows), [
            "| file | stock/uffd | native/none |", "| --- | --- | --- |",
            "| a.t | pass | skip |", "| b.t | fail (" + "x" * 60 + ") |  |", "",
            "- stock/uffd: 1 pass, 0 skip, 1 fail", "- native/none: 0 pass, 1 skip, 0 fail"])


class CrashLoss(unittest.TestCase):
    """memcached-demo/crash-test.sh's loss report (pmtkit/crash_loss.py)."""

    LINE = ("round=2 acked=3575 required=0 present=3427 missing_required=0 wrong=0 "
            "present_unacked=0 lost_within_window=148 oldest_lost_ack_ns=%d last_ack_ns=%d")

    def test_the_lower_median_of_the_last_ten_epochs_with_a_value(self):
        rows = [dict(period_us=p) for p in [0, 9000, 9000, 9000] + list(range(100, 1100, 100))]
        self.assertEqual(crash_loss.epoch_median(rows, "period_us"), 500)  # of 100..1000
        rows = [dict(period_us=p) for p in (0, 30, 10, 20, 40)]
        self.assertEqual(crash_loss.epoch_median(rows, "period_us"), 20)   # lower of 20, 30
        self.assertEqual(crash_loss.epoch_median([dict(period_us=0)], "period_us"), 0)

    def test_a_loss_in_achieved_periods(self):
        kill = 10**18
        text, x1000 = crash_loss.loss(kill, 40000, 113, self.LINE % (kill - 50_000_000, kill - 1))
        self.assertEqual(x1000, 1250)
        self.assertEqual(text, "  loss: 148 of 3575 acknowledged sets lost, the oldest acknowledged "
                         "50 ms before the kill = 1.25 achieved epoch periods (40 ms; median "
                         "pause + write-back of an epoch: 113 us)")
        self.assertEqual(crash_loss.loss(kill, 0, 1, self.LINE % (kill - 5, kill))[1], 0)

    def test_no_loss(self):
        kill = 10**18
        text, x1000 = crash_loss.loss(kill, 99000, 1, self.LINE % (0, kill - 7_500_000))
        self.assertEqual((text, x1000), ("  loss: 0 of 3575 acknowledged sets lost (last ack 7 ms "
                                         "before the kill; achieved epoch period 99 ms)", 0))

    def test_the_worst_window_over_the_rounds(self):
        d = tempfile.mkdtemp(prefix="pmtkit-test.")
        try:
            w = os.path.join(d, "windows")
            with open(w, "w") as f:
                f.write("1250\n5220\n0\n")
            p = subprocess.run([sys.executable, "-B", "-m", "pmtkit.crash_loss", "worst", w],
                               cwd=str(Path(__file__).resolve().parent), capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(p.stdout, "largest loss window: 5.22 achieved epoch periods\n")
        finally:
            shutil.rmtree(d)


class PosixConformance(unittest.TestCase):
    """tools/posix-conformance's command line, results and table
    (pmtkit/posix_conformance.py)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pmtkit-test.")
        self.suite = os.path.join(self.dir, "ltp/testcases/open_posix_testsuite")
        os.makedirs(os.path.join(self.suite, "include"))
        open(os.path.join(self.suite, "include/posixtest.h"), "w").close()
        self.build = os.path.join(self.dir, "build")
        os.makedirs(os.path.join(self.build, "tools"))
        os.makedirs(os.path.join(self.build, "preload"))
        open(os.path.join(self.build, "preload/libpmthreads.so"), "w").close()
        launcher = os.path.join(self.build, "tools/pmthreads")
        open(launcher, "w").close()
        os.chmod(launcher, 0o755)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_defaults_and_an_ltp_tree(self):
        o = posix.parse(["--build", self.build, os.path.join(self.dir, "ltp")], {"USER": "u"})
        self.assertEqual(o["source"], os.path.realpath(self.suite))
        self.assertEqual((o["work"], o["modes"], o["timeout_s"], o["jobs"], o["rebuild"]),
                         ("/tmp/pmthreads-posix-u", "native,nvmalloc,malloc-uffd,malloc-mprotect",
                          "60", "1", "false"))
        self.assertEqual(o["launcher"], os.path.join(os.path.realpath(self.build), "tools/pmthreads"))
        self.assertEqual(o["interfaces"], "*")

    def test_options(self):
        o = posix.parse(["--rebuild", "--jobs", "2", "--timeout", "0", "--modes", "native,nvmalloc",
                         "--interfaces", "fork", "--work", "/w", "--build", self.build, self.suite],
                        {"USER": "u"})
        self.assertEqual((o["rebuild"], o["jobs"], o["timeout_s"], o["modes"], o["interfaces"],
                          o["work"]), ("true", "2", "0", "native,nvmalloc", "fork", "/w"))
        self.assertIn("mode_list=(native nvmalloc)", posix.shell_assignments(o))
        self.assertIn("work=/w\n", posix.shell_assignments(o))
        self.assertIsNone(posix.parse(["--jobs", "0", "--help"], {}))

    def test_bad_command_lines(self):
        b = ["--build", self.build]
        for args, msg in ((["--bogus"], "unknown option --bogus"),
                          ([self.suite, self.suite], "one SOURCE only"),
                          (["--timeout"], "--timeout needs seconds"),
                          (b, "give the suite's source"),
                          (b + [self.dir], "is not the Open POSIX Test Suite"),
                          (b + ["--timeout", "1.5", self.suite], "--timeout takes whole seconds"),
                          (b + ["--jobs", "0", self.suite], "--jobs takes a positive number"),
                          (["--build", "/nonexistent", self.suite], "no build tree /nonexistent"),
                          (["--build", self.dir, self.suite], "has no tools/pmthreads"),
                          (b + ["--modes", "native,uffd", self.suite], "unknown mode uffd")):
            with self.assertRaisesRegex(posix.BadInput, msg):
                posix.parse(args, {"USER": "u"})

    def test_results_from_exit_statuses(self):
        self.assertEqual([posix.result_of(s) for s in ("0", "1", "2", "4", "5", "hung", "3", "-11",
                                                       "-6", "-9", "255", "137")],
                         ["PASS", "FAIL", "UNRESOLVED", "UNSUPPORTED", "UNTESTED", "HUNG", "EXIT3",
                          "SIGSEGV", "SIGABRT", "SIGKILL", "EXIT255", "EXIT137"])
        lo, hi = signal.SIGRTMIN, signal.SIGRTMAX
        self.assertEqual([posix.signal_name(n) for n in (lo, lo + 3, hi - 1, hi, 99)],
                         ["RTMIN", "RTMIN+3", "RTMAX-1", "RTMAX", "99"])

    def test_tests_are_the_suites_number_number_files(self):
        top = os.path.join(self.suite, "conformance/interfaces")
        files = {"pthread_create/1-1.c": "int main(void) { return 0; }\n",
                 # main in an included file, as the suite's own pthread_create/15-1.c
                 "pthread_create/15-1.c": '#include "../testfrmw/threads_scenarii.c"\n',
                 "pthread_create/13.sh": "exit 0\n",
                 "pthread_once/4-1-buildonly.c": "int main(void) { return 0; }\n",
                 "testfrmw/threads_scenarii.c": "int main(void) { return 0; }\n",
                 "mlockall/speculative/15-1.c": "int main(void) { return 0; }\n",
                 "mmap/2-1.c": "int main(void) { return 0; }\n",
                 "aio_read/1-1.c": "", "sched_yield/1-1.c": "", "shm_open/1-1.c": "",
                 "lio_listio/15-1.c": "", "munmap/1-1.c": ""}
        for f, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(top, f)), exist_ok=True)
            with open(os.path.join(top, f), "w") as out:
                out.write(text)
        found = posix.tests(self.suite, posix.INTERFACES)
        self.assertEqual([n for n, _, _ in found],
                         ["aio_read/1-1", "lio_listio/15-1", "mlockall/speculative/15-1", "mmap/2-1",
                          "munmap/1-1", "pthread_create/1-1", "pthread_create/15-1",
                          "sched_yield/1-1", "shm_open/1-1"])
        self.assertEqual(found[2][1:], (os.path.join(top, "mlockall/speculative/15-1.c"),
                                        os.path.join(top, "mlockall")))
        self.assertEqual([n for n, _, _ in posix.tests(self.suite, "pthread_* mm*")],
                         ["mmap/2-1", "pthread_create/1-1", "pthread_create/15-1"])

    def test_a_run_is_hung_only_when_the_time_limit_ended_it(self):
        work = os.path.join(self.dir, "work")
        for d in ("bin/t", "logs", "run"):
            os.makedirs(os.path.join(work, d))
        scripts = {"t/1-1": "exit 255", "t/2-1": "exit 137", "t/3-1": "kill -KILL $$",
                   "t/4-1": "exec sleep 1000", "t/5-1": 'touch a && test "$1" = x || exit 1',
                   "t/6-1": "sleep 1000 & exit 0"}
        with open(os.path.join(work, "tests.txt"), "w") as lst:
            for name, body in scripts.items():
                path = os.path.join(work, "bin", name)
                with open(path, "w") as f:
                    f.write("#!/bin/sh\n" + body + "\n")
                os.chmod(path, 0o755)
                lst.write(f"{name} {self.dir}/{name.replace('/', '_')}.args\n")
        with open(os.path.join(self.dir, "t_5-1.args"), "w") as f:
            f.write("x\n")
        posix.run(work, os.path.join(work, "tests.txt"), "/nonexistent", "/lib.so", 2, 2,
                  ["native"])
        with open(os.path.join(work, "status.tsv")) as f:
            got = posix.results_tsv(f, ["native"])
        self.assertEqual(got, ["test\tnative", "t/1-1\tEXIT255", "t/2-1\tEXIT137",
                               "t/3-1\tSIGKILL", "t/4-1\tHUNG", "t/5-1\tPASS", "t/6-1\tPASS"])
        self.assertEqual(os.listdir(os.path.join(work, "run")), [])

    def test_commands_per_mode(self):
        self.assertEqual(posix.command("native", "/l", "/b", "/p"), ["/b"])
        self.assertEqual(posix.command("nvmalloc", "/l", "/b", "/p"),
                         ["/l", "run", "--pool", "/p", "--", "/b"])
        self.assertEqual(posix.command("malloc-mprotect", "/l", "/b", "/p"),
                         ["/l", "run", "--heap", "malloc", "--tracker", "mprotect", "--pool", "/p",
                          "--", "/b"])

    def test_results_tsv_sorted_with_a_header(self):
        self.assertEqual(posix.results_tsv(["b/1-1\t0\thung\n", "a/2-1\t1\t0\n", "cut\t0\n"],
                                           ["native", "nvmalloc"]),
                         ["test\tnative\tnvmalloc", "a/2-1\tFAIL\tPASS", "b/1-1\tPASS\tHUNG"])

    def test_table(self):
        lines = ["test\tnative\tnvmalloc\tmalloc-uffd\n", "a\tPASS\tPASS\tFAIL\n",
                 "b\tPASS\tHUNG\tSIGSEGV\n", "c\tFAIL\tPASS\tFAIL\n"]
        self.assertEqual(posix.table(lines), [
            "| mode | tests | pass | pass natively, not here |", "|---|---|---|---|",
            "| native | 3 | 2 | - |", "| nvmalloc | 3 | 2 | 1 |", "| malloc-uffd | 3 | 0 | 2 |",
            "", "nvmalloc: 1 test(s) pass natively but not here:", "  b: HUNG",
            "", "malloc-uffd: 2 test(s) pass natively but not here:", "  a: FAIL",
            "  b: SIGSEGV"])


class MemcachedBuild(unittest.TestCase):
    """memcached-demo/fetch-and-build.sh's decisions (pmtkit/memcached_build.py)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pmtkit-test.")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_command_line_as_getopts_reads_it(self):
        o, h = memcached_build.parse(["-fS", "-Bbuild", "-o", "out", "rest", "-F"])
        self.assertEqual((o, h), (dict(B="build", o="out", f=True, F=False, S=True), False))
        self.assertTrue(memcached_build.parse(["-f", "-h", "-x"])[1])
        for bad in (["-x"], ["-B"], ["-fq"]):
            with self.assertRaisesRegex(memcached_build.Failed, "usage: fetch-and-build.sh"):
                memcached_build.parse(bad)

    def test_link_against_a_build_directory(self):
        os.makedirs(os.path.join(self.dir, "preload"))
        with self.assertRaisesRegex(memcached_build.Failed, "libpmthreads.so not found"):
            memcached_build.link(self.dir, False)
        open(os.path.join(self.dir, "preload/libpmthreads.so"), "w").close()
        d = os.path.realpath(self.dir)
        self.assertEqual(memcached_build.link(self.dir, False),
                         (d, f"-I{memcached_build.SRC_DIR}/lib/include",
                          f"-L{d}/preload -Wl,-rpath,{d}/preload -lpmthreads",
                          f"{d}/preload/libpmthreads.so"))
        self.assertEqual(memcached_build.link(self.dir, True), ("", "", "", ""))
        with self.assertRaisesRegex(memcached_build.Failed, "no such directory: /nonexistent"):
            memcached_build.link("/nonexistent", False)

    def test_link_against_an_installed_pmthreads(self):
        answers = {("--exists", "pmthreads"): "", ("--variable=libdir", "pmthreads"): "/usr/lib",
                   ("--cflags", "pmthreads"): "-I/usr/include/pmthreads",
                   ("--libs", "pmthreads"): "-lpmthreads"}
        self.assertEqual(memcached_build.link("", False, pkg=lambda *a: answers.get(a))[1:],
                         ("-I/usr/include/pmthreads", "-lpmthreads -Wl,-rpath,/usr/lib",
                          "/usr/lib/libpmthreads.so"))

    def test_never_inside_the_source_checkout(self):
        src = os.path.realpath(self.dir)
        self.assertEqual(memcached_build.out_dir("", f"{src}/build", src), f"{src}/build/memcached-demo")
        self.assertEqual(memcached_build.out_dir(f"{src}/build-asan/x", "", src), f"{src}/build-asan/x")
        self.assertEqual(memcached_build.out_dir(f"{src}-other", "", src), f"{src}-other")
        with self.assertRaisesRegex(memcached_build.Failed, "refusing to build inside"):
            memcached_build.out_dir(f"{src}/lib", "", src)

    def test_dependencies_and_configure_options(self):
        notes = []
        opts = memcached_build.configure_options(which=lambda t: "/bin/" + t,
                                                 pkg=lambda *a: None if a[1] == "openssl" else "",
                                                 note=notes.append)
        self.assertEqual(opts, ["--enable-sasl", "--disable-coverage"])
        self.assertEqual(notes, ["libssl-dev not installed: building without TLS"])
        self.assertIn("--enable-tls", memcached_build.configure_options(
            which=lambda t: "/bin/" + t, pkg=lambda *a: ""))
        with self.assertRaises(memcached_build.Failed) as e:
            memcached_build.configure_options(which=lambda t: None if t in ("patch", "cc") else t,
                                              pkg=lambda *a: None if a[1] == "libsasl2" else "")
        self.assertEqual(e.exception.status, 4)
        self.assertTrue(str(e.exception).startswith("error: missing: patch cc libsasl2(-dev)\n"
                                                    "  install: apt-get install "))

    def test_deb_entries_become_deb_src(self):
        etc, dest = os.path.join(self.dir, "etc"), os.path.join(self.dir, "dest")
        os.makedirs(os.path.join(etc, "sources.list.d"))
        os.makedirs(dest)
        self.assertEqual(memcached_build.deb_src(etc, dest), 0)
        with open(os.path.join(etc, "sources.list"), "w") as f:
            f.write("# deb http://x y main\n  deb\thttp://a bookworm main\ndeb-src http://b c d\n")
        with open(os.path.join(etc, "sources.list.d/d.sources"), "w") as f:
            f.write("Types: deb\nURIs: http://a\n\nTypes: deb deb-src\nURIs: http://b\n")
        with open(os.path.join(etc, "sources.list.d/rpm.sources"), "w") as f:
            f.write("Types: rpm\n")
        self.assertEqual(memcached_build.deb_src(etc, dest), 2)
        self.assertEqual(sorted(os.listdir(dest)), ["d.sources", "sources.list"])
        with open(os.path.join(dest, "sources.list")) as f:
            self.assertEqual(f.read(), "deb-src http://a bookworm main\n")
        with open(os.path.join(dest, "d.sources")) as f:
            self.assertEqual(f.read(), "Types: deb-src\nURIs: http://a\n\nTypes: deb-src\n"
                             "URIs: http://b\n")


ROOT = Path(__file__).resolve().parent.parent


class Users(unittest.TestCase):
    """Every script that imports pmtkit finds it from where it sits and gets
    as far as its usage message (no ImportError, whatever the current
    directory)."""

    def usage(self, script, *args, status):
        run = [] if not script.endswith(".py") else [sys.executable]
        p = subprocess.run(run + [str(ROOT / script), *args], cwd="/",
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

    def bench(self, *args):
        """bench.sh from an empty directory with a MODES and CONFIGS no run
        accepts: a broken command line cannot start a real bench here."""
        d = tempfile.mkdtemp(prefix="pmtkit-test.")
        try:
            return subprocess.run([str(ROOT / "memcached-demo/bench.sh"), *args], cwd=d,
                                  env=dict(os.environ, MODES="none", CONFIGS="none"),
                                  capture_output=True, text=True, timeout=60)
        finally:
            shutil.rmtree(d)

    def test_memcached_bench(self):
        p = self.bench("--help")
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertIn("usage: bench.sh [--quick] [OUT_DIR]", p.stdout)

    def test_memcached_bench_refuses_an_unknown_option(self):
        p = self.bench("--qiuck")
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr, "bench.sh: error: unknown option --qiuck (--cost, --quick, -h)\n")

    def test_posix_conformance(self):
        p = subprocess.run([str(ROOT / "tools/posix-conformance"), "--help"], cwd="/",
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertIn("  tools/posix-conformance [options] SOURCE\n", p.stdout)
        self.assertIn("  --jobs N ", p.stdout)

    def test_fetch_and_build_refuses_an_unknown_option(self):
        p = subprocess.run([str(ROOT / "memcached-demo/fetch-and-build.sh"), "-x"], cwd="/",
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn("fetch-and-build.sh: error: usage: fetch-and-build.sh [-B", p.stderr)

    def test_the_scripts_modules_run_as_commands(self):
        for module in ("cpu_split", "t_suite", "crash_loss", "recovery_row", "posix_conformance",
                       "memcached_build"):
            p = subprocess.run([sys.executable, "-B", "-m", "pmtkit." + module], cwd="/",
                               env=dict(os.environ, PYTHONPATH=str(ROOT / "tools")),
                               capture_output=True, text=True, timeout=60)
            self.assertNotIn("Traceback", p.stderr, p.stderr)
            self.assertEqual(p.returncode, 1, module)
            self.assertIn("python3 -m pmtkit." + module, p.stderr)

    def test_harness(self):
        self.usage("parsec-ports/harness/run.py", "--help", status=0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
