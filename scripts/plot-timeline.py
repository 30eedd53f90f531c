#!/usr/bin/env python3
"""Per-CPU timelines from `schedbe trace --timeline FILE.csv`, schedviz-like:
one row per CPU, one bar per run segment, coloured by the --cgroup the task
was in (its innermost one) or, outside every --cgroup, by tier (LC, BE,
other). Several timelines are drawn side by side with the same CPUs, time
range and colours, e.g. the same workload under EEVDF and under schedbe:

    scripts/plot-timeline.py --out fig.png eevdf.csv:EEVDF schedbe.csv:schedbe --from 10 --to 10.5

Each input is FILE.csv or FILE.csv:LABEL (the label defaults to the file's
name). --from/--to are seconds from the trace window's start (the CSV's
time origin); by default the whole range of the files. --color-by tier
colours by tier only. Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import csv
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLUMNS = ["cpu", "start_ns", "end_ns", "pid", "comm", "tier", "cgroup_index", "cgroup"]
TIER_COLORS = {"lc": "#9aa9bd", "be": "#f2c14e", "other": "#8c564b"}
TIER_NAMES = {"lc": "LC (no --cgroup)", "be": "BE (no --cgroup)", "other": "RT/DL (no --cgroup)"}
CGROUP_COLORS = ["tab:blue", "tab:red", "tab:green", "tab:purple", "tab:cyan",
                 "tab:pink", "tab:olive", "tab:brown", "tab:orange", "tab:gray"]


class InputError(Exception):
    pass


def parse_input(arg):
    """FILE or FILE:LABEL -> (path, label); a ':' that belongs to the path
    (no such file before it) is kept."""
    path, sep, label = arg.rpartition(":")
    if not sep or not path or (not os.path.exists(path) and os.path.exists(arg)):
        path, label = arg, ""
    return path, label or os.path.splitext(os.path.basename(path))[0]


def read_timeline(path):
    """Rows of one CSV: (cpu, start_s, end_s, tier, cgroup_index, cgroup)."""
    try:
        f = open(path, newline="")
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    rows = []
    with f:
        r = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (r.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: not a schedbe trace --timeline CSV (no column {', '.join(missing)})")
        for n, row in enumerate(r, start=2):
            try:
                idx = int(row["cgroup_index"]) if row["cgroup_index"] else None
                rows.append((int(row["cpu"]), int(row["start_ns"]) / 1e9, int(row["end_ns"]) / 1e9,
                             row["tier"], idx, row["cgroup"]))
            except (TypeError, ValueError) as e:
                raise InputError(f"{path}:{n}: bad row ({e})")
    return rows


def color_key(row, by):
    """What decides a segment's colour: ('cg', index, key) or ('tier', tier)."""
    _, _, _, tier, idx, key = row
    if by == "cgroup" and idx is not None:
        return ("cg", idx, key)
    return ("tier", tier)


def palette(keys):
    """Colour and legend name per colour key: cgroups first (in --cgroup
    order, the same colour in every panel), then tiers."""
    cgs = sorted({k for k in keys if k[0] == "cg"}, key=lambda k: (k[1], k[2]))
    tiers = sorted({k for k in keys if k[0] == "tier"}, key=lambda k: list(TIER_COLORS).index(k[1])
                   if k[1] in TIER_COLORS else len(TIER_COLORS))
    out = {}
    for i, k in enumerate(cgs):
        out[k] = (CGROUP_COLORS[i % len(CGROUP_COLORS)], k[2])
    for k in tiers:
        out[k] = (TIER_COLORS.get(k[1], "black"), TIER_NAMES.get(k[1], k[1]))
    return out


def draw(ax, rows, cpus, colors, by, t0, t1):
    """One timeline: a row per CPU (CPU 0 on top), bars clipped to [t0, t1)."""
    bars = {}
    for row in rows:
        cpu, a, b = row[0], max(row[1], t0), min(row[2], t1)
        if b > a:
            bars.setdefault((cpu, color_key(row, by)), []).append((a, b - a))
    ypos = {c: i for i, c in enumerate(cpus)}
    for (cpu, k), spans in bars.items():
        ax.broken_barh(spans, (ypos[cpu] - 0.4, 0.8), facecolors=colors[k][0], linewidth=0)
    ax.set_yticks(range(len(cpus)))
    ax.set_yticklabels([f"CPU {c}" for c in cpus])
    ax.set_ylim(len(cpus) - 0.5, -0.5)
    ax.set_xlim(t0, t1)
    ax.set_xlabel("time from the trace window's start (s)")
    ax.grid(axis="x", alpha=0.3)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="FILE.csv[:LABEL]")
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument("--from", dest="t0", type=float, help="start, s from the window's start")
    p.add_argument("--to", dest="t1", type=float, help="end, s from the window's start")
    p.add_argument("--color-by", choices=["cgroup", "tier"], default="cgroup")
    p.add_argument("--title", help="a title above the panels")
    p.add_argument("--name", action="append", default=[], metavar="CGROUP=LABEL",
                   help="show this cgroup (the CSV's cgroup column) as LABEL in the legend")
    a = p.parse_args(argv)
    names = dict(n.rsplit("=", 1) for n in a.name if "=" in n)
    try:
        runs = [(label, read_timeline(path)) for path, label in map(parse_input, a.inputs)]
    except InputError as e:
        p.exit(1, f"plot-timeline: error: {e}\n")
    every = [r for _, rows in runs for r in rows]
    t0 = a.t0 if a.t0 is not None else min((r[1] for r in every), default=0.0)
    t1 = a.t1 if a.t1 is not None else max((r[2] for r in every), default=t0 + 1.0)
    if not t1 > t0:
        p.exit(2, f"plot-timeline: error: --to ({t1}) must be after --from ({t0})\n")
    cpus = sorted({r[0] for r in every}) or [0]
    colors = palette({color_key(r, a.color_by) for r in every})
    colors = {k: (c, names.get(n, n)) for k, (c, n) in colors.items()}

    fig, axes = plt.subplots(1, len(runs), sharey=True, squeeze=False,
                             figsize=(6 * len(runs), max(2.5, 0.32 * len(cpus) + 1.8)))
    for ax, (label, rows) in zip(axes[0], runs):
        draw(ax, rows, cpus, colors, a.color_by, t0, t1)
        ax.set_title(label)
    handles = [Patch(facecolor=c, label=name) for c, name in colors.values()]
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), fontsize=8,
                   frameon=False)
    if a.title:
        fig.suptitle(a.title)
    rows_of_legend = (len(handles) + 3) // 4
    fig.tight_layout(rect=(0, min(0.4, 0.06 * rows_of_legend + 0.02), 1, 1))
    try:
        fig.savefig(a.out, dpi=120)
    except OSError as e:
        p.exit(1, f"plot-timeline: error: cannot write {a.out}: {e.strerror}\n")
    print(a.out)


if __name__ == "__main__":
    sys.exit(main())
