#!/usr/bin/env python3
"""How long one vCPU stands still while the other runs: a clock-reading loop
pinned to CPU 0 next to a busy loop pinned to CPU 1, for SECS seconds.

    vcpu_turns.py [SECS]

On real hardware the loop sees the clock move by its own iteration time,
plus interrupts. Under QEMU's instruction clock (`scripts/vm.sh --icount`) the
vCPUs take turns on one host thread while the clock counts the instructions
of both, so the loop also sees the other vCPU's turns as jumps; whatever runs
on a vCPU is charged for them. Prints the jumps over 20 us: how many, their
sum as a fraction of the run, and their p50 / p90 / max. Run it under each
scheduler in one boot (docs/overhead-log-7.md, "2026-12-03").
"""
import os
import sys
import time


def spin(secs):
    os.sched_setaffinity(0, {1})
    end = time.monotonic() + secs
    while time.monotonic() < end:
        pass


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit('vcpu_turns.py: needs CPUs 0 and 1')
    pid = os.fork()
    if pid == 0:
        spin(secs + 0.5)
        os._exit(0)
    os.sched_setaffinity(0, {0})
    time.sleep(0.2)
    gaps, clk = [], time.monotonic_ns
    t0 = last = clk()
    end = t0 + int(secs * 1e9)
    while last < end:
        now = clk()
        if now - last > 20_000:
            gaps.append(now - last)
        last = now
    os.waitpid(pid, 0)
    gaps.sort()
    if not gaps:
        print('no jumps over 20 us')
        return
    q = lambda f: gaps[min(len(gaps) - 1, int(f * len(gaps)))] / 1000
    print(f'{len(gaps)} jumps over 20 us in {secs:.1f} s, {sum(gaps) / (last - t0):.1%} of the run; '
          f'p50 {q(0.5):.0f} us, p90 {q(0.9):.0f} us, max {gaps[-1] / 1000:.0f} us')


if __name__ == '__main__':
    main()
