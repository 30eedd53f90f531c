#!/usr/bin/env python3
"""Spinlock slow-path time per sched_ext state window, from scripts/ab/lock-spin-trace.sh's trace.

    lock_spin_sum.py TRACE

One line per window between two state changes (`disabled`: EEVDF, `enabled`: a
sched_ext scheduler) longer than 1 s: slow-path calls over the trace's
threshold, their summed duration, that per second of the window, and the
commands that spun most (ms).
"""
import collections
import re
import sys

DUR = re.compile(r'^\s*([\d.]+)\s*\|\s*(\d+)\)\s*(\S.*?)\s*\|\s*[!#@*$+ ]*\s*([\d.]+)\s*us\s*\|')
MARK = re.compile(r'^\s*([\d.]+).*SCXSTATE (\w+)')


def main(path):
    wins = []  # [state, t0, t1, total_us, calls, by command]
    with open(path, errors='replace') as f:
        for line in f:
            m = MARK.match(line)
            if m:
                t = float(m.group(1))
                if wins:
                    wins[-1][2] = t
                wins.append([m.group(2), t, t, 0.0, 0, collections.Counter()])
                continue
            m = DUR.match(line)
            if m and wins:
                d = float(m.group(4))
                w = wins[-1]
                w[3] += d
                w[4] += 1
                w[5][m.group(3).rsplit('-', 1)[0]] += d
                w[2] = float(m.group(1))
    if not wins:
        sys.exit(f'{path}: no state markers (not a lock-spin-trace.sh trace?)')
    for state, t0, t1, tot, n, by in wins:
        if t1 - t0 < 1:
            continue
        top = ', '.join(f'{k} {v / 1000:.1f}' for k, v in by.most_common(4))
        print(f'{state:9s} {t0:7.1f}-{t1:7.1f} s: {n:6d} calls, {tot / 1000:7.1f} ms, '
              f'{tot / 1000 / (t1 - t0):5.1f} ms/s; most: {top}')


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
