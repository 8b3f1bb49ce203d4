# SPDX-License-Identifier: BSD-3-Clause
"""posix_conformance.py -- tools/posix-conformance's command line, the
results of its runs and its table (the script builds and runs the tests).

  python3 -m pmtkit.posix_conformance options ARG...
      checks the command line; prints it as shell assignments (build, work,
      source, interfaces, modes, mode_list, timeout_s, jobs, rebuild,
      launcher, library) for the script to eval, or with --help the
      commands that print USAGE and exit; status 2 and a message on stderr
      for a command line it cannot run
  python3 -m pmtkit.posix_conformance tests SOURCE INTERFACES
      the suite's tests under the interfaces matching INTERFACES (globs),
      one "NAME<tab>SOURCE FILE<tab>INTERFACE DIRECTORY" line each
  python3 -m pmtkit.posix_conformance run WORK LIST LAUNCHER LIBRARY TIMEOUT JOBS MODE...
      runs LIST's tests (the script's "NAME ARGSFILE" lines, binaries in
      WORK/bin) in each mode and writes WORK/status.tsv
  python3 -m pmtkit.posix_conformance results RAW MODE...
      RAW's "TEST<tab>STATUS..." lines (one per mode: an exit status, -N
      for signal N, or "hung") as results.tsv: a header, then a line per
      test, sorted, with results
  python3 -m pmtkit.posix_conformance table RESULTS
      the comparison table of results.tsv
"""

import concurrent.futures
import fnmatch
import os
import re
import shlex
import shutil
import signal
import subprocess
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
                     (default: every interface)
  --modes LIST       comma-separated, of: native, nvmalloc, malloc-uffd,
                     malloc-mprotect (default: all four)
  --timeout S        seconds per test run before SIGKILL (default 60)
  --jobs N           tests run at once (default 1)
  --rebuild          compile again even where a binary exists

Each test's exit status is its result (posixtest.h: 0 PASS, 1 FAIL, 2
UNRESOLVED, 4 UNSUPPORTED, 5 UNTESTED, any other EXIT<status>); a run the
time limit ended is HUNG, one killed by a signal otherwise SIG<name>.  The
tests are what the suite's own build runs: conformance/interfaces/*/
(and speculative/) files named NUMBER-NUMBER.c.  WORK/results.tsv has one line per
test and mode; the table says, per mode, how many pass, and lists every test
that passes natively but not in that mode.
"""

MODES = ("native", "nvmalloc", "malloc-uffd", "malloc-mprotect")
INTERFACES = "*"
# The suite's scripts/locate-test: NUMBER-NUMBER.c is a runnable test (its
# main may be in a file it includes), NUMBER-buildonly.c only compiles, and
# anything else (testfrmw/*.c) is a helper.
TEST_FILE = re.compile(r"[0-9]+-[0-9]+\.c")
VALUED = {"--build": "a directory", "--work": "a directory", "--interfaces": "a list",
          "--modes": "a list", "--timeout": "seconds", "--jobs": "a number"}
RESULTS = {0: "PASS", 1: "FAIL", 2: "UNRESOLVED", 4: "UNSUPPORTED", 5: "UNTESTED"}
HUNG = "hung"


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
    """A run's result from its status as run() records it: an exit status
    (posixtest.h's codes, EXITn for any other, 255 among them: exit(-1)),
    -N for a run signal N killed, HUNG for one the time limit ended."""
    if status == HUNG:
        return "HUNG"
    n = int(status)
    if n < 0:
        return f"SIG{signal_name(-n)}"
    return RESULTS.get(n, f"EXIT{n}")


def results_tsv(raw_lines, modes):
    out = ["test\t" + "\t".join(modes)]
    rows = []
    for ln in raw_lines:
        f = ln.rstrip("\n").split("\t")
        if len(f) == len(modes) + 1:
            rows.append("\t".join([f[0]] + [result_of(s) for s in f[1:]]))
    return out + sorted(rows)


def tests(source, interfaces):
    """(name, source file, interface directory) of every test of the
    interfaces whose names match one of the globs, sorted by name."""
    top = os.path.join(source, "conformance/interfaces")
    found = []
    for iface in sorted(os.listdir(top)):
        idir = os.path.join(top, iface)
        if not os.path.isdir(idir) or not any(fnmatch.fnmatchcase(iface, g) for g in interfaces.split()):
            continue
        for sub in (idir, os.path.join(idir, "speculative")):
            if not os.path.isdir(sub):
                continue
            for f in os.listdir(sub):
                if TEST_FILE.fullmatch(f):
                    path = os.path.join(sub, f)
                    found.append((os.path.relpath(path, top)[:-2], path, idir))
    return sorted(found)


def command(mode, launcher, binary, pool):
    if mode == "native":
        return [binary]
    heap = {"nvmalloc": [], "malloc-uffd": ["--heap", "malloc", "--tracker", "uffd"],
            "malloc-mprotect": ["--heap", "malloc", "--tracker", "mprotect"]}[mode]
    return [launcher, "run"] + heap + ["--pool", pool, "--", binary]


def run_one(argv, cwd, env, log, timeout_s):
    """The status of one run (see result_of).  The run leads a process
    group of its own, so that the time limit ends what it forked too; only
    a run this ended is HUNG."""
    with open(log, "wb") as out:
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout_s or None)
        except subprocess.TimeoutExpired:
            rc = HUNG
        try:
            os.killpg(p.pid, signal.SIGKILL)   # what it left running
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()
    return str(rc)


def run_test(work, name, argsfile, modes, launcher, library, timeout_s):
    args = []
    if argsfile and os.path.isfile(argsfile):
        with open(argsfile) as f:
            args = f.readline().split()
    tag = name.replace("/", "_")
    env = dict(os.environ, PMTHREADS_LIBRARY=library, PMTHREADS_VERBOSE="0")
    line = [name]
    for m in modes:
        d = os.path.join(work, "run", f"{tag}.{m}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        argv = command(m, launcher, os.path.join(work, "bin", name), os.path.join(d, "pool")) + args
        line.append(run_one(argv, d, env, os.path.join(work, "logs", f"{tag}.{m}.out"), timeout_s))
        shutil.rmtree(d, ignore_errors=True)
    return "\t".join(line)


def run(work, list_file, launcher, library, timeout_s, jobs, modes):
    """Runs every test of list_file in every mode, jobs at a time; writes
    work/status.tsv as the runs end."""
    with open(list_file) as f:
        todo = [ln.split(None, 1) + [""] for ln in f if ln.strip()]
    with open(os.path.join(work, "status.tsv"), "w") as out, \
            concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(run_test, work, t[0], t[1].strip(), modes, launcher, library,
                               timeout_s) for t in todo]
        for fu in futures:
            out.write(fu.result() + "\n")
            out.flush()


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
        elif len(argv) == 3 and argv[0] == "tests":
            for name, src, idir in tests(argv[1], argv[2]):
                print(f"{name}\t{src}\t{idir}")
        elif len(argv) >= 8 and argv[0] == "run":
            run(argv[1], argv[2], argv[3], argv[4], int(argv[5]), int(argv[6]), argv[7:])
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
