#!/usr/bin/env python3
"""One thread's on-CPU kernel time by function, from a function_graph trace.

    fgraph_oncpu.py TRACE [TRACE ...]   [--top N]

TRACE: scripts/ab/client-cpu.sh's NAME-fgraph.txt (TRACE=secs): function_graph
with funcgraph-abstime, -proc and -tail, filtered to one thread, with that
thread's sched_switch events. A function's duration includes the time the
thread slept inside it (schedule() and everything above it); the time between
its switch out and its switch back in is taken off every frame open across it,
so what is left is time on a CPU. Interrupts taken while the thread runs are
traced with it and counted under their entry function.

Per trace: the traced span, the on-CPU time in it, the thread's switches, then
per top-level entry (a syscall, an interrupt) and per function (its own time,
children excluded): calls, total ms, and per switch-in, so that two traces of
different length compare. Every figure includes the tracer's own cost, about
the same per traced call under either scheduler; compare counts first.
"""
import argparse
import collections
import re

LINE = re.compile(r'^\s*(\d+\.\d+)\s*\|\s*\d+\)\s*(\S+)\s*\|\s*(?:[!#@*$+ ]\s*)?([\d.]+ us)?\s*\|\s*(.*?)\s*$')
OPEN = re.compile(r'^([\w.$]+)\(\) \{$')
LEAF = re.compile(r'^([\w.$]+)\(\);$')
CLOSE = re.compile(r'^\} /\* ([\w.$]+) \*/$')
SWITCH = re.compile(r'sched_switch: prev_comm=.* prev_pid=(\d+) .*next_comm=.* next_pid=(\d+)')


class Frame:
    __slots__ = ('name', 'off_at_entry', 'child_us')

    def __init__(self, name, off_at_entry):
        self.name, self.off_at_entry, self.child_us = name, off_at_entry, 0.0


def summarise(path):
    excl = collections.defaultdict(float)
    incl = collections.defaultdict(float)  # outermost calls only, so recursion counts once
    calls = collections.Counter()
    root = collections.defaultdict(float)
    root_calls = collections.Counter()
    stack, off_us, out_ts, tid = [], 0.0, None, None
    t_first = t_last = None
    switches = unmatched = 0
    with open(path, errors='replace') as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            ts, proc, dur, body = float(m.group(1)), m.group(2), m.group(3), m.group(4)
            t_first = ts if t_first is None else t_first
            t_last = ts
            s = SWITCH.search(body)
            if s:
                prev, nxt = int(s.group(1)), int(s.group(2))
                if tid is None:
                    continue
                if prev == tid:
                    out_ts = ts
                elif nxt == tid:
                    switches += 1
                    if out_ts is not None:
                        off_us += (ts - out_ts) * 1e6
                    out_ts = None
                continue
            if tid is None:
                # the filtered thread: the comm-pid of the first function line (comm may be cut)
                tid = int(proc.rsplit('-', 1)[1])
            o = OPEN.match(body)
            if o:
                stack.append(Frame(o.group(1), off_us))
                continue
            d = float(dur.split()[0]) if dur else None
            lf = LEAF.match(body)
            if lf and d is not None:
                name, oncpu, child_us = lf.group(1), d, 0.0
            else:
                c = CLOSE.match(body)
                if not c or d is None:
                    continue
                name = c.group(1)
                # a close whose open came before the trace started: drop the stack, start over
                if not stack or stack[-1].name != name:
                    unmatched += 1
                    stack = []
                    continue
                fr = stack.pop()
                oncpu, child_us = max(0.0, d - (off_us - fr.off_at_entry)), fr.child_us
            # one finished call (a leaf, or a close with its children's time in child_us)
            excl[name] += max(0.0, oncpu - child_us)
            if all(f.name != name for f in stack):
                incl[name] += oncpu
            calls[name] += 1
            if stack:
                stack[-1].child_us += oncpu
            else:
                root[name] += oncpu
                root_calls[name] += 1
    return dict(excl=excl, incl=incl, calls=calls, root=root, root_calls=root_calls, switches=switches,
                span=(t_last or 0) - (t_first or 0), unmatched=unmatched)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('traces', nargs='+')
    ap.add_argument('--top', type=int, default=25)
    ap.add_argument('--incl', default='', help='comma-separated functions: their time with their children')
    a = ap.parse_args()
    for path in a.traces:
        r = summarise(path)
        n = max(1, r['switches'])
        tot = sum(r['root'].values())
        print(f'== {path}: {r["span"]:.2f} s traced, {tot / 1000:.1f} ms on a CPU in the kernel, '
              f'{r["switches"]} switch-ins, {tot / n:.1f} us each; {r["unmatched"]} unmatched closes')
        print('  top-level entries:          calls   ms     us/switch-in')
        for k, v in sorted(r['root'].items(), key=lambda kv: -kv[1])[:12]:
            print(f'    {k:28s} {r["root_calls"][k]:6d} {v / 1000:7.1f} {v / n:8.2f}')
        for k in filter(None, a.incl.split(',')):
            c = max(1, r['calls'][k])
            print(f'  with children: {k:28s} {r["calls"][k]:6d} calls {r["incl"][k] / 1000:7.1f} ms '
                  f'{r["incl"][k] / c:7.1f} us a call')
        print('  own time by function:       calls   ms     us/switch-in  calls/switch-in')
        for k, v in sorted(r['excl'].items(), key=lambda kv: -kv[1])[:a.top]:
            print(f'    {k:28s} {r["calls"][k]:6d} {v / 1000:7.1f} {v / n:8.2f} {r["calls"][k] / n:8.2f}')


if __name__ == '__main__':
    main()
