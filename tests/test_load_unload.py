"""Load and unload schedbe 6 times under load: each time `schedbe run` reaches
enabled, exits 0 on SIGINT (every third time SIGTERM) and sched_ext returns to
disabled; afterwards every workload process still exists and still runs."""

import signal
import time

import pytest

import schedbe_testlib as tl

# Under emulation and this load a load takes 30-40 s (BPF verification competes
# with the load), so 10 cycles took 216-389 s, near the per-test timeout.
CYCLES = 6

pytestmark = pytest.mark.vm


def test_load_unload_under_load():
    lc = tl.cg_create(f"{tl.TEST_CG}/lc")
    stress_cg = tl.cg_create(f"{tl.TEST_CG}/stress")
    idle = tl.cg_create(f"{tl.TEST_CG}/idle", cpu_idle=1)
    procs = [
        tl.spawn(["stress-ng", "--cpu", str(tl.NR_CPUS), "--cpu-load", "50",
                  "--cpu-load-slice", "5", "-t", "0"], cgroup=stress_cg),
        tl.spawn(tl.BUSY_LOOP, cgroup=lc, policy=tl.os.SCHED_IDLE),   # BE by policy
        tl.spawn(tl.BUSY_LOOP, cgroup=idle),                           # BE by cpu.idle
        tl.spawn(tl.BUSY_LOOP, cgroup=lc, cpus={tl.NR_CPUS - 1}),     # pinned LC
        tl.spawn(["sh", "-c", "while :; do sleep 0.01; done"], cgroup=lc),  # fork/exit churn
    ]
    try:
        # the stress-ng parent and its workers, once all have started
        tl.wait_for(lambda: len(tl.cg_procs(stress_cg)) >= tl.NR_CPUS + 1, 30,
                    what="stress-ng workers")
        tracked = set(tl.cg_procs(stress_cg)) | {p.pid for p in procs}
        tl.log(f"tracking {len(tracked)} workload processes")
        loads = []
        for i in range(CYCLES):
            s = tl.Schedbe(name="load-unload", start_timeout=120).start()
            loads.append(s.load_s)
            time.sleep(1.0)
            s.check_running()
            sig = signal.SIGTERM if i % 3 == 2 else signal.SIGINT
            t0 = time.monotonic()
            s.stop(sig=sig)
            tl.log(f"cycle {i + 1}/{CYCLES}: enabled after {s.load_s:.2f}s, "
                   f"{signal.Signals(sig).name} -> exit 0, disabled after {time.monotonic() - t0:.2f}s")
        tl.log(f"load time: min {min(loads):.2f}s, max {max(loads):.2f}s")

        lost = {pid: tl.proc_state(pid) for pid in tracked if tl.proc_state(pid) in (None, "Z", "X")}
        assert not lost, f"workload processes lost: {lost}"
        # each still gets CPU now that the kernel's scheduler is back
        before = {pid: tl.cpu_ns(pid) for pid in tracked}
        time.sleep(3)
        stalled = [pid for pid in tracked if tl.cpu_ns(pid) <= before[pid]
                   and tl.proc_state(pid) != "S"]
        assert not stalled, f"workload processes that did not run in 3 s: {stalled}"
        idle_runs = [p.pid for p in procs[1:4] if tl.cpu_ns(p.pid) <= before[p.pid]]
        assert not idle_runs, f"busy loops that did not run in 3 s: {idle_runs}"
    finally:
        for p in procs:
            tl.kill_proc(p)
