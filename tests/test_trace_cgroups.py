"""`schedbe trace --cgroup PATH=REQ` (reservation inversion) and `--timeline`
on a live kernel, under the kernel's default scheduler (the tracer judges any
scheduler).

Two cgroups with CPU requests: A requests 2 CPUs and has 2 hogs on CPUs 0-1;
B requests 1 CPU and has 2 hogs, so it is above its request while both run.
When B's hogs are pinned to CPUs 2-3, A falls below its request only when
another task (a kernel thread, the tracer) takes one of its CPUs. When one of
B's hogs is pinned to CPU 0, it shares A's CPUs, and A's reservation
inversion grows (left to EEVDF's load balancer, B may or may not land there). B is never in inversion: A never runs above its 2 CPUs. The exact definition is in
docs/kubernetes.md.

`timer_latency` (how late a cgroup's sleep timers fired): counted for a task
that sleeps 2 ms at a time, never for one that does not sleep.
"""


import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.vm

TRACE_S = 3


def run(b_cpus, name):
    """A's 2 hogs on CPUs 0-1; B's hog k on CPUs b_cpus[k]."""
    a = tl.cg_create(f"{tl.TEST_CG}/a")
    b = tl.cg_create(f"{tl.TEST_CG}/b")
    procs = []
    timeline = tl.results_dir() / f"{name}-timeline.csv"
    try:
        procs += [tl.spawn(tl.BUSY_LOOP, cgroup=a, cpus=[0, 1]) for _ in range(2)]
        procs += [tl.spawn(tl.BUSY_LOOP, cgroup=b, cpus=c) for c in b_cpus]
        argv_extra = ["--timeline", str(timeline)]
        # the tracer's userspace (SCHED_FIFO) on CPU 3, away from A's CPUs
        rep = tl.run_trace(TRACE_S, name, cgroups=[f"{a}=2", f"{b}=1"], extra=argv_extra, cpu=3)
    finally:
        for p in procs:
            tl.kill_proc(p)
    return rep["cgroups"][a], rep["cgroups"][b], timeline, (a, b)


@pytest.mark.skipif(tl.NR_CPUS < 4, reason="needs 4 CPUs")
def test_reservation_inversion_follows_who_takes_the_cpus():
    """Apart, A waits below its request only when something else (a kernel
    thread, the tracer itself) takes one of its CPUs; shared, B's hogs take
    them too, and A's inversion, all of it with B above its request, grows."""
    apart_a, apart_b, _, _ = run([[2], [3]], "resinv-apart")
    # pinned, not left to the load balancer: EEVDF may or may not put B on A's CPUs
    ca, cb, timeline, (a, b) = run([[0], [2]], "resinv-shared")
    tl.log(f"reservation apart: A {apart_a}, B {apart_b}")
    tl.log(f"reservation shared: A {ca}, B {cb}")
    assert apart_a["request_cpus"] == 2 and apart_b["request_cpus"] == 1
    assert apart_b["max_cpus"] == 2      # B above its request of 1 all along
    assert apart_a["reservation_inversion_ms"] < 0.10 * TRACE_S * 1000, apart_a
    # shared: B's hog on CPU 0 takes turns with A's there, with B above its request meanwhile
    inv = ca["reservation_inversion_ms"]
    assert inv > 0.15 * TRACE_S * 1000 and inv > 3 * apart_a["reservation_inversion_ms"], (apart_a, ca)
    assert ca["reservation_inversion_longest_ms"] <= inv
    assert ca["reservation_inversion_by_ms"].get(b, 0) == pytest.approx(inv), ca
    assert cb["reservation_inversion_ms"] == 0, cb      # B is never below its request of 1 with 2 hogs
    # the timeline has run segments of both cgroups, within the window
    rows = tl.read_timeline(timeline)
    seen = {r["cgroup"] for r in rows}
    assert {a, b} <= seen, seen
    end = TRACE_S * 1e9 * 1.01
    assert all(0 <= r["start_ns"] <= r["end_ns"] <= end for r in rows)


SLEEPER = ["/usr/bin/python3", "-c", "import time\nwhile True:\n    time.sleep(0.002)"]


def test_timer_latency_of_a_sleeper_not_of_a_hog():
    """timer_latency counts the sleep timers of a cgroup's tasks (time.sleep:
    clock_nanosleep on CLOCK_MONOTONIC), at most one per sleep of 2 ms; a
    task that never sleeps has none. Every fired timer wakes its sleeper, so
    the wakeups are at least about as many."""
    s = tl.cg_create(f"{tl.TEST_CG}/sleeper")
    h = tl.cg_create(f"{tl.TEST_CG}/hog")
    procs = []
    try:
        procs.append(tl.spawn(SLEEPER, cgroup=s))
        procs.append(tl.spawn(tl.BUSY_LOOP, cgroup=h))
        rep = tl.run_trace(TRACE_S, "timer-latency", cgroups=[s, h])
    finally:
        for p in procs:
            tl.kill_proc(p)
    ts, th = rep["cgroups"][s]["timer_latency"], rep["cgroups"][h]["timer_latency"]
    tl.log(f"timer latency: sleeper {ts}, hog {th}; sleeper wakeups {rep['cgroups'][s]['wakeup_latency']}")
    assert 100 <= ts["n"] <= TRACE_S / 0.002 + 5, ts
    assert 0 <= ts["p50_us"] <= ts["p99_us"] <= ts["max_us"] < TRACE_S * 1e6, ts
    assert th["n"] == 0, th
    assert rep["cgroups"][s]["wakeup_latency"]["n"] >= 0.9 * ts["n"] - 5, rep["cgroups"][s]
