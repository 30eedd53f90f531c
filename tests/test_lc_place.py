"""Where schedbe places a synchronous wakeup (crates/schedbe/src/bpf/lc_place.bpf.h,
sync_unstack()).

A pipe ping-pong pair whose two tasks last ran on one CPU: the kernel's
default CPU picker sends a synchronous wakee to its waker's CPU while any CPU
idles, so left to it the pair would share that CPU for good (nothing in
sched_ext pulls a task out of a local queue; EEVDF's idle balance would, and
its wakeup path prefers an idle CPU to a busy waker's). schedbe sends the
wakee to an idle CPU once; from then on each task wakes on its own idle CPU.

The figures are the kernel's, which schedbe does not write: each task's CPU
from /proc/PID/stat (the one it last ran on), sampled, and its migrations
(se.nr_migrations in /proc/PID/sched). Before sync_unstack() the pair stayed
on CPU 1 in every sample; the test failed there.
"""

import os
import re
import time
import types
from pathlib import Path

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.vm

CG = f"{tl.TEST_CG}/place"
# Two processes passing a byte back and forth over two pipes: each read blocks,
# and each write wakes the other with WF_SYNC (pipe_write).
PINGPONG = """
import os
a_r, a_w = os.pipe(); b_r, b_w = os.pipe()
if os.fork() == 0:
    while True:
        os.read(a_r, 1); os.write(b_w, b"x")
while True:
    os.write(a_w, b"x"); os.read(b_r, 1)
"""
WINDOW = 4.0
# Apart, each task still migrates now and then: when the waker wakes its peer
# before the peer's CPU has gone idle (the peer blocked a moment earlier), the
# picker sends the peer to the waker's CPU, and the next wakeup moves one of
# them out again (sync_unstack()), two migrations. Measured 0.9% of round
# trips on the development host, 2.1% on a CI machine (4d795fe); bouncing at
# every message would be one per round trip.
MIGRATIONS_PER_TRIP_MAX = 0.1


def trips_of(pid):
    """Round trips so far: each is one voluntary switch (a blocking read)."""
    return tl.ctxt_switches(types.SimpleNamespace(pid=pid))[0]


def migrations(pid):
    m = re.search(r"^se\.nr_migrations\s*:\s*(\d+)", Path(f"/proc/{pid}/sched").read_text(), re.M)
    return int(m.group(1))


@pytest.mark.skipif(tl.NR_CPUS < 3, reason="needs CPUs 1 and 2 for the pair, the harness on CPU 0")
def test_sync_pair_on_one_cpu_spreads_to_two_idle_cpus():
    """The pair starts pinned to CPU 1, then may use CPUs 1 and 2, which are
    otherwise idle (the test samples from CPU 0). Over the next WINDOW s the
    two must be on different CPUs in at least 80% of the samples, and each
    must migrate at most once per MIGRATIONS_PER_TRIP_MAX^-1 of its round
    trips: spread once, not bounced between the CPUs at every message."""
    tl.cg_create(CG)
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    p = None
    try:
        with tl.Schedbe(name="sync-place"):
            p = tl.spawn(["python3", "-c", PINGPONG], cgroup=CG, cpus=[1])
            child = tl.wait_for(lambda: (tl.children(p.pid) or [None])[0], 20, what="the pair's second process")
            pair = [p.pid, child]
            for pid in pair:
                os.sched_setaffinity(pid, [1])
            tl.wait_for(lambda: all(trips_of(pid) > 200 for pid in pair), 30,
                        what="the pair exchanging messages on CPU 1")
            assert [tl.last_cpu(pid) for pid in pair] == [1, 1]
            trips0 = [trips_of(pid) for pid in pair]
            mig0 = [migrations(pid) for pid in pair]
            for pid in pair:
                os.sched_setaffinity(pid, [1, 2])
            apart = samples = 0
            end = time.monotonic() + WINDOW
            while time.monotonic() < end:
                cpus = [tl.last_cpu(pid) for pid in pair]
                apart += cpus[0] != cpus[1]
                samples += 1
                time.sleep(0.02)
            trips = [trips_of(pid) - t for pid, t in zip(pair, trips0)]
            migs = [migrations(pid) - m for pid, m in zip(pair, mig0)]
            tl.log(f"sync pair: apart in {apart}/{samples} samples; round trips {trips}; migrations {migs}")
            assert min(trips) >= 100, f"the pair hardly ran ({trips} round trips in {WINDOW} s)"
            assert apart >= 0.8 * samples, \
                f"the pair shared a CPU in {samples - apart} of {samples} samples (migrations {migs})"
            assert all(m <= 1 + t * MIGRATIONS_PER_TRIP_MAX for m, t in zip(migs, trips)), \
                f"the pair bounced between CPUs: migrations {migs} for round trips {trips}"
    finally:
        if p is not None:
            tl.kill_proc(p)
        os.sched_setaffinity(0, mine)


