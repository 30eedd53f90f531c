"""LC wakeup preemption (crates/schedbe/src/bpf/lc_place.bpf.h,
lc_preempt_victim(); lc_burst.bpf.h): who preempts whom among LC tasks.

- Request handlers of equal demand sharing a CPU do not preempt each other
  mid-request: each is expected to finish before a woken one would have run
  half its own request (lc_burst_outlasts()), so the woken one waits.
- A short sleeper (a timer thread) still preempts a CPU hog at once.

The figures are the kernel's own: the voluntary and nonvoluntary context
switches of /proc/PID/status, which schedbe does not write, and the tracer's
(`schedbe trace`, kernel tracepoints) over a second window. A nonvoluntary
switch is a preemption (or a slice's end, which a 2 ms request should not
reach). When the counts have too many, the tracer's timeline tells wakeup
preemptions from slices' ends, and who preempted (the task switched in after
a handler left its CPU still runnable). The ticker's wakeup latency (woken
until switched in, from the tracer's per-task table) shows it preempts the
hog at once.
"""

import collections
import time

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.vm

WARM = 2.0
WINDOW = 6.0
SLICE_MS = 5.0      # schedbe's LC slice (lc_slice_us), which the test leaves at its default
N_HANDLERS = 10
# half the requests the handlers make in a window (one per 30 ms on average
# each, plus the 2 ms request): fewer, and the guest was too slow to measure
MIN_REQUESTS = 0.5 * N_HANDLERS * WINDOW / 0.032

# burst BURST s of CPU time, sleep between LO and HI s, forever (CPU time,
# not wall time: the burst is the same whoever else runs on the CPU; a
# random sleep, so that the workers do not fall into step)
WORKER = """
import random, sys, time
burst, lo, hi = map(float, sys.argv[1:4])
while True:
    t = time.thread_time()
    while time.thread_time() - t < burst:
        pass
    time.sleep(random.uniform(lo, hi))
"""


def worker(cpu, burst_s, sleep_lo_s, sleep_hi_s):
    return tl.spawn(["python3", "-c", WORKER, str(burst_s), str(sleep_lo_s), str(sleep_hi_s)],
                    cgroup=f"{tl.TEST_CG}/lcp", cpus=[cpu])


def over_window(procs):
    """Per process: (voluntary, nonvoluntary) switches over WINDOW s; and the
    other processes that used the most CPU meanwhile (tl.who_ran)."""
    a = [tl.ctxt_switches(p) for p in procs]
    cpu0 = tl.cpu_by_process()
    time.sleep(WINDOW)
    got = [(v - v0, n - n0) for (v, n), (v0, n0) in zip((tl.ctxt_switches(p) for p in procs), a)]
    return got, tl.who_ran(cpu0, WINDOW, exclude={p.pid for p in procs})


def traced_window(name, cpu, pids, ticker):
    """`schedbe trace --timeline --per-task` over WINDOW s (its userspace on
    CPU 0, away from the workers' CPUs 1 and 2): split(), how the runs of
    `pids` on `cpu` ended; and the wakeup latency of task `ticker`."""
    timeline = tl.results_dir() / f"{name}.timeline.csv"
    rep = tl.run_trace(WINDOW, name, cpu=0, per_task=True, extra=["--timeline", str(timeline)])
    tick = next((t["wakeup_latency"] for t in rep.get("tasks", []) if t["pid"] == ticker), None)
    return split(timeline, cpu, pids), tick


def split(timeline, cpu, pids, most=5):
    """From a tracer timeline, the runs of `pids` on `cpu`: how many ended
    asleep (their requests), how many were cut short while still runnable
    (preempted before a whole LC slice of wall time, which no slice's end
    can be: the slice counts run time, which is at most wall time) and by
    whom (the task switched in; another of `pids` is "handler"), and how
    many ended preempted after a slice or more (a slice's end, or a
    preemption of a run that long)."""
    rows = sorted((r["start_ns"], r["end_ns"], r["pid"], r["comm"], r["ended"])
                  for r in tl.read_timeline(timeline) if r["cpu"] == cpu)
    who, asleep, short, long_ = collections.Counter(), 0, 0, 0
    for (start, end, pid, _, ended), nxt in zip(rows, rows[1:] + [None]):
        if pid not in pids:
            continue
        asleep += ended == "blocked"
        if ended != "preempted":
            continue
        if end - start >= SLICE_MS * 1e6:
            long_ += 1
            continue
        short += 1
        if nxt is not None:
            who["handler" if nxt[2] in pids else nxt[3]] += 1
    return {"requests": asleep, "preempted": short, "after_a_slice": long_, "by": who.most_common(most)}


