# SPDX-License-Identifier: BSD-3-Clause
"""percentile.py -- the percentile every report of the project quotes.

Nearest rank: the smallest value with at least pct % of the values at or
below it.  It is always one of the measured values (no interpolation), so a
p99 over a hundred crashes is the 99th worst, not a blend of two.
"""


def percentile(values, pct):
    """The nearest-rank pct-th percentile (0 < pct <= 100) of values, in any
    order; NaN when there are none."""
    s = sorted(values)
    if not s:
        return float("nan")
    rank = -(-pct * len(s) // 100)  # ceil(pct / 100 * n), exact for an integer pct
    return s[max(0, min(len(s), int(rank)) - 1)]
