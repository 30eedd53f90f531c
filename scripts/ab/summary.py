#!/usr/bin/env python3
"""Summarise scripts/ab/overhead-ab.sh's runs: per variant, schedbe's ratio to EEVDF
(median [min-max] over rounds) and both configurations' raw medians.

    python3 scripts/ab/summary.py TAG NAME...
"""
import collections
import csv
import glob
import os
import statistics as st
import sys

R = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "results", "tmp", "ab")
METRICS = ("mean_ms", "p99_ms", "p99_us", "ops_per_s", "time_s",
           "timer_p99_us", "wake_p99_us", "wake_p50_us")  # the last three: --cyclictest-trace


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    tag, variants = sys.argv[1], sys.argv[2:]
    for v in variants:
        ratios, raw = collections.defaultdict(list), collections.defaultdict(list)
        for d in sorted(glob.glob(f"{R}/{tag}-{v}-*")):
            f = f"{d}/overhead.csv"
            if not os.path.exists(f):
                continue
            for row in csv.DictReader(open(f)):
                if row["ok"] != "true" or row.get("pass", "timed") != "timed":
                    continue
                raw[(row["config"], row["workload"], row["metric"])].append(float(row["value"]))
                if row["config"] == "schedbe" and row["ratio_to_eevdf"]:
                    ratios[(row["workload"], row["metric"])].append(float(row["ratio_to_eevdf"]))
        print(f"== {v}")
        for (w, m), r in sorted(ratios.items()):
            if m not in METRICS:
                continue
            e, s = raw.get(("eevdf", w, m), []), raw.get(("schedbe", w, m), [])
            print(f"  {w:10} {m:10} ratio {st.median(r):.2f} [{min(r):.2f}-{max(r):.2f}] n={len(r)}"
                  f"   eevdf {st.median(e) if e else 0:.2f} schedbe {st.median(s) if s else 0:.2f}")


if __name__ == "__main__":
    main()
