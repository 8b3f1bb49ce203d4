# SPDX-License-Identifier: BSD-3-Clause
"""epoch_log.py -- the rows of a PMTHREADS_EPOCH_LOG (one CSV line per
epoch, written by the runtime's epoch thread).

A run killed with SIGKILL can leave its last line cut short; that line is
skipped, as is any line that is not all numbers.  The columns are whatever
the header names (newer logs add `conflicts,durable`), so readers ask for
the columns they know.
"""


def read_epoch_log(path):
    """Rows of the epoch log at path as dicts of floats ([] when there is no
    such file)."""
    rows = []
    try:
        with open(path) as f:
            header = f.readline().strip().split(",")
            for line in f:
                parts = line.strip().split(",")
                if len(parts) != len(header):
                    continue  # the line the kill cut short
                try:
                    rows.append({h: float(v) for h, v in zip(header, parts)})
                except ValueError:
                    continue
    except OSError:
        pass
    return rows
