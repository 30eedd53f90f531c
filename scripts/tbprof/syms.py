#!/usr/bin/env python3
"""Guest instructions per operation, by symbol, from tbprof profiles of runs
that differ only in length.

Usage: scripts/tbprof/syms.py --ops LONG_OPS SHORT_OPS A_LONG A_SHORT [B_LONG B_SHORT] [--top N]

Each run is a NAME under results/tmp/tbprof (NAME.out and NAME.kallsyms,
written by scripts/tbprof/run.sh) or a path without the extension. A run's
profile covers the whole boot: the guest's start, the benchmark's set-up, a
scheduler's load (the verifier) as well as the operations measured. The
difference of a long and a short run of the same command cancels all of
that; divided by LONG_OPS - SHORT_OPS it leaves each symbol's instructions
per operation (e.g. per message of `perf bench sched pipe -l N`). With a
second pair (B, e.g. the same command under a sched_ext scheduler where A
ran under EEVDF) it prints both and B - A, largest differences first, so the
cost B adds shows where it goes. Symbols are matched by name (kernel
addresses differ from boot to boot; a BPF program keeps its name).

Instructions are exact under emulation and the same in every boot for the
same work; time is not (an IPI, a halted vCPU's wakeup, the host), so a
throughput gap with equal instructions lies outside the guest's code.
"""
import argparse
import collections
import sys
from pathlib import Path

from tbsyms import insns_by_symbol, load_symbols

TBPROF = Path(__file__).resolve().parents[2] / "results" / "tmp" / "tbprof"


def files(run):
    base = Path(run) if "/" in run else TBPROF / run
    out, ksyms = Path(f"{base}.out"), Path(f"{base}.kallsyms")
    for f in (out, ksyms):
        if not f.is_file():
            sys.exit(f"syms.py: {f} not found (scripts/tbprof/run.sh writes it)")
    return out, ksyms


def per_op(long_run, short_run, ops):
    """Per symbol: (long - short) / ops; and the BPF programs' names."""
    counts, bpf = [], set()
    for run in (long_run, short_run):
        out, ksyms = files(run)
        c, b = insns_by_symbol(out, load_symbols(ksyms))
        counts.append(c)
        bpf |= b
    diff = collections.Counter()
    for name in counts[0].keys() | counts[1].keys():
        diff[name] = (counts[0][name] - counts[1][name]) / ops
    return diff, bpf


def group(d, bpf):
    """Totals: all, BPF programs, the kernel's sched_ext core (scx in the name)."""
    return {"all": sum(d.values()),
            "BPF programs": sum(v for k, v in d.items() if k in bpf),
            "kernel, scx in the name": sum(v for k, v in d.items() if k not in bpf and "scx" in k)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", nargs=2, type=int, required=True, metavar=("LONG_OPS", "SHORT_OPS"))
    ap.add_argument("runs", nargs="+", metavar="RUN")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    if len(a.runs) not in (2, 4):
        sys.exit("syms.py: give A_LONG A_SHORT, optionally B_LONG B_SHORT")
    ops = a.ops[0] - a.ops[1]
    if ops <= 0:
        sys.exit("syms.py: LONG_OPS must exceed SHORT_OPS")
    da, bpf = per_op(a.runs[0], a.runs[1], ops)
    if len(a.runs) == 2:
        print(f"instructions per operation ({a.runs[0]} - {a.runs[1]}) / {ops}")
        for k, v in group(da, bpf).items():
            print(f"  {k:40s} {v:10.0f}")
        for name, v in da.most_common(max(a.top, 0)):
            print(f"  {name:40s} {v:10.0f}")
        return
    db, bpf_b = per_op(a.runs[2], a.runs[3], ops)
    bpf |= bpf_b
    ga, gb = group(da, bpf), group(db, bpf)
    print(f"instructions per operation: A = ({a.runs[0]} - {a.runs[1]}) / {ops}, "
          f"B = ({a.runs[2]} - {a.runs[3]}) / {ops}")
    print(f"  {'':40s} {'A':>10s} {'B':>10s} {'B - A':>10s}")
    for k in ga:
        print(f"  {k:40s} {ga[k]:10.0f} {gb[k]:10.0f} {gb[k] - ga[k]:10.0f}")
    names = sorted(da.keys() | db.keys(), key=lambda n: -abs(db[n] - da[n]))
    print(f"  symbols, largest |B - A| first:")
    for name in names[:max(a.top, 0)]:
        tag = " [bpf]" if name in bpf else ""
        print(f"  {name + tag:40s} {da[name]:10.0f} {db[name]:10.0f} {db[name] - da[name]:10.0f}")


if __name__ == "__main__":
    main()
