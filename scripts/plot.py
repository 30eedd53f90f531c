#!/usr/bin/env python3
"""Figures for a `schedbe-bench` output directory, laid out like the papers'.

    python3 scripts/plot.py DIR        (DIR holds bench.json)

Writes into DIR and prints each PNG's file name on its own line:
  <exp>-<config>.png     per configuration: LC latency over time (mean and p99
                         per window) on top, BE iterations per window below, for
                         the repetition whose mean ratio is the median one;
                         dashed line = BE start, dotted = client stops sending
  <exp>-timelines.png    the same for all configurations side by side (shared
                         latency axis)
  <exp>-cmp.png          bars: LC mean and p99 before/after BE starts (median,
                         whiskers = min-max over repetitions), and the tracer's
                         inversion time
  weight-sweep-ratio.png (weight-sweep only) mean and p99 ratio vs LC weight
Needs matplotlib (Debian: python3-matplotlib).
"""
import json
import math
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(d):
    with open(os.path.join(d, "bench.json")) as f:
        return json.load(f)


def representative(runs):
    """The successful run whose mean ratio is the median (ties: first)."""
    ok = [r for r in runs if r.get("ok") and r.get("windows")]
    if not ok:
        return None
    keyed = sorted(ok, key=lambda r: (r.get("mean_ratio") is None, r.get("mean_ratio") or 0.0))
    return keyed[(len(keyed) - 1) // 2]


def series(run):
    w = run["windows"]
    t = [x["t_s"] for x in w]
    mean = [x["lc"]["mean_us"] / 1000.0 if x["lc"]["count"] else math.nan for x in w]
    p99 = [x["lc"]["p99_us"] / 1000.0 if x["lc"]["count"] else math.nan for x in w]
    be = [x["be_iters"] for x in w]
    return t, mean, p99, be


def marks(run):
    t0 = run["t0_ns"]
    be = (run["be_start_ns"] - t0) / 1e9 if run.get("be_start_ns") else None
    end = (run["send_end_ns"] - t0) / 1e9 if run.get("send_end_ns") else None
    return be, end


def finite_max(v):
    v = [x for x in v if x is not None and not math.isnan(x)]
    return max(v) if v else 1.0


GRACE_FLOOR = 1e-3  # % of CPU: zero is drawn here on the log axis


def draw_grace(ax, aggs):
    """Inversion (% of CPU, BE phase, median) against the tracer's grace
    period: short waits (a preemption landing late) fall off quickly, a
    policy that lets BE run while LC waits does not."""
    for a in aggs:
        if not a.get("be_iters_per_s"):
            continue  # no BE ran (the eevdf control): nothing to invert
        pts = {g: s["median"] for g, s in a.get("inversion_pct_by_grace") or [] if s}
        head = a.get("inversion_pct")
        if head:
            pts.setdefault(50, head["median"])  # the headline figure (default grace)
        if not pts:
            continue
        gs = sorted(pts)
        ax.plot(range(len(gs)), [max(pts[g], GRACE_FLOOR) for g in gs], marker="o", label=a["config"])
        ax.set_xticks(range(len(gs)))
        ax.set_xticklabels([f"{g / 1000:g} ms" if g >= 1000 else f"{g} us" for g in gs], rotation=20, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(GRACE_FLOOR * 0.7, None)
    ax.set_title(f"inversion by tracer grace period\n(% of CPU, BE phase; 0 drawn at {GRACE_FLOOR:g})", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def draw_timeline(ax_lat, ax_be, run, width, ylim=None, logy=False, with_be=True):
    t, mean, p99, be = series(run)
    mid = [x + width / 2 for x in t]
    ax_lat.plot(mid, p99, color="tab:red", lw=1.2, label="p99")
    ax_lat.plot(mid, mean, color="tab:blue", lw=1.4, label="mean")
    bs, end = marks(run)
    for a in (ax_lat, ax_be):
        if bs is not None:
            a.axvline(bs, color="k", ls="--", lw=0.8)
        if end is not None:
            a.axvline(end, color="grey", ls=":", lw=0.8)
    if logy:
        ax_lat.set_yscale("log")
    if ylim:
        ax_lat.set_ylim(*ylim)
    else:
        ax_lat.set_ylim(bottom=0 if not logy else None)
    ax_lat.grid(alpha=0.3)
    if with_be:
        ax_be.bar(t, be, width=width, align="edge", color="tab:green", alpha=0.8)
    ax_be.set_ylabel("BE it/window" if width != 1.0 else "BE it/s")
    ax_be.grid(alpha=0.3)
    ax_be.set_xlabel("time (s)")


def label_of(d, name):
    for n, desc in d.get("configs", []):
        if n == name:
            return desc
    return ""


def pod_timelines(d, data, names):
    """The Kubernetes experiments: per-CPU timelines (scripts/plot-timeline.py)
    of each configuration's first good repetition, side by side, for the
    phase before service2 starts and the phase with it."""
    pods = data["params"].get("pods")
    if not pods:
        return []
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot-timeline.py")
    exp = data["params"]["experiment"]
    out = []
    for phase, what in (("lc", "service1 alone"), ("be", "with service2")):
        inputs = []
        for n in names:
            run = next((r for r in data.get("runs", []) if r["config"] == n and r.get("ok")), None)
            csv_path = run and os.path.join(d, run["raw_dir"], f"timeline-{phase}.csv")
            if csv_path and os.path.exists(csv_path):
                inputs.append(f"{csv_path}:{n} (rep {run['rep'] + 1})")
        if not inputs:
            continue
        f = f"{exp}-cpus-{'after' if phase == 'be' else 'before'}.png"
        cmd = [sys.executable, script, "--out", os.path.join(d, f), "--title",
               f"{exp}: per-CPU timeline, {what} (0.5 s of the traced window)",
               "--name", f"{pods['service1_pod']}=service1 (Guaranteed)",
               "--name", f"{pods['service2_pod']}=service2 ({'Guaranteed' if pods.get('service2_limit_milli') else 'Burstable'})",
               *inputs]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"plot: timeline {f}: {r.stderr.strip()}", file=sys.stderr)
            continue
        out.append(f)
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = sys.argv[1]
    data = load(d)
    exp = data["params"]["experiment"]
    width = data["params"].get("window_secs", 1.0)
    with_be = data["params"].get("with_be", True)
    util = data["params"].get("util", 0)
    # Label: the offered LC load, and the machine's measured utilization before
    # BE (tracer: not idle) when known, e.g. "LC 67% (busy 82%)".
    busy = [a["busy_pct_lc_phase"]["median"] for a in data.get("aggregates", []) if a.get("busy_pct_lc_phase")]
    load_label = f"LC {util:.0%}" + (f" (busy {sorted(busy)[len(busy) // 2]:.0f}%)" if busy else "")
    names = [n for n, _ in data.get("configs", [])]
    runs = data.get("runs", [])
    reps = {n: representative([r for r in runs if r["config"] == n]) for n in names}
    reps = {n: r for n, r in reps.items() if r is not None}
    out = []

    # a shared latency scale for the side-by-side view
    top = 0.0
    lo = math.inf
    for r in reps.values():
        _, mean, p99, _ = series(r)
        top = max(top, finite_max(p99))
        lo = min([lo] + [x for x in mean if x and not math.isnan(x) and x > 0])
    logy = exp == "overload" or (lo < math.inf and lo > 0 and top / lo > 200)

    for n, r in reps.items():
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
        draw_timeline(a1, a2, r, width, logy=logy, with_be=with_be)
        a1.set_ylabel("LC latency (ms)")
        a1.legend(loc="upper left", fontsize=8)
        ratio = r.get("mean_ratio")
        a1.set_title(
            f"{exp} {n} ({label_of(data, n)}), {load_label} load, rep {r['rep'] + 1}"
            + (f", mean x{ratio:.2f}" if ratio else ""),
            fontsize=9,
        )
        fig.tight_layout()
        f = f"{exp}-{n}.png"
        fig.savefig(os.path.join(d, f), dpi=110)
        plt.close(fig)
        out.append(f)

    if reps:
        k = len(reps)
        fig, axes = plt.subplots(2, k, figsize=(3.6 * k + 0.6, 4.8), sharex=True, squeeze=False,
                                 gridspec_kw={"height_ratios": [2, 1]})
        ylim = None if logy else (0, top * 1.05 if top > 0 else 1)
        be_top = max([max([x["be_iters"] for x in r["windows"]] + [1]) for r in reps.values()])
        for i, (n, r) in enumerate(reps.items()):
            draw_timeline(axes[0][i], axes[1][i], r, width, ylim=ylim, logy=logy, with_be=with_be)
            axes[1][i].set_ylim(0, be_top * 1.05)
            axes[0][i].set_title(n, fontsize=10)
            if i == 0:
                axes[0][i].set_ylabel("LC latency (ms)")
                axes[0][i].legend(loc="upper left", fontsize=8)
        fig.suptitle(f"{exp}: LC latency per {width:g} s window (mean, p99) and BE throughput; "
                     f"dashed = BE start, {load_label} load", fontsize=9)
        fig.tight_layout()
        f = f"{exp}-timelines.png"
        fig.savefig(os.path.join(d, f), dpi=110)
        plt.close(fig)
        out.append(f)

    out += pod_timelines(d, data, names)

    aggs = [a for a in data.get("aggregates", []) if a.get("runs_ok")]
    if aggs:
        def med(a, key):
            s = a.get(key)
            return (s["median"], s["median"] - s["min"], s["max"] - s["median"]) if s else (math.nan, 0, 0)

        has_inv = any(a.get("inversion_pct") for a in aggs)
        has_grace = has_inv and any(a.get("inversion_pct_by_grace") for a in aggs)
        ncols = 2 + has_inv + has_grace
        fig, axes = plt.subplots(1, ncols, figsize=(4.2 * ncols, 3.8))
        x = list(range(len(aggs)))
        bw = 0.38
        labels = [a["config"] for a in aggs]
        for ax, (kb, ka, title) in zip(axes, [("mean_before_ms", "mean_after_ms", "LC mean latency (ms)"),
                                              ("p99_before_ms", "p99_after_ms", "LC p99 latency (ms)")]):
            b = [med(a, kb) for a in aggs]
            af = [med(a, ka) for a in aggs]
            ax.bar([i - bw / 2 for i in x], [v[0] for v in b], bw, yerr=[[v[1] for v in b], [v[2] for v in b]],
                   capsize=3, color="tab:blue", label="LC alone" if with_be else "phase 1")
            ax.bar([i + bw / 2 for i in x], [v[0] for v in af], bw, yerr=[[v[1] for v in af], [v[2] for v in af]],
                   capsize=3, color="tab:orange", label="with BE" if with_be else "phase 2")
            for i, a in enumerate(aggs):
                key = "mean_ratio" if kb.startswith("mean") else "p99_ratio"
                s = a.get(key)
                if s:
                    ax.annotate(f"x{s['median']:.2f}", (i, max(b[i][0] + b[i][2], af[i][0] + af[i][2])),
                                ha="center", va="bottom", fontsize=8)
            ax.set_xticks(x)
            ax.set_xticklabels(labels, rotation=20, fontsize=8)
            ax.set_title(title, fontsize=10)
            ax.grid(axis="y", alpha=0.3)
            # headroom above the bars for the ratio labels, legend below them
            ax.set_ylim(0, ax.get_ylim()[1] * 1.35)
            ax.legend(fontsize=8, loc="upper right", ncol=2)
        if has_inv:
            ax = axes[2]
            v = [med(a, "inversion_pct") for a in aggs]
            ax.bar(x, [t[0] for t in v], 0.6, yerr=[[t[1] for t in v], [t[2] for t in v]], capsize=3, color="tab:purple")
            ax.set_xticks(x)
            ax.set_xticklabels(labels, rotation=20, fontsize=8)
            ax.set_title("inversion: BE runs while LC waits\n(% of CPU time, tracer, BE phase)", fontsize=9)
            ax.grid(axis="y", alpha=0.3)
        if has_grace:
            draw_grace(axes[3], aggs)
        reps_n = max(a["runs_ok"] for a in aggs)
        fig.suptitle(f"{exp}, {load_label} load: median over {reps_n} repetition(s), whiskers min-max", fontsize=9)
        fig.tight_layout()
        f = f"{exp}-cmp.png"
        fig.savefig(os.path.join(d, f), dpi=110)
        plt.close(fig)
        out.append(f)

    if exp == "weight-sweep":
        pts = []
        for a in aggs:
            c = a["config"]
            w = 10000 if c == "weights" else (int(c.split("-", 1)[1]) if c.startswith("weights-") else None)
            if w and a.get("mean_ratio"):
                pts.append((w, a))
        if pts:
            pts.sort(key=lambda p: p[0])
            fig, ax = plt.subplots(figsize=(5.5, 3.8))
            for key, color, lab in [("mean_ratio", "tab:blue", "mean"), ("p99_ratio", "tab:red", "p99")]:
                xs = [p[0] for p in pts if p[1].get(key)]
                s = [p[1][key] for p in pts if p[1].get(key)]
                ax.errorbar(xs, [v["median"] for v in s],
                            yerr=[[v["median"] - v["min"] for v in s], [v["max"] - v["median"] for v in s]],
                            marker="o", capsize=3, color=color, label=f"{lab} latency ratio (with BE / alone)")
            ax.set_xscale("log")
            ax.axhline(1.0, color="k", lw=0.7)
            ax.set_xlabel("LC cgroup cpu.weight (BE weight 1)")
            ax.set_ylabel("after / before")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
            ax.set_title(f"weight sweep, {load_label} load", fontsize=10)
            fig.tight_layout()
            f = "weight-sweep-ratio.png"
            fig.savefig(os.path.join(d, f), dpi=110)
            plt.close(fig)
            out.append(f)

    for f in out:
        print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