# A reader (LC) of two pipes: one a BE task fills without pause, pinned to
# CPU 1 (a batch job's output, read by an LC shipper or a container's shim);
# the other an LC task pinned to CPU 2 writes a byte to every 5 ms. An LC
# CPU hog shares CPU 2. The LC producer's wakeups bring the reader to CPU 2
# (its sync wakeup, from there); the BE writer's next wakeup then finds the
# reader's CPU busy and some CPU idle (0 or 3, which it may not use), and
# the kernel's picker chooses the waker's CPU, running BE, and reports it
# idle.
READER = """
import os, select, time
b_r, b_w = os.pipe(); l_r, l_w = os.pipe()
if os.fork() == 0:
    os.sched_setaffinity(0, {1})
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    while True:
        os.write(b_w, b"x")
if os.fork() == 0:
    os.sched_setaffinity(0, {2})
    while True:
        time.sleep(0.005); os.write(l_w, b"y")
while True:
    for fd in select.select([b_r, l_r], [], [])[0]:
        os.read(fd, 65536)
"""
BE_WAKER_TRACE_S = 6
# Judged against EEVDF in the same boot (a SCHED_IDLE writer is preempted by
# any wakeup of a normal task there): the reader's inversion (BE CPU time
# while it waits, the tracer's per-task charge) at most this many times
# EEVDF's plus 3% of the window, and its wakeup p99 within 5 ms. Under
# emulation every wakeup, EEVDF's too, waits out the rest of the writer's
# write() before the switch (~0.1 ms). Measured over three boots (4 vCPUs):
# EEVDF 0.108-0.132, schedbe 0.115-0.169, LLF 0.203-0.205 (its preemption
# is a kick, an IPI even to its own CPU), Akita 0.198-0.210. Before the fix
# the reader waited behind its BE writer for 97% of the window, wakeup p50
# 23 ms (schedbe), and LLF, which never preempted BE, 50% (p99 8 ms).
BE_WAKER_VS_EEVDF = 2.5
BE_WAKER_SLACK = 0.03
BE_WAKER_P99_MAX_US = 5000


def reader_under(policy):
    """Run the reader's workload under `policy` (None: EEVDF) and trace it:
    the tracer's row for the reader, and its inversion as a share of the window."""
    tl.cg_create(CG)
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    name = f"be-waker-{policy or 'eevdf'}"
    procs = []
    sched = tl.Schedbe(*tl.policy_args(policy), name=name) if policy else None
    try:
        if sched:
            sched.start()
        procs.append(tl.spawn(tl.BUSY_LOOP, cgroup=CG, cpus=[2]))
        reader = tl.spawn(["python3", "-c", READER], cgroup=CG, cpus=[1, 2])
        procs.append(reader)
        tl.wait_for(lambda: len(tl.children(reader.pid)) >= 2, 20, what="the reader's two writers")
        tl.wait_for(lambda: trips_of(reader.pid) > 200, 30, what="the reader reading")
        rep = tl.run_trace(BE_WAKER_TRACE_S, name, per_task=True, cpu=0)
        if sched:
            sched.check_running()
    finally:
        for p in procs:
            tl.kill_proc(p)
        os.sched_setaffinity(0, mine)
        if sched:
            sched.stop()
    row = {t["pid"]: t for t in rep.get("tasks", [])}.get(reader.pid)
    assert row is not None, f"{name}: the tracer did not see the reader {reader.pid}"
    lat = row["wakeup_latency"]
    inv = row["inversion_ns"] / rep["duration_ns"]
    tl.log(f"{name}: {tl.trace_summary(rep)}")
    tl.log(f"{name}: reader ran {row['run_ns'] / 1e6:.1f} ms, waited {row['wait_ns'] / 1e6:.1f} ms, "
           f"inversion {inv:.4f} of the window; wakeups {lat['n']}, p50 {lat['p50_us']} us, "
           f"p99 {lat['p99_us']} us, max {lat['max_us']} us")
    assert row["tier"] == "lc" and lat["n"] >= 100, f"{name}: the reader hardly woke: {row}"
    return row, inv


@pytest.fixture(scope="module")
def eevdf_reader():
    if tl.NR_CPUS < 4:
        pytest.skip("needs CPUs 1-2 for the workload and an idle CPU 3")
    return reader_under(None)


@pytest.mark.parametrize("policy", ["sched-be", "llf", "akita"])
def test_lc_wakee_of_a_be_waker_does_not_wait_behind_it(policy, eevdf_reader):
    """The kernel's default picker may answer a synchronous wakeup with the
    waker's CPU, busy, reported as idle; behind a BE waker that never sleeps
    the LC wakee would then wait in that CPU's local queue until the BE
    slice ends (the entry check never sees it). Every policy asks the picker
    again without the sync hint (sync_pick.bpf.h): an idle CPU, or none and
    the entry check preempts BE. Judged by the tracer against EEVDF: the
    reader's inversion (BE running while it waits) and wakeup latency."""
    _, inv_eevdf = eevdf_reader
    row, inv = reader_under(policy)
    lat = row["wakeup_latency"]
    bound = BE_WAKER_VS_EEVDF * inv_eevdf + BE_WAKER_SLACK
    assert inv <= bound, (f"the reader waited behind BE for {inv:.3f} of the window, EEVDF {inv_eevdf:.3f} "
                          f"(bound {bound:.3f}; p99 wakeup {lat['p99_us']} us)")
    assert lat["p99_us"] <= BE_WAKER_P99_MAX_US, f"the reader's wakeup p99 is {lat['p99_us']} us"