@pytest.mark.skipif(tl.NR_CPUS < 3, reason="needs 3 CPUs: two pinned groups and the harness's")
def test_equal_handlers_wait_a_sleeper_preempts_a_hog():
    """CPU 1: ten handlers, each serving a 2 ms request every 15-45 ms (0.6
    CPU, a thread pool's pattern: a handler wakes after a long sleep, with
    the whole sleeper's credit, and finds another running about as often
    as the CPU is busy): preempted at under 5% of their requests (in the
    VM, 0.2-1.2%; 6.3% before lc_burst_outlasts()). CPU 2: a hog and a 1 ms
    ticker with bursts of tens of us: the hog is preempted at most of the
    ticker's wakeups, which the tracer shows: the ticker's median wakeup
    latency is under a fifth of the hog's slice.

    The kernel's counts do not tell a wakeup preemption from a slice's end,
    which a 2 ms request should never reach, but under emulation on a busy
    host does: since 2026-11-29 runs of a request lasted past the 5 ms slice
    often enough to count 15-56% of requests as preempted, and in one boot
    a 20 ms slice cut that from 0.156-0.160 to 0.015-0.018 (docs/testing.md).
    So when the counts miss the bound, the traced second window separates
    the two: the handlers' runs cut short of a slice (of wall time, so no
    slice's end) must stay under 5% of their requests. A traced window in
    which the handlers served under half their requests (a guest too slow
    to serve the load: 819 of the 1875 they ask for, in a run on the 2-core
    dev host while another guest ran there too; 1623 in the next run) is
    traced again once.

    The ticker's claim was a count of its wakeups (over 1.25 times the 1200
    a ticker that never preempted could have in 6 s) until a CI run on a
    slower machine counted 1101: its vCPU stalls delay the timer itself,
    which no scheduler controls. Its wakeup latency is the scheduler's part:
    woken 1 ms into a hog's slice, a ticker that waited for the slice's end
    would wait 4 ms."""
    tl.cg_create(f"{tl.TEST_CG}/lcp")
    procs = []
    with tl.Schedbe(name="lc-preempt") as sched:
        try:
            handlers = [worker(1, 0.002, 0.015, 0.045) for _ in range(N_HANDLERS)]
            hog = tl.spawn(tl.BUSY_LOOP, cgroup=f"{tl.TEST_CG}/lcp", cpus=[2])
            ticker = worker(2, 0.00002, 0.001, 0.001)
            procs = handlers + [hog, ticker]
            time.sleep(WARM)
            got, others = over_window(procs)
            requests = sum(v for v, _ in got[:N_HANDLERS])
            preempted = sum(n for _, n in got[:N_HANDLERS])
            traced, tick_lat = traced_window("lc-preempt-trace", 1, {p.pid for p in handlers}, ticker.pid)
            if traced["requests"] < MIN_REQUESTS:
                # a guest too slow to serve the load measures nothing (see the docstring): once more
                tl.log(f"lc preempt: traced window too slow ({traced}); tracing another")
                traced, tick_lat = traced_window("lc-preempt-trace2", 1, {p.pid for p in handlers}, ticker.pid)
            sched.check_running()
        finally:
            for p in procs:
                tl.kill_proc(p)
    (hog_v, hog_n), (tick_v, tick_n) = got[-2], got[-1]
    tl.log(f"lc preempt: handlers {requests} requests, {preempted} preempted ({preempted / max(requests, 1):.3f}); "
           f"ticker {tick_v} wakeups, hog preempted {hog_n} times ({hog_n / max(tick_v, 1):.2f} a wakeup); "
           f"traced: ticker wakeup latency {tick_lat}; "
           f"most CPU besides (pid, comm, CPUs): {others}; traced window: {traced}")
    # what else ran, for a failure (in CI twice: ~1000 requests, half preempted, the ticker slow)
    ctx = f"; most CPU besides the workers (pid, comm, CPUs): {others}"
    assert requests >= MIN_REQUESTS, f"handlers served only {requests} requests in {WINDOW}s" + ctx
    assert hog_n >= 0.5 * tick_v, f"the hog was preempted {hog_n} times at {tick_v} ticker wakeups" + ctx
    # at least one wakeup per 20 ms for a median; a ticker that waited for
    # the hog's slices would have a median of about 4 ms (see above)
    assert tick_lat is not None and tick_lat["n"] >= WINDOW / 0.02, f"ticker's wakeups, traced: {tick_lat}" + ctx
    assert tick_lat["p50_us"] < SLICE_MS * 1000 / 5, f"ticker's wakeup latency, traced: {tick_lat}" + ctx
    if preempted > 0.05 * requests:
        assert traced["requests"] >= MIN_REQUESTS, f"traced window: {traced}" + ctx
        assert traced["preempted"] <= 0.05 * traced["requests"], (
            f"handlers preempted short of a slice at {traced['preempted']} of {traced['requests']} requests "
            f"(the kernel's counts, slices' ends included: {preempted} of {requests}); traced window: {traced}" + ctx)
