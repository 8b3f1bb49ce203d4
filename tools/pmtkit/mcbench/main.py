# SPDX-License-Identifier: BSD-3-Clause
"""main.py -- bench.sh's entry point: the command line, then the sweep or
the cost table, with what both share (messages, the output directory, the
client, report.py)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pmtkit.mcbench import cost, options, sweep
from pmtkit.mcbench.servers import DEMO_DIR, Processes, build_client, build_dir
from pmtkit.ports import MC_HOST


class Bench:
    """One bench.sh run: its name in messages, its servers and directories."""

    def __init__(self, argv0, args):
        self.prog = os.path.basename(argv0)
        self.cmdline = " ".join([argv0] + list(args))
        try:
            max_seconds = int(os.environ.get("MC_MAX_SECONDS") or "300")
        except ValueError:
            self.die(f"MC_MAX_SECONDS={os.environ['MC_MAX_SECONDS']}: a whole number of seconds "
                     "is needed")
        self.procs = Processes(os.environ, max_seconds, self.note)
        self.client_status = 0

    def note(self, msg):
        print(f"{self.prog}: {msg}", file=sys.stderr, flush=True)

    def die(self, msg):
        print(f"{self.prog}: error: {msg}", file=sys.stderr, flush=True)
        sys.exit(2)

    def make_out(self, kind, subdirs):
        """OUT_DIR (the argument, else <build>/memcached-demo/KIND-<date>) and
        its subdirectories."""
        out = Path(self.out_arg or build_dir(os.environ) / "memcached-demo" /
                   f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            for d in subdirs:
                (out / d).mkdir(parents=True, exist_ok=True)
        except OSError:
            self.die(f"cannot create {out}")
        self.out = str(out.resolve())

    def build_client(self):
        self.client = build_client(os.environ, self.tmp) or self.die("cannot build mc_client")

    def client_bench(self, tag, port, conns, duration, keys, vsize, setp, proto=None,
                     timeout=None, grace0=False):
        """mc_client bench's result line ('' when it printed none); its exit
        status in client_status (124 when it ran past timeout)."""
        argv = [self.client, "bench", MC_HOST, str(port), str(conns), str(duration), str(keys),
                str(vsize), str(setp)] + ([proto] if proto else [])
        env = dict(os.environ, MC_GRACE_MS="0") if grace0 else None
        with open(f"{self.out}/logs/{tag}.client", "ab") as err:
            try:
                p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=err, env=env,
                                   timeout=timeout)
                self.client_status, out = p.returncode, p.stdout
            except subprocess.TimeoutExpired as e:
                self.client_status, out = 124, e.stdout or b""
        return out.decode(errors="replace").strip()

    def append_row(self, line):
        with open(self.csv, "a") as f:
            f.write(line + "\n")

    def report(self):
        if subprocess.run([sys.executable, str(DEMO_DIR / "report.py"), self.out]).returncode:
            self.die("report.py failed")


def _exit_130(signum, frame):
    sys.exit(130)


def main(argv0, args):
    b = Bench(argv0, args)
    try:
        quick, want_cost, b.out_arg = options.parse_args(args)
    except options.HelpWanted:
        print(options.USAGE, end="")
        sys.exit(0)
    except options.BadInput as e:
        b.die(str(e))
    signal.signal(signal.SIGINT, _exit_130)
    signal.signal(signal.SIGTERM, _exit_130)
    try:
        (cost if want_cost else sweep).main(b, quick)
    finally:
        b.procs.close()
