# SPDX-License-Identifier: BSD-3-Clause
"""summary.py -- the soak's Markdown table and JSON rows: per stream and in
all, the counts and the lost work's percentiles (nearest rank)."""

import statistics

from pmtkit.percentile import percentile


def summarize(all_stats, args, elapsed_s):
    rows = []
    hdr = ("program", "tracker", "kills", "checked", "torn", "durable_lost", "durable_rule1",
           "evicted_loss", "errors", "lost_p50_ms", "lost_p99_ms", "lost_max_ms", "achieved_ms",
           "lost_p50_iv", "lost_p99_iv", "lost_max_iv")
    # output commit's streams (memcached-commit): acknowledged sets lost
    # (keys; every one a failure, also counted in durable_lost) and the
    # client's wait for "STORED"; their lost-work columns stay empty, since
    # with the hold nothing acknowledged may be lost at all
    if any(s.commit for s in all_stats):
        hdr += ("acked", "acked_lost", "ack_p50_ms", "ack_p99_ms")
    groups = [(s.program, s.tracker, [s]) for s in all_stats]
    groups.append(("all", "all", all_stats))
    for prog, trk, ss in groups:
        lost = sorted(x for s in ss for x in s.lost_ms)
        iv = sorted(x for s in ss for x in s.lost_intervals)
        # output commit's epochs come on demand (sub-ms periods): the "all"
        # row's period is the other programs' when there are any
        ach = [x for s in ([s for s in ss if not s.commit] or ss) for x in s.achieved_ms]
        rows.append(dict(
            program=prog, tracker=trk, kills=sum(s.kills for s in ss),
            checked=sum(s.checked for s in ss), torn=sum(s.torn for s in ss),
            durable_lost=sum(s.durable_lost for s in ss),
            durable_rule1=sum(s.durable_rule1 for s in ss),
            evicted_loss=sum(s.evicted_loss for s in ss), errors=sum(s.errors for s in ss),
            lost_p50_ms=percentile(lost, 50), lost_p99_ms=percentile(lost, 99),
            lost_max_ms=lost[-1] if lost else float("nan"),
            achieved_ms=statistics.median(ach) if ach else float("nan"),
            lost_p50_iv=percentile(iv, 50), lost_p99_iv=percentile(iv, 99),
            lost_max_iv=iv[-1] if iv else float("nan")))
        commit = [s for s in ss if s.commit]
        ack = sorted(x for s in commit for x in s.ack_us)
        rows[-1].update(
            acked=sum(s.acked for s in commit) if commit else None,
            acked_lost=sum(s.acked_lost for s in commit) if commit else None,
            ack_p50_ms=percentile(ack, 50) / 1000.0, ack_p99_ms=percentile(ack, 99) / 1000.0)
    print(f"soak: {rows[-1]['kills']} kills in {elapsed_s:.0f} s "
          f"({rows[-1]['kills'] / max(elapsed_s, 1e-9):.2f} kills/s), interval "
          f"{args.interval_ms} ms, nvm {args.nvm}, {args.threads} threads")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        cells = []
        for h in hdr:
            v = r[h]
            cells.append("-" if v is None or isinstance(v, float) and v != v else
                         f"{v:.2f}" if isinstance(v, float) and ("iv" in h or "ack" in h) else
                         f"{v:.1f}" if isinstance(v, float) else str(v))
        print("| " + " | ".join(cells) + " |")
    return rows

