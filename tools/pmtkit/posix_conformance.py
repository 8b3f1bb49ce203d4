# SPDX-License-Identifier: BSD-3-Clause
"""posix_conformance.py -- tools/posix-conformance's command line, the
results of its runs and its table (the script builds and runs the tests).

  python3 -m pmtkit.posix_conformance options ARG...
      checks the command line; prints it as shell assignments (build, work,
      source, interfaces, modes, mode_list, timeout_s, jobs, rebuild,
      launcher, library) for the script to eval, or with --help the
      commands that print USAGE and exit; status 2 and a message on stderr
      for a command line it cannot run
  python3 -m pmtkit.posix_conformance results RAW MODE...
      RAW's "TEST<tab>STATUS..." lines (exit statuses, one per mode) as
      results.tsv: a header, then a line per test, sorted, with results
  python3 -m pmtkit.posix_conformance table RESULTS
      the comparison table of results.tsv
"""

import os
import re
import shlex
import signal
import sys

USAGE = """
posix-conformance -- build the Open POSIX Test Suite from a source tree the
user points at, run each test natively and under `pmthreads run` in both
heap modes and with both trackers, and print a comparison table.

The suite is part of the Linux Test Project (testcases/open_posix_testsuite
in https://github.com/linux-test-project/ltp).  It is GPL and not packaged
in Debian: nothing of it is committed here and CI does not run it.

  tools/posix-conformance [options] SOURCE

SOURCE   LTP's testcases/open_posix_testsuite, or an LTP tree holding it
Options:
  --build DIR        the pmthreads build tree (default: build)
  --work DIR         binaries, logs and results (default: /tmp/pmthreads-posix-$USER)
  --interfaces LIST  space-separated globs over conformance/interfaces/
                     (default: the pthread, semaphore, signal, kill and fork ones)
  --modes LIST       comma-separated, of: native, nvmalloc, malloc-uffd,
                     malloc-mprotect (default: all four)
  --timeout S        seconds per test run before SIGKILL (default 60)
  --jobs N           tests run at once (default 1)
  --rebuild          compile again even where a binary exists

Each test's exit status is its result (posixtest.h: 0 PASS, 1 FAIL, 2
UNRESOLVED, 4 UNSUPPORTED, 5 UNTESTED); a run killed by the time limit is
HUNG, one killed by a signal SIG<name>.  WORK/results.tsv has one line per
test and mode; the table says, per mode, how many pass, and lists every test
that passes natively but not in that mode.
"""

MODES = ("native", "nvmalloc", "malloc-uffd", "malloc-mprotect")
INTERFACES = ("pthread_* sem_* sigaction sigaltstack sighold sigignore signal sigpause sigrelse "
              "sigset sigprocmask sigsuspend sigwait sigqueue sigpending sigtimedwait "
              "sigwaitinfo raise kill killpg fork")
VALUED = {"--build": "a directory", "--work": "a directory", "--interfaces": "a list",
          "--modes": "a list", "--timeout": "seconds", "--jobs": "a number"}
RESULTS = {0: "PASS", 1: "FAIL", 2: "UNRESOLVED", 4: "UNSUPPORTED", 5: "UNTESTED", 137: "HUNG"}


class BadInput(Exception):
    """The message names the problem and the fix."""


def parse(args, env):
    """The settings from the command line (a dict of strings); None for
    -h / --help."""
    user = env.get("USER") or _user_name()
    o = dict(build="build", work=f"/tmp/pmthreads-posix-{user}", interfaces=INTERFACES,
             modes=",".join(MODES), timeout_s="60", jobs="1", rebuild="false", source="")
    i = 0
    while i < len(args):
        a = args[i]
        if a in VALUED:
            if i + 1 >= len(args) or not args[i + 1]:
                raise BadInput(f"{a} needs {VALUED[a]}")
            o[{"--timeout": "timeout_s"}.get(a, a[2:])] = args[i + 1]
            i += 2
            continue
        if a == "--rebuild":
            o["rebuild"] = "true"
        elif a in ("-h", "--help"):
            return None
        elif a.startswith("-"):
            raise BadInput(f"unknown option {a} (see --help)")
        elif o["source"]:
            raise BadInput("one SOURCE only (see --help)")
        else:
            o["source"] = a
        i += 1
    return check(o)


def _user_name():
    try:
        import pwd
        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return str(os.getuid())


