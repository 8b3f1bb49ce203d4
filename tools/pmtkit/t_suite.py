# SPDX-License-Identifier: BSD-3-Clause
"""t_suite.py -- memcached-demo/run-t-suite.sh's bookkeeping: each test
file's verdict from its prove log, the rows of results.csv, which failures
were expected, and summary.md.

  python3 -m pmtkit.t_suite verdict FILE LOG STATUS
      "pass", "skip: why" or "fail: what" (prove's exit status STATUS)
  python3 -m pmtkit.t_suite collect TSV MODE TRACKER CSV SECONDS
      appends TSV's "FILE<tab>VERDICT" lines to CSV; notes on stderr (SECONDS:
      how long the files took); exit status 1 when a file not in
      EXPECTED_FAIL[MODE] failed
  python3 -m pmtkit.t_suite summary CSV
      summary.md: one row per file, one column per mode/tracker, then counts
"""

import csv
import re
import sys

NOTE = "run-t-suite.sh: "
# Files whose expectation contradicts a persistent cache, per mode (the
# README says why and what memcached-pmthreads does instead).  Empty: none.
EXPECTED_FAIL = {"pmthreads": (), "stock": (), "native": ()}


def verdict(name, log, status):
    """A test file's verdict from its `prove -v` log and exit status."""
    skipped = re.search(r"skipped: (.*)", log)
    if (re.search(rf"^t/{re.escape(name)} .*skipped:", log, re.M) or
            re.search(r"^1\.\.0 # [Ss]kip", log, re.M)):
        return "skip: " + (skipped.group(1) if skipped else "")
    if status == 0:
        return "pass"
    lines = [ln for ln in log.splitlines()
             if re.search(r"^Failed [0-9]+/[0-9]+|^not ok|Dubious|Parse errors", ln)]
    return "fail: " + "".join(ln + " " for ln in lines[:3]).replace(",", ";")[:200]


def csv_row(mode, tracker, name, result):
    """results.csv's line for one file (the detail quoted, its " made ')."""
    res, colon, detail = result.partition(":")
    detail = detail[1:] if detail.startswith(" ") else detail
    return '%s,%s,%s,%s,"%s"' % (mode, tracker, name, res, detail.replace('"', "'") if colon else "")


def collect(tsv_text, mode, tracker, expected, out_csv, seconds):
    """Appends the rows to out_csv; the notes to print; whether a failure
    was unexpected."""
    results = sorted(ln.split("\t", 1) for ln in tsv_text.splitlines() if "\t" in ln)
    with open(out_csv, "a") as f:
        for name, r in results:
            f.write(csv_row(mode, tracker, name, r) + "\n")
    tag, notes, unexpected = f"{mode}-{tracker}", [], False
    for name, r in results:
        if not r.startswith("fail"):
            continue
        if name in expected:
            notes.append(f"{tag}: {name} failed (expected: see README)")
        else:
            notes.append(f"{tag}: {name} FAILED: {r[len('fail: '):]}")
            unexpected = True
    count = {k: sum(r.startswith(k) for _, r in results) for k in ("pass", "skip", "fail")}
    notes.append(f"{tag}: {count['pass']} pass, {count['skip']} skip, {count['fail']} fail "
                 f"in {seconds} s")
    return notes, unexpected


def summary(rows):
    """summary.md's lines from results.csv's rows (dicts)."""
    cols = []
    for r in rows:
        c = r["mode"] + "/" + r["tracker"]
        if c not in cols:
            cols.append(c)
    cell = {(r["file"], r["mode"] + "/" + r["tracker"]): r for r in rows}
    out = ["| file | " + " | ".join(cols) + " |", "| --- |" + " --- |" * len(cols)]
    for name in sorted({r["file"] for r in rows}):
        cells = []
        for c in cols:
            r = cell.get((name, c))
            cells.append("" if r is None else r["result"] + (
                " (" + r["detail"][:60] + ")" if r["result"] == "fail" else ""))
        out.append("| " + name + " | " + " | ".join(cells) + " |")
    out.append("")
    for c in cols:
        n = {k: sum(1 for r in rows if r["mode"] + "/" + r["tracker"] == c and r["result"] == k)
             for k in ("pass", "skip", "fail")}
        out.append("- %s: %d pass, %d skip, %d fail" % (c, n["pass"], n["skip"], n["fail"]))
    return out


def main(argv):
    if len(argv) == 4 and argv[0] == "verdict":
        with open(argv[2], errors="replace") as f:
            print(verdict(argv[1], f.read(), int(argv[3])))
    elif len(argv) == 6 and argv[0] == "collect":
        with open(argv[1]) as f:
            notes, unexpected = collect(f.read(), argv[2], argv[3], EXPECTED_FAIL.get(argv[2], ()),
                                        argv[4], argv[5])
        for n in notes:
            print(NOTE + n, file=sys.stderr)
        sys.exit(1 if unexpected else 0)
    elif len(argv) == 2 and argv[0] == "summary":
        with open(argv[1], newline="") as f:
            print("\n".join(summary(list(csv.DictReader(f)))))
    else:
        sys.exit(__doc__.split("\n\n")[1])


if __name__ == "__main__":
    main(sys.argv[1:])
