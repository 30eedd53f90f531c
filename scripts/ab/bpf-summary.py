#!/usr/bin/env python3
"""BPF CPU per build from scripts/ab/bpf-at-issue-load.sh's outputs.

Usage: scripts/ab/bpf-summary.py NAME...   (reads results/tmp/bpfab-NAME-ROUND/bench.json)
Prints, per build, each round's BPF CPU (% of all CPUs, the LC phase) and the
time per call of the callbacks, then the median over the rounds.
"""
import glob
import json
import re
import statistics
import sys

SHOWN = ["stoppin", "tick", "enqueue", "dispatc", "running", "select_", "sched_s"]


def rounds(name):
    for d in sorted(glob.glob(f"results/tmp/bpfab-{name}-*/bench.json")):
        m = re.search(rf"bpfab-{re.escape(name)}-(\w+)/", d)
        try:
            b = json.load(open(d))["runs"][0]["bpf_lc_phase"]
        except (OSError, KeyError, IndexError, ValueError) as e:
            print(f"{d}: no BPF figures ({e})", file=sys.stderr)
            continue
        per = {}
        for c in b["callbacks"]:
            short = c["name"].removeprefix("schedbe_")
            per[short] = c["ns_per_call"] / 1000
        yield m.group(1), b["cpu_pct"], per


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(f"{'build':8} {'round':>5} {'BPF %':>6}  " + " ".join(f"{s:>8}" for s in SHOWN) + "  (us/call)")
    for name in sys.argv[1:]:
        rs = list(rounds(name))
        if not rs:
            print(f"{name}: no runs found")
            continue
        for r, pct, per in rs:
            print(f"{name:8} {r:>5} {pct:6.2f}  " + " ".join(f"{per.get(s, float('nan')):8.1f}" for s in SHOWN))
        print(f"{name:8} {'med':>5} {statistics.median(p for _, p, _ in rs):6.2f}  "
              + " ".join(f"{statistics.median(x[2].get(s, 0) for x in rs):8.1f}" for s in SHOWN))


if __name__ == "__main__":
    main()
