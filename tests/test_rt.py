"""RT tasks above schedbe: a SCHED_FIFO task that takes a CPU in long bursts.

LC tasks queued on that CPU's local queue when the RT task takes it (an LC
wakeup that preempted BE there, or one placed on it while it was idle) would
wait behind the RT burst. schedbe sends them back to ops.enqueue, which finds
them another CPU: from ops.cpu_release up to v6.18, from the sched_switch
tracepoint on v6.19+ (where cpu_release is deprecated and schedbe leaves it
out). Checked here:

- schedbe's log names the path it chose, and on the tracepoint path the kernel
  does not print the cpu_acquire/release deprecation warning;
- the evacuation happened (schedbe's rt_evacuations counter, or, where the
  tick's rescue exists (v7.1+), rt_rescues too: with no BE, SCHED_BE
  evacuates at once only when some CPU is idle and the RT task is known for
  long bursts, so with LC hogs on every
  CPU a tick or a CPU about to idle rescues the task instead, docs/design.md);
- no LC sleeper waited behind a burst: the tracer (`schedbe trace
  --per-task`, kernel tracepoints) gives each LC worker's wakeup latency,
  woken until switched in; a task stranded on the RT CPU would wait about a
  burst (~300 ms), while BE hogs keep every other CPU busy.

The latency bound is a behaviour check, not a test of the evacuation alone:
with the evacuation disabled it held in one run (worst 60 ms, against 43 ms
with it) and failed in none; with the evacuation alone (before the tick
rescue in main.bpf.c) one CI run had a sleeper 324 ms late, stranded by a
task that landed in CPU 0's local queue just after the RT task took it. The
counter is what shows schedbe's evacuation path runs.

Each worker also measures how late its sleeps end, which is logged: that
adds the sleep timer's own lateness, which no scheduler controls. Until
2026-11-29 the bound was asserted on that figure, with two workers per CPU;
a CI run on a slower machine then had sleepers 215 and 225 ms late under
LLF, and the tracer put such waits on an LC overload, not on the RT task
(N_WORKERS below).
"""

import json
import os
import subprocess
import sys
import time

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.vm

BE_CG = f"{tl.TEST_CG}/rt-be"
RUN_S = 12
# The RT task: ~300 ms of spinning, then 5 ms asleep, on CPU 0.
RT_BURST = ("import time\n"
            "while True:\n"
            "    t = time.monotonic()\n"
            "    while time.monotonic() - t < 0.3: pass\n"
            "    time.sleep(0.005)\n")
# With no hogs: long bursts that each follow a short one, so that lazy
# evacuation, which guesses a burst from the one before, guesses each long one
# short and leaves what it preempts in place, for the RT CPU's own timer
# interrupts or an idle CPU's ops.dispatch to send back (see the test).
RT_BURST_ALTERNATING = ("import time\n"
                        "while True:\n"
                        "    t = time.monotonic()\n"
                        "    while time.monotonic() - t < 0.3: pass\n"
                        "    time.sleep(0.005)\n"
                        "    time.sleep(0.005)\n")
# An LC worker: sleeps of 2 ms with a little work between, reporting how late
# its worst sleep ended (seconds) when it is told to stop (SIGTERM).
LC_WORKER = ("import signal, sys, time\n"
             "worst = 0.0\n"
             "def done(*_):\n"
             "    print(worst, flush=True); sys.exit(0)\n"
             "signal.signal(signal.SIGTERM, done)\n"
             "time.sleep(1.0)\n"
             "while True:\n"
             "    t = time.monotonic(); time.sleep(0.002)\n"
             "    worst = max(worst, time.monotonic() - t - 0.002)\n"
             "    x = 0\n"
             "    for i in range(2000): x += i\n")
LATE_MAX_S = 0.2
# One LC worker per CPU: each takes ~0.36 CPU here, so LC stays under the CPUs
# the RT task leaves and no policy makes a sleeper wait long for its turn.
# With two per CPU LC was overloaded (each worker runnable but waiting half
# the time, tracer), and the policies' own order under overload showed as
# waits of up to 184 ms (Akita) and 168 ms (LLF, whose least-loaded order
# lets a busier task wait up to its 200 ms floor), against 28 ms under
# SCHED_BE: the bound then measured the overload, not the RT takeover.
N_WORKERS = tl.NR_CPUS
# The tracer's window: from the workers' first sleeps (they wait 1 s) to
# before they are stopped (RUN_S after the spawn), less its own start-up.
TRACE_S = RUN_S - 4
DEPRECATION = "cpu_acquire/release() are deprecated"


def stats_total(log_text, key):
    """Sum a counter over the JSON stats lines of `schedbe run --stats N --json`."""
    total = 0
    for line in log_text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                total += json.loads(line).get(key, 0)
            except json.JSONDecodeError:
                pass
    return total


