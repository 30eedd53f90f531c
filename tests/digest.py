#!/usr/bin/env python3
"""Summarise a VM suite run from results/tmp/tests/progress.txt (written by
conftest.py as tests start and end): counts, each failure with its reason, the
slowest tests, and the test still running when the guest stopped (a hang or the
VM timeout). make test-vm prints this when the suite fails, last, because CI
shows only the tail of the output.

    tests/digest.py [PROGRESS_FILE]
"""

import sys
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "results" / "tmp" / "tests" / "progress.txt"


def parse(lines):
    """-> (outcomes [(outcome, seconds, nodeid, why)], running (nodeid, start) or None, last time)."""
    outcomes, started, last = [], {}, None
    for line in lines:
        parts = line.rstrip("\n").split(" ", 2)
        if len(parts) < 3:
            continue
        try:
            t = float(parts[0])
        except ValueError:
            continue
        last = t
        kind, rest = parts[1], parts[2]
        if kind == "START":
            started[rest] = t
            continue
        dur, _, rest = rest.partition(" ")
        nodeid, _, why = rest.partition(" :: ")
        try:
            secs = float(dur.rstrip("s"))
        except ValueError:
            secs = 0.0
        outcomes.append((kind, secs, nodeid, why))
        started.pop(nodeid, None)
    running = max(started.items(), key=lambda kv: kv[1]) if started else None
    return outcomes, running, last


def main(argv):
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        print(f"digest: no test progress ({e}); the guest did not start the suite")
        return 1
    outcomes, running, last = parse(lines)
    count = {}
    for kind, *_ in outcomes:
        count[kind] = count.get(kind, 0) + 1
    total = sum(s for _, s, _, _ in outcomes)
    print("digest: " + ", ".join(f"{n} {k.lower()}" for k, n in sorted(count.items()))
          + f"; {total:.0f} s in tests ({path})")
    slow = sorted(outcomes, key=lambda o: -o[1])[:5]
    print("digest: slowest: " + ", ".join(f"{n.split('::', 1)[-1]} {s:.0f}s" for _, s, n, _ in slow))
    for kind, secs, nodeid, why in outcomes:
        if kind not in ("PASSED", "SKIPPED"):
            print(f"digest: {kind} after {secs:.0f}s {nodeid}: {why}")
    if running:
        print(f"digest: still running when the suite stopped: {running[0]} "
              f"(started {time.time() - running[1]:.0f} s ago)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
