#!/usr/bin/env python3
"""Where an LC request's latency goes, from the client's per-request records.

    scripts/lc_breakdown.py [--skip-s S] RECORDS.csv...

RECORDS.csv is `schedbe-bench client --records` output, or the requests.csv an
LC run of `schedbe-bench` keeps under raw/<config>-r<N>/. Each request's
latency (received minus intended send time) is split into:

- send lag: intended send time to the client's send (the client's own delay);
- queued: send to the worker starting the request (the worker's wakeup and its
  wait for a CPU, plus its reading of the request);
- service: start to end of the request on the worker, in wall time (its CPU
  demand plus any time it was preempted or its CPU was taken by interrupts);
- return: end to the client's receive (the client's wakeup);

and the worker's CPU time per request (cpu_ns) is given too: a demand
burned as CPU time can overshoot under load (interrupts charged to it).
Mean, p50, p90 and p99 of each, in ms, after the first --skip-s seconds
(default 1) of intended send times. Timestamps are CLOCK_MONOTONIC on one
machine, so the parts add up to the total.
"""

import argparse
import csv
import statistics
import sys


COLUMNS = ("intended_ns", "send_ns", "start_ns", "end_ns", "recv_ns", "cpu_ns")


def quantile(sorted_vals, p):
    return sorted_vals[min(len(sorted_vals) - 1, int(p * len(sorted_vals)))]


def breakdown(path, skip_s):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"not client records: no column {', '.join(missing)}")
        # each timestamp parsed once; a non-number raises ValueError here
        rows = [{c: int(r[c]) for c in COLUMNS} for r in reader]
    rows = [r for r in rows if r["recv_ns"] > 0]
    if not rows:
        raise ValueError("no answered request")
    t0 = min(r["intended_ns"] for r in rows)
    rows = [r for r in rows if r["intended_ns"] >= t0 + skip_s * 1e9]
    if not rows:
        raise ValueError(f"no request after the first {skip_s} s")

    def part(a, b):
        return [(r[b] - r[a]) / 1e6 for r in rows]

    return len(rows), [
        ("send lag", part("intended_ns", "send_ns")),
        ("queued", part("send_ns", "start_ns")),
        ("service", part("start_ns", "end_ns")),
        ("return", part("end_ns", "recv_ns")),
        ("total", part("intended_ns", "recv_ns")),
        ("worker cpu", [r["cpu_ns"] / 1e6 for r in rows]),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+")
    ap.add_argument("--skip-s", type=float, default=1.0, help="seconds of warm-up to leave out (default 1)")
    a = ap.parse_args()
    rc = 0
    for path in a.records:
        try:
            n, parts = breakdown(path, a.skip_s)
        except (OSError, ValueError) as e:
            print(f"lc_breakdown: {path}: {e}", file=sys.stderr)
            rc = 1
            continue
        print(f"{path}: {n} requests (ms)")
        for name, vals in parts:
            s = sorted(vals)
            print(f"  {name:<10} mean {statistics.mean(vals):8.3f}  p50 {quantile(s, .5):8.3f}  "
                  f"p90 {quantile(s, .9):8.3f}  p99 {quantile(s, .99):8.3f}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
