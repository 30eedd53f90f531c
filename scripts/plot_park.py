#!/usr/bin/env python3
"""Figure for `schedbe-bench park-resume` (papers: parked-kubernetes): the BE
job's throughput (resize steps per second) over time, with the LC antagonist's
run and the time the BE cgroup was frozen shaded.

    scripts/plot_park.py OUTDIR      (reads steps.csv, frozen.csv, timeline.json)
"""
import csv
import json
import sys
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    d = Path(sys.argv[1])
    steps = [float(r["t_s"]) for r in csv.DictReader(open(d / "steps.csv"))]
    frozen = [(float(r["t_s"]), r["frozen"] == "1") for r in csv.DictReader(open(d / "frozen.csv"))]
    tl = json.loads((d / "timeline.json").read_text())
    rep = json.loads((d / "park-resume.json").read_text())
    end = max([tl["t_reply"]] + steps) + 1
    bins = [0] * (int(end) + 1)
    for t in steps:
        if t >= 0:
            bins[int(t)] += 1
    fig, ax = plt.subplots(figsize=(9, 3.6))
    ax.step(range(len(bins)), bins, where="post", color="tab:blue", label="BE job: resize steps/s")
    ax.axvspan(tl["t_antagonist_start"], tl["t_antagonist_stop"], color="tab:red", alpha=0.12,
               label="LC antagonist (busy loop per CPU)")
    start = None
    for t, f in frozen + [(end, False)]:
        if f and start is None:
            start = t
        elif not f and start is not None:
            ax.axvspan(start, t, ymin=0.0, ymax=0.06, color="black", alpha=0.6)
            start = None
    ax.plot([], [], color="black", alpha=0.6, linewidth=6, label="BE cgroup frozen (parked)")
    ax.axvline(tl["t_reply"], color="tab:green", linestyle="--",
               label=f"correct reply on the same connection: {rep['correct']}")
    ax.set_xlabel("time since the request (s)")
    ax.set_ylabel("steps / s")
    ax.set_xlim(0, end)
    ax.set_ylim(bottom=0)
    ax.set_title(f"park-resume: parked {rep['parked_s']:.0f} s, {rep['steps_while_parked']} steps while parked "
                 f"({rep['machine']}, {rep['nr_cpus']} CPUs)", fontsize=9)
    ax.legend(loc="upper center", fontsize=7)
    fig.tight_layout()
    out = d / "park-resume.png"
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
