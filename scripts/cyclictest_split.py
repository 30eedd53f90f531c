#!/usr/bin/env python3
"""Split cyclictest's latency from a raw tracefs capture (scripts/cyclictest-split.sh).

Per period of each cyclictest thread: the timer's lateness (hrtimer_expire_entry's
`now` minus the softexpires its hrtimer_start armed), the wakeup (that expiry ->
the thread switched in) and its return to user space (switched in -> its next
hrtimer_start). Their sum is what cyclictest reports, to within its own clock
reads; the last line of each table compares with its histogram file (same
name, .hist). Then the timer's lateness by what the two CPUs ran at the
expiry (busy: any task but idle), for 2-CPU guests.

    cyclictest_split.py [--worst N] TRACE...

--worst N: also the N longest wakeups of each trace, with what every CPU ran
between the timer's firing and the thread's switch in.
"""
import bisect
import collections
import re
import sys
from pathlib import Path

LINE = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')


def kv(s):
    return dict(re.findall(r'(\w+)=(\S+)', s))


def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))] if v else float('nan')


def periods(path):
    # switches: cpu -> [(t, pid, "comm/pid")] of each task switched in
    armed, pend, done, switches = {}, {}, [], collections.defaultdict(list)
    for line in open(path, errors='replace'):
        m = LINE.match(line)
        if not m:
            continue
        comm, tid, cpu, t, ev, rest = m.groups()
        cpu, t, tid = int(cpu), float(t) * 1e6, int(tid)
        if ev == 'hrtimer_start':
            d = kv(rest)
            if d.get('function') == 'hrtimer_wakeup' and comm == 'cyclictest':
                armed[d['hrtimer']] = (tid, int(d['softexpires']))
                s = pend.pop(tid, None)
                if s and 'run' in s:
                    s['user'] = t - s['run']
                    done.append(s)
        elif ev == 'hrtimer_expire_entry':
            d = kv(rest)
            if d.get('function') == 'hrtimer_wakeup' and d['hrtimer'] in armed:
                p, soft = armed.pop(d['hrtimer'])
                late = (int(d['now']) - soft) / 1e3
                pend[p] = {'late': late, 'fire': t, 'cpu': cpu, 'expiry': t - late}
        elif ev == 'sched_switch':
            nxt = kv(rest.split(' ==> ')[1])
            p = int(nxt['next_pid'])
            switches[cpu].append((t, p, f"{nxt['next_comm']}/{p}"))
            if p in pend and 'run' not in pend[p]:
                pend[p]['run'] = t
                pend[p]['tid'], pend[p]['run_cpu'] = p, cpu
    return done, switches


def busy_at(switches, cpu, t):
    xs = switches.get(cpu, [])
    i = bisect.bisect_right(xs, t, key=lambda x: x[0]) - 1
    return xs[i][1] != 0 if i >= 0 else None


def hist_quantiles(path):
    rows = [l.split() for l in open(path) if l.strip() and not l.startswith('#')]
    counts = [(int(r[0]), sum(int(x) for x in r[1:])) for r in rows]
    n, acc, out = sum(c for _, c in counts), 0, {}
    for us, c in counts:
        acc += c
        for p in (0.5, 0.9, 0.99):
            if p not in out and acc >= p * n:
                out[p] = us
    return out


def running_during(switches, cpu, t0, t1):
    """What CPU @cpu ran from @t0 to @t1: the task on it at @t0, then each switched in."""
    xs = switches.get(cpu, [])
    i = max(bisect.bisect_right(xs, t0, key=lambda x: x[0]) - 1, 0)
    j = bisect.bisect_right(xs, t1, key=lambda x: x[0])
    return [f'{name} (+{max(t - t0, 0):.0f})' for t, _, name in xs[i:j]]


def worst(done, switches, n):
    print(f'  the {n} longest wakeups (us after the timer fired; what each CPU ran meanwhile):')
    for s in sorted(done, key=lambda s: s['run'] - s['fire'], reverse=True)[:n]:
        print(f"    {s['tid']}: {s['run'] - s['fire']:.0f} us, timer on cpu {s['cpu']}, ran on cpu {s['run_cpu']}")
        for cpu in sorted(switches):
            print(f"      cpu {cpu}: {', '.join(running_during(switches, cpu, s['fire'], s['run']))}")


def main(paths, n_worst=0):
    for path in paths:
        done, switches = periods(path)
        if not done:
            print(f'{path}: no cyclictest periods found')
            continue
        print(f'{path}: {len(done)} periods; us: p50 / p90 / p99 / max')
        parts = [('timer late', [s['late'] for s in done]),
                 ('wakeup', [s['run'] - s['fire'] for s in done]),
                 ('to user', [s['user'] for s in done]),
                 ('sum', [s['late'] + s['run'] - s['fire'] + s['user'] for s in done])]
        for name, v in parts:
            print(f'  {name:12s} {q(v, .5):7.0f} {q(v, .9):7.0f} {q(v, .99):7.0f} {max(v):7.0f}')
        hist = Path(path).with_suffix('.hist')
        if hist.exists():
            h = hist_quantiles(hist)
            print(f'  {"cyclictest":12s} {h.get(0.5, 0):7d} {h.get(0.9, 0):7d} {h.get(0.99, 0):7d}   (its histogram)')
        by = collections.defaultdict(list)
        for s in done:
            own = busy_at(switches, s['cpu'], s['expiry'])
            other = busy_at(switches, 1 - s['cpu'], s['expiry']) if s['cpu'] in (0, 1) else None
            by[(own, other)].append(s['late'])
        print('  timer lateness by what the CPUs ran at its expiry (own, other):')
        for k in sorted(by, key=str):
            v = by[k]
            print(f'    busy={k[0]!s:5} other busy={k[1]!s:5}: {len(v) / len(done):5.1%} of periods, '
                  f'p99 {q(v, .99):6.0f} us, over 1 ms late {sum(x > 1000 for x in v) / len(v):6.1%}')
        if n_worst:
            worst(done, switches, n_worst)


if __name__ == '__main__':
    args, n = sys.argv[1:], 0
    if args[:1] == ['--worst']:
        if len(args) < 2 or not args[1].isdigit():
            sys.exit('cyclictest_split.py: --worst takes a number')
        n, args = int(args[1]), args[2:]
    if not args:
        sys.exit('usage: cyclictest_split.py [--worst N] TRACE...')
    main(args, n)
