# SPDX-License-Identifier: BSD-3-Clause
"""servers.py -- the processes bench.sh runs: servers that cannot outlive
it (a watchdog process kills each after MC_MAX_SECONDS, even when the bench
was killed; exit kills the rest),
the ports they listen on, the client it compiles, the binaries it finds."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from pmtkit.ports import MC_HOST
from pmtkit.scratch import scratch_dir

DEMO_DIR = Path(__file__).resolve().parents[3] / "memcached-demo"
SRC_DIR = DEMO_DIR.parent


def build_dir(env):
    return Path(env.get("BUILD_DIR") or SRC_DIR / "build")


def mc_user_args():
    """memcached refuses to run as root without -u."""
    return ["-u", "root"] if os.getuid() == 0 else []


class Processes:
    """The servers and scratch directories of one bench run; close() (at
    exit) kills the servers with SIGKILL and removes the directories unless
    KEEP_TMP is set."""

    def __init__(self, env, max_seconds, note):
        self.env, self.max_seconds, self.note = env, max_seconds, note
        self.servers, self.dirs = [], []
        self.server = None      # the last one started

    def scratch(self, prefix="pmthreads-memcached.", parent=None):
        d = scratch_dir(prefix, parent)
        self.dirs.append(d)
        return d

    def start(self, log, port, argv, env=None):
        """Starts argv with its output appended to log; True when it accepts
        on port within 30 s."""
        with open(log, "ab") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=env)
        # a process of its own, so that it kills the server even when the
        # bench itself is killed with SIGKILL
        p.watchdog = subprocess.Popen(
            ["sh", "-c", f"sleep {self.max_seconds}; kill -9 {p.pid} 2>/dev/null"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.servers.append(p)
        self.server = p
        for _ in range(30 * 20):
            try:
                socket.create_connection((MC_HOST, port), timeout=1).close()
                return True
            except OSError:
                pass
            if p.poll() is not None:
                break
            time.sleep(0.05)
        self.note(f"server did not come up on port {port}; its log ({log}):")
        try:
            lines = Path(log).read_text(errors="replace").splitlines()[-20:]
            print("\n".join(lines), file=sys.stderr)
        except OSError:
            pass
        return False

    def stop(self, sig=signal.SIGTERM):
        """Signals the last server started, waits up to 10 s, then kills it."""
        p = self.server
        if p is None:
            return
        if p.poll() is None:
            p.send_signal(sig)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        self._cancel(p)

    @staticmethod
    def _cancel(p):
        """Stops p's watchdog (its shell and the shell's sleep)."""
        if p.watchdog.poll() is None:
            try:
                os.killpg(p.watchdog.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            p.watchdog.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass  # it goes by itself after MC_MAX_SECONDS

    def close(self):
        for p in self.servers:
            if p.poll() is None:
                p.kill()
                p.wait()
            self._cancel(p)
        if not self.env.get("KEEP_TMP"):
            for d in self.dirs:
                shutil.rmtree(d, ignore_errors=True)


def build_client(env, out_dir):
    """Compiles mc_client.c into out_dir (when it is older than its source);
    its path, None when the compiler failed."""
    out = Path(out_dir) / "mc_client"
    src = DEMO_DIR / "mc_client.c"
    if not out.exists() or src.stat().st_mtime > out.stat().st_mtime:
        cc = (env.get("CC") or "cc").split()
        if subprocess.run(cc + ["-O2", "-Wall", "-pthread", "-o", str(out), str(src)]).returncode:
            return None
    return str(out)


def find_libpmthreads(env):
    """$LIBPMTHREADS, else the build directory's, else pkg-config's (None: none)."""
    for c in (env.get("LIBPMTHREADS"), build_dir(env) / "preload/libpmthreads.so"):
        if c and Path(c).is_file():
            return str(c)
    try:
        d = subprocess.run(["pkg-config", "--variable=libdir", "pmthreads"],
                           capture_output=True, text=True).stdout.strip()
    except OSError:
        d = ""
    if d and Path(d, "libpmthreads.so").is_file():
        return str(Path(d, "libpmthreads.so"))
    return None


def find_memcached_pmthreads(env):
    """$MEMCACHED_PMTHREADS, else where fetch-and-build.sh puts it."""
    for c in (env.get("MEMCACHED_PMTHREADS"),
              build_dir(env) / "memcached-demo/memcached-pmthreads"):
        if c and os.access(c, os.X_OK) and Path(c).is_file():
            return str(c)
    return None
