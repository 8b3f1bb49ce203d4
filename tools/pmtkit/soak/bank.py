# SPDX-License-Identifier: BSD-3-Clause
"""bank.py -- the soak's examples/bank stream: progress lines give the
transfer count, recovery prints the accounts' totals and the ledger."""

import os
import subprocess

from pmtkit.soak.stream import Stream


class BankStream(Stream):
    ACCOUNTS = 1000

    def parse(self, lines):
        """(recovered transfers or None, torn?, progress points)."""
        recovered = None
        torn = False
        points = []
        for ln in lines:
            if ln.startswith("progress "):
                f = ln.split()
                if len(f) == 4:
                    points.append((int(f[1]), int(f[2]), int(f[3])))
            elif ln.startswith("bank: ") and " accounts, " in ln and "transfers received" in ln:
                # bank: N accounts, T transfers, total X (expected Y), transfers received Z
                w = ln.replace(",", "").replace("(", "").replace(")", "").split()
                n, t, total, exp, recv = int(w[1]), int(w[3]), int(w[6]), int(w[8]), int(w[11])
                recovered = t
                if total != exp or recv != t or n != self.ACCOUNTS:
                    torn = True
            elif "INCONSISTENT" in ln:
                torn = True
        return recovered, torn, points

    def argv(self, check=False):
        exe = os.path.join(self.args.build, "examples", "bank")
        a = [exe, "-n", str(self.ACCOUNTS)]
        if check:
            return a + ["--check"]
        return a + ["-t", str(self.args.threads), "-s", "3600", "--progress",
                    "--tick-us", str(self.args.tick_us)]

    def after_recovery(self, recovered, torn, lines):
        if torn:
            self.stats.torn += 1
            self.stats.note("TORN FASE: " + " | ".join(l for l in lines if l.startswith("bank:")))
        if recovered is not None:
            self.check_pending(recovered)

    def round(self):
        lines, t_exec, t_kill, early, err = self.spawn_and_kill(self.argv())
        recovered, torn, points = self.parse(lines)
        self.after_recovery(recovered, torn, lines)
        if early is None:
            self.record_kill(points, t_exec, t_kill)

    def final_check(self):
        if self.pending is None:
            return
        p = subprocess.run(self.argv(check=True), env=self.env(), capture_output=True,
                           text=True, timeout=300)
        lines = p.stdout.splitlines()
        recovered, torn, _ = self.parse(lines)
        if recovered is None and not torn:
            if "no accounts" in p.stdout:
                recovered = 0  # killed before the accounts were first durable
            else:
                self.stats.errors += 1
                self.stats.note(f"--check failed: {p.stdout.strip()} {p.stderr.strip()}")
                self.pending = None
                return
        self.after_recovery(recovered, torn, lines)

