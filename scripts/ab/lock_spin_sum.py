#!/usr/bin/env python3
"""Spinlock slow-path time per sched_ext state window, from scripts/ab/lock-spin-trace.sh's trace.

    lock_spin_sum.py TRACE

One line per window between two state changes (`disabled`: EEVDF, `enabled`: a
sched_ext scheduler) longer than 1 s: slow-path calls over the trace's
threshold, their summed duration, that per second of the window, and the
commands that spun most (ms).
"""
import collections
import dataclasses
import re
import sys

DUR = re.compile(r'^\s*([\d.]+)\s*\|\s*(\d+)\)\s*(\S.*?)\s*\|\s*[!#@*$+ ]*\s*([\d.]+)\s*us\s*\|')
MARK = re.compile(r'^\s*([\d.]+).*SCXSTATE (\w+)')


@dataclasses.dataclass
class Window:
    """The trace between two state markers: its slow-path calls and their time."""
    state: str
    t0: float
    t1: float
    total_us: float = 0.0
    calls: int = 0
    by_comm: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def main(path):
    wins = []
    with open(path, errors='replace') as f:
        for line in f:
            m = MARK.match(line)
            if m:
                t = float(m.group(1))
                if wins:
                    wins[-1].t1 = t
                wins.append(Window(m.group(2), t, t))
                continue
            m = DUR.match(line)
            if m and wins:
                d = float(m.group(4))
                w = wins[-1]
                w.total_us += d
                w.calls += 1
                w.by_comm[m.group(3).rsplit('-', 1)[0]] += d
                w.t1 = float(m.group(1))
    if not wins:
        sys.exit(f'{path}: no state markers (not a lock-spin-trace.sh trace?)')
    for w in wins:
        secs = w.t1 - w.t0
        if secs < 1:
            continue
        top = ', '.join(f'{k} {v / 1000:.1f}' for k, v in w.by_comm.most_common(4))
        print(f'{w.state:9s} {w.t0:7.1f}-{w.t1:7.1f} s: {w.calls:6d} calls, {w.total_us / 1000:7.1f} ms, '
              f'{w.total_us / 1000 / secs:5.1f} ms/s; most: {top}')


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