def policy_args(policy):
    """`schedbe run` arguments for the policy under test (tl.policy_args:
    under Akita and LLF the LC workers are host tasks), with JSON stats."""
    return tl.policy_args(policy) + ["--stats", 1, "--json"]


@pytest.mark.parametrize("policy,hogs", [("sched-be", "be"), ("akita", "be"), ("llf", "be"), ("sched-be", "lc"),
                                         ("sched-be", "none")],
                         ids=["sched-be", "akita", "llf", "sched-be-lc-hogs", "sched-be-no-hogs"])
def test_rt_task_takes_a_cpu(policy, hogs):
    """hogs: the busy loops that keep every CPU busy are BE, or LC (no BE at
    all: SCHED_BE's lazy evacuation, where a task preempted by the RT task
    stays unless a CPU is idle and the RT task's last burst was long, and is
    rescued by a tick after 1 ms of RT), or there are none (the other CPUs
    mostly idle: a long burst guessed short leaves the task in place until
    the RT CPU's own timer interrupts or another CPU on its way to idle send
    it back). In this guest the second suffices: with the timer's rescue
    left out the no-hogs case passed twice too (longest waits 4.3 and 4.6
    ms, against 11.8 and 10.4 ms with it; 2026-12-02), since the guest's
    own activity keeps passing through the idle CPUs' ops.dispatch. The
    timer's rescue is for a quiet machine whose idle CPUs stay idle."""
    if tl.NR_CPUS < 2:
        pytest.skip("needs 2 CPUs")
    tl.cg_create(BE_CG, cpu_idle=1)
    kmsg = tl.KmsgReader()
    procs, workers = [], []
    name = f"rt-takeover-{policy}" + ("" if hogs == "be" else f"-{hogs}-hogs")
    with tl.Schedbe(*policy_args(policy), name=name) as sched:
        try:
            if hogs != "none":
                procs += [tl.spawn(tl.BUSY_LOOP, cgroup=BE_CG if hogs == "be" else None) for _ in range(tl.NR_CPUS)]
            # with no hogs, one worker: others' wakeups would rescue it on their way to idle
            workers = [tl.spawn([sys.executable, "-c", LC_WORKER], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                       for _ in range(1 if hogs == "none" else N_WORKERS)]
            rt = tl.spawn(["python3", "-c", RT_BURST_ALTERNATING if hogs == "none" else RT_BURST], cpus=[0])
            procs.append(rt)
            # spawn() sets a policy with priority 0; FIFO needs one above.
            os.sched_setscheduler(rt.pid, os.SCHED_FIFO, os.sched_param(10))
            # its userspace on CPU 0, which the RT task takes anyway
            tracer = tl.trace_in_background(TRACE_S, f"{name}-trace", per_task=True, cpu=0)
            time.sleep(RUN_S)
            traced = tracer.result()
            sched.check_running()
            late = []
            for w in workers:
                w.terminate()
                out, err = w.communicate(timeout=60)
                assert out.strip(), f"LC worker {w.pid} printed nothing (exit {w.returncode}): {err.decode()[-500:]}"
                late.append(float(out))
        finally:
            for p in procs + workers:
                tl.kill_proc(p)
        time.sleep(1.5)  # one more stats line
        log = sched.log_tail(100000)
    msgs = kmsg.read_new()
    kmsg.close()
    evac = stats_total(log, "rt_evacuations")
    rescues = stats_total(log, "rt_rescues")
    path = "tracepoint" if "sched_switch tracepoint" in log else "cpu_release"
    pids = {w.pid for w in workers}
    rows = [t for t in traced.get("tasks", []) if t["pid"] in pids]
    waits = {t["pid"]: t["wakeup_latency"] for t in rows}
    cpus = sum(t["run_ns"] for t in rows) / max(traced["duration_ns"], 1)
    each_ms = sorted(w["max_us"] / 1e3 for w in waits.values())
    wait_max_ms = max(each_ms, default=0.0)
    tl.log(f"rt ({policy}, {hogs if hogs != 'none' else 'no'} hogs): path {path}; {evac} local queues evacuated, {rescues} rescued in {RUN_S} s; "
           f"LC sleepers' longest wakeup latency (traced) {wait_max_ms:.1f} ms "
           f"(each: {', '.join(f'{x:.1f}' for x in each_ms)} ms, "
           f"{sum(w['n'] for w in waits.values())} wakeups, {cpus:.2f} CPUs); "
           f"their own worst lateness {max(late) * 1e3:.1f} ms "
           f"(all: {', '.join(f'{x * 1e3:.1f}' for x in sorted(late))} ms)")
    assert "RT/DL takeovers handled by" in log, log[-2000:]
    if path == "tracepoint":
        assert not any(DEPRECATION in m for m in msgs), "kernel warned about cpu_release although schedbe left it out"
        if policy == "sched-be":
            # lazy evacuation's backstop on the RT CPU itself names its hook (rt_takeover.rs)
            assert "RT strand backstop at" in log, log[-2000:]
    assert evac + rescues > 0, "no local queue was evacuated or rescued although an RT task kept taking CPU 0"
    assert len(waits) == len(workers) and all(w["n"] >= 100 for w in waits.values()), f"traced wakeups: {waits}"
    assert wait_max_ms < LATE_MAX_S * 1e3, (f"an LC sleeper waited {wait_max_ms:.0f} ms from its wakeup: "
                                            f"stranded behind the RT burst? (traced: {waits})")


# A task that spends most of its time with migration disabled, preemptibly:
# BPF_MAP_LOOKUP_BATCH over a 100 000-entry hash map, in a loop (the htab
# batch walk runs under migrate_disable(); schedbe's own stats reads were
# such a task in the CI run below). Raw bpf(2) through ctypes: no bpftool.
MIGRATE_DISABLED_LOOP = r"""
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
SYS_BPF, N = 321, 100000
def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    r = libc.syscall(SYS_BPF, cmd, buf, 128)
    if r < 0:
        raise OSError(ctypes.get_errno(), f"bpf({cmd})")
    return r, buf
# BPF_MAP_CREATE: BPF_MAP_TYPE_HASH, 4-byte keys and values
fd, _ = bpf(0, struct.pack("IIII", 1, 4, 4, N))
keys = (ctypes.c_uint32 * N)(*range(N))
vals = (ctypes.c_uint32 * N)()
out_k, out_v = (ctypes.c_uint32 * N)(), (ctypes.c_uint32 * N)()
def batch(cmd, k, v, count, in_batch=0, out_batch=0):
    attr = struct.pack("QQQQIIQQ", in_batch, out_batch, ctypes.addressof(k), ctypes.addressof(v), count, fd, 0, 0)
    return bpf(cmd, attr)
batch(26, keys, vals, N)  # BPF_MAP_UPDATE_BATCH
token = ctypes.c_uint64()
while True:
    try:
        batch(24, out_k, out_v, N, 0, ctypes.addressof(token))  # BPF_MAP_LOOKUP_BATCH, the whole map
    except OSError as e:
        if e.errno != 2:  # ENOENT: the walk reached the end
            raise
"""
# The RT task: 3 s bursts, 0.1 s apart: one burst that preempts the loop
# inside a batch walk leaves it in the CPU's local queue for 3 s.
RT_LONG_BURST = ("import time\n"
                 "while True:\n"
                 "    t = time.monotonic()\n"
                 "    while time.monotonic() - t < 3.0: pass\n"
                 "    time.sleep(0.1)\n")


def test_rt_task_over_a_task_with_migration_disabled():
    """An RT task that holds CPU 1 for seconds preempts a task that runs
    with migration disabled (inside a BPF map batch syscall), an LC hog
    keeping CPU 2 ticking. Each re-enqueue of CPU 1's local queue puts that
    task straight back (the kernel does not call ops.enqueue for it), and the
    kernel aborts the scheduler once a task is re-enqueued 257 times without
    running ("reenqueue limit", seen in a CI run on 2026-12-06 with schedbe's
    own stats thread behind a 500 ms RT burst): the ticks' rescue of a CPU
    an RT task has held over 1 ms sent it back 250 times a second. schedbe
    re-enqueues a CPU's local queue at most 64 times in one RT span
    (rt_reenq_allowed()); it must still be running after 12 s of bursts."""
    if tl.NR_CPUS < 3:
        pytest.skip("needs 3 CPUs: the RT task's, the ticking hog's and the harness's")
    procs = []
    with tl.Schedbe("--stats", 1, "--json", name="rt-migrate-disabled") as sched:
        try:
            loop = tl.spawn([sys.executable, "-c", MIGRATE_DISABLED_LOOP], cpus=[1], stderr=subprocess.PIPE)
            procs.append(loop)
            procs.append(tl.spawn(tl.BUSY_LOOP, cpus=[2]))
            time.sleep(2)
            assert loop.poll() is None, f"the batch loop exited: {loop.stderr.read().decode()[-500:]}"
            rt = tl.spawn(["python3", "-c", RT_LONG_BURST], cpus=[1])
            procs.append(rt)
            os.sched_setscheduler(rt.pid, os.SCHED_FIFO, os.sched_param(10))
            deadline = time.monotonic() + 12
            while time.monotonic() < deadline:
                sched.check_running()
                time.sleep(0.5)
            sched.check_running()
        finally:
            for p in procs:
                tl.kill_proc(p)
        time.sleep(1.5)
        log = sched.log_tail(100000)
    tl.log(f"rt over migration disabled: {stats_total(log, 'rt_evacuations')} evacuations, "
           f"{stats_total(log, 'rt_rescues')} rescues in 12 s")
    assert "reenqueue limit" not in log, log[-3000:]
