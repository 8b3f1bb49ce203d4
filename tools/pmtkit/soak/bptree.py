# SPDX-License-Identifier: BSD-3-Clause
"""bptree.py -- the soak's persistent B+tree stream
(parsec-ports/recovery/bptree_crash -c: recovers, checks, goes on inserting)."""

import os
import subprocess

from pmtkit.soak.stream import Stream


class BptreeStream(Stream):
    def parse(self, lines):
        recovered = None
        torn = False
        why = ""
        points = []
        for ln in lines:
            if ln.startswith("inserted="):
                kv = dict(w.split("=", 1) for w in ln.split() if "=" in w)
                if "t_ns" in kv and "durable" in kv:
                    points.append((int(kv["t_ns"]), int(kv["inserted"]), int(kv["durable"])))
            elif ln.startswith("recovered="):
                kv = dict(w.split("=", 1) for w in ln.split()[:4] if "=" in w)
                recovered = int(kv.get("recovered", "0"))
                if kv.get("check") != "ok":
                    torn = True
                    why = ln
        return recovered, torn, why, points

    def exe(self):
        return os.path.join(self.args.build, "parsec-ports", "recovery", "bptree_crash")

    def after_recovery(self, recovered, torn, why):
        if torn:
            self.stats.torn += 1
            self.stats.note("TORN FASE: " + why)
        elif recovered is not None:
            self.check_pending(recovered)

    def round(self):
        lines, t_exec, t_kill, early, err = self.spawn_and_kill(
            [self.exe(), "-c", "-t", str(self.args.threads)])
        recovered, torn, why, points = self.parse(lines)
        if torn and early is not None:
            self.stats.errors -= 1  # exiting 1 on a failed check is the report itself
        self.after_recovery(recovered, torn, why)
        if early is None:
            self.record_kill(points, t_exec, t_kill)

    def final_check(self):
        if self.pending is None:
            return
        p = subprocess.run([self.exe(), "-r"], env=self.env(), capture_output=True, text=True,
                           timeout=300)
        recovered, torn, why, _ = self.parse(p.stdout.splitlines())
        if "no tree in the pool" in p.stdout:
            recovered, torn = 0, False
        if recovered is None:
            self.stats.errors += 1
            self.stats.note(f"-r failed: {p.stdout.strip()} {p.stderr.strip()}")
            self.pending = None
            return
        self.after_recovery(recovered, torn, why)

