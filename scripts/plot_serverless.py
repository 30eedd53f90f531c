#!/usr/bin/env python3
"""Figures of `schedbe-bench serverless` (docs/serverless.md).

  plot_serverless.py DIR

serverless.json -> serverless-attainment.png: the share of requests meeting
their latency target against the offered load, per group (group-low,
group-high, all) and configuration (median of the repetitions, whiskers
min-max), with context switches per second in a fourth panel.
<config>-u<load>-r<k>/samples.csv -> serverless-cdf.png: per-function
latency CDFs at the highest load, one panel per configuration (all
repetitions pooled; group-high functions red, group-low blue; latency over
the request's target, so 1 is the target). Prints the PNG paths."""

import csv
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"eevdf": "tab:gray", "schedbe": "tab:green", "llf": "tab:purple"}


def mmm(v):
    return statistics.median(v), min(v), max(v)


def plot_attainment(d, out):
    rows = d["rows"]
    utils = sorted({r["util"] for r in rows})
    fig, axes = plt.subplots(1, 4, figsize=(17, 4))
    for ax, group in zip(axes[:3], ["group-low", "group-high", "all"]):
        for cfg in d["configs"]:
            xs, ys, lo, hi = [], [], [], []
            for u in utils:
                v = [r["groups"][group]["attainment_pct"] for r in rows
                     if r["config"] == cfg and r["util"] == u and group in r["groups"]
                     and r["groups"][group]["attainment_pct"] is not None]
                if v:
                    m, a, b = mmm(v)
                    xs.append(u); ys.append(m); lo.append(m - a); hi.append(b - m)
            if xs:
                ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=cfg, color=COLORS.get(cfg))
        ax.set_title(f"{group}: requests meeting their target")
        ax.set_xlabel("offered load (fraction of the CPUs)")
        ax.set_ylabel("met target (%)")
        ax.set_ylim(0, 102)
        ax.grid(alpha=0.3)
    ax = axes[3]
    for cfg in d["configs"]:
        xs, ys, lo, hi = [], [], [], []
        for u in utils:
            v = [r["ctx_per_s"] for r in rows if r["config"] == cfg and r["util"] == u and r.get("ctx_per_s") is not None]
            if v:
                m, a, b = mmm(v)
                xs.append(u); ys.append(m); lo.append(m - a); hi.append(b - m)
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=cfg, color=COLORS.get(cfg))
    ax.set_title("context switches")
    ax.set_xlabel("offered load (fraction of the CPUs)")
    ax.set_ylabel("per second")
    ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"schedbe-bench serverless: {d['rows'][0]['functions']} sandboxes, {d['nr_cpus']} CPUs, "
                 f"{d['reps']} repetitions (median, min-max)")
    fig.tight_layout()
    p = out / "serverless-attainment.png"
    fig.savefig(p, dpi=110)
    print(p)


def plot_cdf(d, out):
    top = max(r["util"] for r in d["rows"])
    cfgs = d["configs"]
    fig, axes = plt.subplots(1, len(cfgs), figsize=(5.5 * len(cfgs), 4.2), sharey=True, squeeze=False)
    for ax, cfg in zip(axes[0], cfgs):
        per_fn = defaultdict(list)
        group = {}
        for sub in sorted(out.glob(f"{cfg}-u{top:.2f}-r*")):
            f = sub / "samples.csv"
            if not f.exists():
                continue
            with open(f) as fh:
                for row in csv.DictReader(fh):
                    group[row["function"]] = row["group"]
                    lat = row["latency_us"]
                    # no reply: beyond every target (plotted at the right edge)
                    ratio = float(lat) / float(row["target_us"]) if lat else float("inf")
                    per_fn[row["function"]].append(ratio)
        for fn, v in sorted(per_fn.items(), key=lambda kv: group[kv[0]] != "group-low"):
            v = sorted(min(x, 1e4) for x in v)
            n = len(v)
            ys = [(i + 1) / n for i in range(n)]
            hi = group[fn] == "group-high"
            ax.step(v, ys, where="post", color="tab:red" if hi else "tab:blue", alpha=0.7 if hi else 0.35, lw=1.2 if hi else 0.8)
        ax.axvline(1.0, color="k", ls="--", lw=0.8)
        ax.set_xscale("log")
        ax.set_title(f"{cfg}, load {top:.2f}")
        ax.set_xlabel("latency / target")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("CDF of a function's requests")
    axes[0][0].plot([], [], color="tab:red", label="group-high functions")
    axes[0][0].plot([], [], color="tab:blue", label="group-low functions")
    axes[0][0].legend(loc="lower right")
    fig.tight_layout()
    p = out / "serverless-cdf.png"
    fig.savefig(p, dpi=110)
    print(p)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    j = out / "serverless.json"
    if not j.exists():
        sys.exit(f"{j}: not found")
    d = json.loads(j.read_text())
    if not d.get("rows"):
        sys.exit(f"{j}: no runs")
    plot_attainment(d, out)
    plot_cdf(d, out)


if __name__ == "__main__":
    main()
