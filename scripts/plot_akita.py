#!/usr/bin/env python3
"""Figures of `schedbe-bench akita-mc`, `akita-share`, `akita-diff` and `akita-place` (docs/akita.md).

  plot_akita.py DIR

akita-mc.json -> akita-mc.png: memcached's p50/p99/p99.9 alone and next to
the LO VMs, per configuration (median of the repetitions, whiskers min-max).
akita-share.json -> akita-share.png: the HI VM's and each LO VM's CPU share
against the HI VM's demand, per configuration. akita-diff.json ->
akita-diff.png: sysbench speed of types 2 and 3, RPC latency of types 4 and
5, per configuration. akita-place.json -> akita-place.png: idle VM CPUs and
the RPC p99 against the number of LO VMs. Prints the PNG paths."""

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
    fig.suptitle(f"HI memcached (type 1) alone vs next to 3 LO VMs (type 2), {d['rate']:.0f} req/s, CPUs {d.get('cpus', d.get('cpu'))}")
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


def plot_diff(d, out):
    rows = d["rows"]
    cfgs = sorted({r["config"] for r in rows}, key=["eevdf", "akita"].index)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    series = [
        (axes[0], lambda r, i: r["sysbench_eps"][i], ["type 2 (25/100)", "type 3 (50/100)"], "sysbench events/s", "CPU-bound VMs: speed"),
        (axes[1], lambda r, i: r["rpc"][i]["mean_us"] / 1000, ["type 4 (T 50 ms)", "type 5 (T 100 ms)"], "mean latency (ms)", "RPC VMs (memcached): latency"),
    ]
    for ax, get, labels, ylabel, title in series:
        for j, c in enumerate(cfgs):
            for i, (lab, color) in enumerate(zip(labels, ("tab:orange", "tab:green"))):
                v = [get(r, i) for r in rows if r["config"] == c]
                m, lo, hi = mmm(v)
                x = j * 3 + i
                ax.bar(x, m, color=color, label=lab if j == 0 else None)
                ax.errorbar(x, m, yerr=[[m - lo], [hi - m]], color="k", capsize=3)
        ax.set_xticks([j * 3 + 0.5 for j in range(len(cfgs))], cfgs)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


def plot_place(d, out):
    rows = d["rows"]
    cfgs = sorted({r["config"] for r in rows}, key=["eevdf", "akita"].index)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for c in cfgs:
        ns = sorted({r["lo_vms"] for r in rows if r["config"] == c})
        for ax, get in ((axes[0], lambda r: r["idle_cpus"]), (axes[1], lambda r: r["rpc"]["p99_us"] / 1000)):
            v = [mmm([get(r) for r in rows if r["config"] == c and r["lo_vms"] == n]) for n in ns]
            ax.errorbar(ns, [x[0] for x in v], yerr=[[x[0] - x[1] for x in v], [x[2] - x[0] for x in v]],
                        marker="o", capsize=3, label=c)
    axes[0].set_ylabel(f"idle VM CPUs (of {len(d['vm_cpus'])})")
    axes[1].set_ylabel("RPC p99 (ms)")
    axes[1].axhline(100, color="grey", linewidth=0.8, label="its period")
    for ax in axes:
        ax.set_xlabel("CPU-bound LO VMs (type 2)")
        ax.legend(fontsize=8)
    fig.suptitle("HI RPC VM (memcached, type 1) + LO VMs: placement")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


def main():
    d = Path(sys.argv[1])
    if (d / "akita-mc.json").exists():
        plot_mc(json.loads((d / "akita-mc.json").read_text()), d / "akita-mc.png")
    if (d / "akita-place.json").exists():
        plot_place(json.loads((d / "akita-place.json").read_text()), d / "akita-place.png")
    if (d / "akita-diff.json").exists():
        plot_diff(json.loads((d / "akita-diff.json").read_text()), d / "akita-diff.png")
    if (d / "akita-share.json").exists():
        plot_share(json.loads((d / "akita-share.json").read_text()), d / "akita-share.png")


if __name__ == "__main__":
    main()
