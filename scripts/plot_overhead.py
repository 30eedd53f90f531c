#!/usr/bin/env python3
"""The figure of a `schedbe-bench overhead` output directory.

    python3 scripts/plot_overhead.py DIR        (DIR holds overhead.json)

Writes DIR/overhead.png and prints its file name: one panel per workload
figure (perf messaging time, pipe ops/s, cyclictest p99 and max, LC mean and
p99 at each load, build time), a bar per configuration = its value divided by
EEVDF's in the same repetition (median over repetitions, whiskers min-max;
the dotted line is EEVDF), and, when measured, a panel of the schedulers' BPF
CPU time (% of elapsed x CPUs) per workload, from the BPF count pass.
Without an eevdf configuration the panels show the raw medians instead. Needs matplotlib (python3-matplotlib).
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BASELINE = "eevdf"


def load(d):
    with open(os.path.join(d, "overhead.json")) as f:
        return json.load(f)


def panels(data):
    """(title, [(config, median, lo, hi)], is_ratio) for each workload metric."""
    configs = [c[0] for c in data["configs"]]
    has_base = BASELINE in configs
    seen, out = set(), []
    for r in data["rows"]:
        key = (r["workload"], r["metric"])
        if key in seen:
            continue
        seen.add(key)
        rows = [x for x in data["rows"] if (x["workload"], x["metric"]) == key]
        bars = []
        for c in configs:
            row = next((x for x in rows if x["config"] == c), None)
            s = None if row is None else (row["value"] if not has_base else row["ratio"])
            if has_base and c == BASELINE and row is not None and row["value"]:
                s = {"median": 1.0, "min": 1.0, "max": 1.0}
            if s:
                bars.append((c, s["median"], s["min"], s["max"]))
            else:
                bars.append((c, math.nan, math.nan, math.nan))
        better = "higher" if r["higher_is_better"] else "lower"
        title = f"{r['workload']}: {r['metric']} ({r['unit']}; {better} is better)"
        out.append((title, bars, has_base))
    return out


def bpf_panel(data):
    """(workloads, {config: [median cpu % per workload]}) or None."""
    runs = [r for r in data["runs"] if r.get("ok") and r.get("bpf")]
    if not runs:
        return None
    workloads = [w for w in data["workloads"] if any(r["workload"] == w for r in runs)]
    configs = [c[0] for c in data["configs"] if any(r["config"] == c[0] for r in runs)]
    series = {}
    for c in configs:
        vals = []
        for w in workloads:
            v = sorted(r["bpf"]["cpu_pct"] for r in runs if r["config"] == c and r["workload"] == w)
            vals.append(v[len(v) // 2] if v else math.nan)
        series[c] = vals
    return workloads, series


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    d = sys.argv[1]
    data = load(d)
    ps = panels(data)
    bpf = bpf_panel(data)
    n = len(ps) + (1 if bpf else 0)
    if n == 0:
        sys.exit("overhead.json has no results")
    ncols = min(4, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.9 * ncols, 3.3 * nrows), squeeze=False)
    flat = [a for row in axes for a in row]
    # one colour per configuration in every panel (the BPF panel has no EEVDF bar)
    colour = {c[0]: f"C{i}" for i, c in enumerate(data["configs"])}
    for ax, (title, bars, is_ratio) in zip(flat, ps):
        names = [b[0] for b in bars]
        med = [b[1] for b in bars]
        err = [[b[1] - b[2] if not math.isnan(b[1]) else 0 for b in bars],
               [b[3] - b[1] if not math.isnan(b[1]) else 0 for b in bars]]
        ax.bar(range(len(bars)), med, yerr=err, capsize=3, color=[colour.get(b[0], "grey") for b in bars])
        ax.set_xticks(range(len(bars)))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_title(title, fontsize=8)
        if is_ratio:
            ax.axhline(1.0, color="k", ls=":", lw=1)
            ax.set_ylabel(f"/ {BASELINE} (same rep)", fontsize=8)
    if bpf:
        ax = flat[len(ps)]
        workloads, series = bpf
        width = 0.8 / max(1, len(series))
        for i, (c, vals) in enumerate(series.items()):
            ax.bar([x + i * width for x in range(len(workloads))], vals, width=width, label=c, color=colour.get(c, "grey"))
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(workloads))])
        ax.set_xticklabels(workloads, rotation=30, ha="right", fontsize=8)
        ax.set_title("BPF CPU time (% of elapsed x CPUs), BPF count pass", fontsize=8)
        ax.legend(fontsize=7)
    for ax in flat[n:]:
        ax.axis("off")
    reps = max((r["rep"] for r in data["runs"] if not r.get("counted")), default=0)
    fig.suptitle(f"schedbe-bench overhead: {reps} repetition(s), median [min-max]; noisy under emulation", fontsize=9)
    fig.tight_layout()
    f = "overhead.png"
    fig.savefig(os.path.join(d, f), dpi=110)
    print(f)


if __name__ == "__main__":
    main()