def check(o):
    """Resolves the paths and checks every setting, in the order a user
    fixes them."""
    src = o["source"]
    if not src:
        raise BadInput("give the suite's source: LTP's testcases/open_posix_testsuite "
                       "(see --help)")
    if os.path.isfile(os.path.join(src, "testcases/open_posix_testsuite/include/posixtest.h")):
        src = os.path.join(src, "testcases/open_posix_testsuite")
    if not os.path.isfile(os.path.join(src, "include/posixtest.h")):
        raise BadInput(f"{src} is not the Open POSIX Test Suite (no include/posixtest.h); "
                       "point it at LTP's testcases/open_posix_testsuite")
    o["source"] = os.path.realpath(src)
    if not re.fullmatch(r"[0-9]+", o["timeout_s"]):
        raise BadInput(f"--timeout takes whole seconds, not {o['timeout_s']}")
    if not re.fullmatch(r"[1-9][0-9]*", o["jobs"]):
        raise BadInput(f"--jobs takes a positive number, not {o['jobs']}")
    if not os.path.isdir(o["build"]):
        raise BadInput(f"no build tree {o['build']} (meson setup build && ninja -C build)")
    o["build"] = os.path.realpath(o["build"])
    o["launcher"] = os.path.join(o["build"], "tools/pmthreads")
    o["library"] = os.path.join(o["build"], "preload/libpmthreads.so")
    if not (os.access(o["launcher"], os.X_OK) and os.path.isfile(o["library"])):
        raise BadInput(f"{o['build']} has no tools/pmthreads or preload/libpmthreads.so: "
                       f"build it first (ninja -C {o['build']})")
    for m in o["modes"].split(","):
        if m not in MODES:
            raise BadInput(f"unknown mode {m}: use native, nvmalloc, malloc-uffd, malloc-mprotect")
    return o


def shell_assignments(o):
    lines = [f"{k}={shlex.quote(v)}" for k, v in o.items()]
    lines.append("mode_list=(" + " ".join(shlex.quote(m) for m in o["modes"].split(",")) + ")")
    return "\n".join(lines)


def signal_name(n):
    """bash's `kill -l N` (RTMIN+k up to the middle of the real-time range,
    RTMAX-k above it), N itself when there is no such signal."""
    lo, hi = signal.SIGRTMIN, signal.SIGRTMAX
    if lo <= n <= hi:
        if n == lo:
            return "RTMIN"
        if n == hi:
            return "RTMAX"
        return f"RTMIN+{n - lo}" if n - lo <= (hi - lo) // 2 else f"RTMAX-{hi - n}"
    try:
        return signal.Signals(n).name[3:]
    except ValueError:
        return str(n)


def result_of(status):
    """A run's result from its exit status (posixtest.h's codes; 137: the
    time limit's SIGKILL)."""
    if status in RESULTS:
        return RESULTS[status]
    return f"SIG{signal_name(status - 128)}" if status > 128 else f"EXIT{status}"


def results_tsv(raw_lines, modes):
    out = ["test\t" + "\t".join(modes)]
    rows = []
    for ln in raw_lines:
        f = ln.rstrip("\n").split("\t")
        if len(f) == len(modes) + 1:
            rows.append("\t".join([f[0]] + [result_of(int(s)) for s in f[1:]]))
    return out + sorted(rows)


def table(lines):
    """The markdown table of results.tsv's lines, then per mode the tests
    that pass natively but not there."""
    head = lines[0].rstrip("\n").split("\t")
    names = head[1:]
    rows = [ln.rstrip("\n").split("\t") for ln in lines[1:] if ln.strip()]
    npass = [sum(1 for r in rows if r[i + 1] == "PASS") for i in range(len(names))]
    miss = [[f"{r[0]}: {r[i + 1]}" for r in rows if r[1] == "PASS" and r[i + 1] != "PASS"]
            for i in range(len(names))]
    out = ["| mode | tests | pass | pass natively, not here |", "|---|---|---|---|"]
    for i, m in enumerate(names):
        out.append(f"| {m} | {len(rows)} | {npass[i]} | {'-' if i == 0 else len(miss[i])} |")
    for i, m in enumerate(names[1:], 1):
        if miss[i]:
            out += ["", f"{m}: {len(miss[i])} test(s) pass natively but not here:"]
            out += ["  " + x for x in miss[i]]
    return out


def main(argv):
    try:
        if argv[:1] == ["options"]:
            o = parse(argv[1:], os.environ)
            if o is None:
                print("echo " + shlex.quote(USAGE.rstrip("\n")) + "; exit 0")
            else:
                print(shell_assignments(o))
        elif len(argv) >= 3 and argv[0] == "results":
            with open(argv[1]) as f:
                print("\n".join(results_tsv(f, argv[2:])))
        elif len(argv) == 2 and argv[0] == "table":
            with open(argv[1]) as f:
                print("\n".join(table(f.readlines())))
        else:
            sys.exit(__doc__.split("\n\n")[1])
    except BadInput as e:
        print(f"posix-conformance: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
