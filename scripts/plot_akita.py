#!/usr/bin/env python3
"""Figures of `schedbe bench akita-mc` and `akita-share` (docs/akita.md).

  plot_akita.py DIR

akita-mc.json -> akita-mc.png: memcached's p50/p99/p99.9 alone and next to
the LO VMs, per configuration (median of the repetitions, whiskers min-max).
akita-share.json -> akita-share.png: the HI VM's and each LO VM's CPU share
against the HI VM's demand, per configuration. Prints the PNG paths."""

import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def mmm(v):
    return statistics.median(v), min(v), max(v)


def plot_mc(d, out):
    rows = d["rows"]
    cfgs = sorted({r["config"] for r in rows}, key=["eevdf", "akita"].index)
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    for ax, (key, label) in zip(axes, [("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9")]):
        x = 0
        ticks = []
        for c in cfgs:
            for phase, color in (("alone", "tab:blue"), ("with_lo", "tab:red")):
                v = [r[phase][key] / 1000 for r in rows if r["config"] == c]
                m, lo, hi = mmm(v)
                ax.bar(x, m, color=color, label=phase.replace("_", " ") if c == cfgs[0] else None)
                ax.errorbar(x, m, yerr=[[m - lo], [hi - m]], color="k", capsize=3)
                x += 1
            ticks.append((x - 1.5, c))
            x += 0.5
        ax.set_xticks([t for t, _ in ticks], [c for _, c in ticks])
        ax.set_title(f"memcached {label}")
        ax.set_ylabel("latency (ms)")
    axes[0].legend()
    fig.suptitle(f"HI memcached (type 1) alone vs next to 3 LO VMs (type 2), {d['rate']:.0f} req/s, CPU {d['cpu']}")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


def plot_share(d, out):
    rows = d["rows"]
    cfgs = sorted({r["config"] for r in rows}, key=["eevdf", "akita"].index)
    fig, axes = plt.subplots(1, len(cfgs), figsize=(5 * len(cfgs), 3.6), sharey=True, squeeze=False)
    for ax, c in zip(axes[0], cfgs):
        demands = sorted({r["demand_pct"] for r in rows if r["config"] == c})
        hi = [mmm([r["hi"] for r in rows if r["config"] == c and r["demand_pct"] == dm]) for dm in demands]
        ax.errorbar(demands, [h[0] for h in hi], yerr=[[h[0] - h[1] for h in hi], [h[2] - h[0] for h in hi]],
                    marker="o", label="HI (type 6)", capsize=3)
        for i in range(3):
            lo = [mmm([r["lo"][i] for r in rows if r["config"] == c and r["demand_pct"] == dm]) for dm in demands]
            ax.plot(demands, [x[0] for x in lo], marker=".", linestyle="--", label=f"LO{i + 1} (type 2)")
        ax.plot(demands, [min(dm / 100, 0.5) for dm in demands], color="grey", linewidth=0.8, label="min(demand, C_pes/T)")
        ax.set_title(c)
        ax.set_xlabel("HI demand (% of the CPU)")
        ax.set_ylabel("CPU share")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


def main():
    d = Path(sys.argv[1])
    if (d / "akita-mc.json").exists():
        plot_mc(json.loads((d / "akita-mc.json").read_text()), d / "akita-mc.png")
    if (d / "akita-share.json").exists():
        plot_share(json.loads((d / "akita-share.json").read_text()), d / "akita-share.png")


if __name__ == "__main__":
    main()
