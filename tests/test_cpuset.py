"""cpusets: LC and BE cgroups with overlapping cpuset.cpus.

LC (3 hogs) is confined to CPUs 1-2 and overloads them; BE (2 hogs) to CPUs
0-1; CPU 3 belongs to neither. Under schedbe, BE must get all of CPU 0 that
LC leaves (the LC hogs cannot run there; only strays such as kernel threads
can: khugepaged once took 18% of it), never run on CPU 1 (LC is always
waiting for it), never on CPU 3 (outside its cpuset), and must not be parked:
it makes progress on CPU 0. Measured per CPU by the tracer, and by cgroup
cpu.stat.

Inversion on CPU 0 is not asserted: other LC tasks allowed everywhere (the
daemon, kworkers) wake now and then, and while the idle CPU 3 is woken for
them they wait, which the tracer counts against CPU 0 running BE; under TCG
waking a vCPU takes ~0.2-2 ms (docs/testing.md). It is logged.
"""

import time

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.vm

LC_CG = f"{tl.TEST_CG}/cs-lc"
BE_CG = f"{tl.TEST_CG}/cs-be"
WINDOW = 6
BE_MIN_SHARE = 0.85     # of what LC and RT leave of CPU 0, the one CPU only BE may use (tracer window)
LC_MIN_SHARE = 0.92     # of each of CPUs 1-2
SHARED_BE_MAX = 0.01    # BE's share of CPU 1 (LC is always queued for it)


def cpuset_cgroup(rel, cpus):
    parts = rel.split("/")
    for i in range(len(parts)):
        ctl = tl.cg_path("/".join(parts[:i])) / "cgroup.subtree_control"
        if "cpuset" not in ctl.read_text().split():
            ctl.write_text("+cpuset\n")
        tl.cg_create("/".join(parts[:i + 1]))
    tl.cg_write(rel, "cpuset.cpus", cpus)
    return rel


def test_overlapping_cpusets():
    if tl.NR_CPUS < 3:
        pytest.skip("needs 3 CPUs")
    lc = cpuset_cgroup(LC_CG, "1-2")
    be = cpuset_cgroup(BE_CG, "0-1")
    procs = []
    with tl.Schedbe("--be-cgroup", BE_CG, name="cpuset") as sched:
        try:
            # spawn() widens affinity to every CPU; the cgroup's cpuset still bounds it.
            procs += [tl.spawn(tl.BUSY_LOOP, cgroup=be) for _ in range(2)]
            procs += [tl.spawn(tl.BUSY_LOOP, cgroup=lc) for _ in range(3)]
            time.sleep(2)
            be0, lc0, t0 = tl.cg_usage_usec(be), tl.cg_usage_usec(lc), time.monotonic()
            rep = tl.run_trace(WINDOW, "cpuset", be_cgroups=[BE_CG], per_task=True)
            dt = time.monotonic() - t0
            be_cpus = (tl.cg_usage_usec(be) - be0) / 1e6 / dt
            lc_cpus = (tl.cg_usage_usec(lc) - lc0) / 1e6 / dt
            frozen = tl.cg_frozen(be)
            sched.check_running()
        finally:
            for p in procs:
                tl.kill_proc(p)
    tl.log(f"cpuset: BE {be_cpus:.2f} CPUs (cpuset 0-1), LC {lc_cpus:.2f} CPUs (cpuset 1-2), "
           f"BE parked: {frozen}; {tl.trace_summary(rep)}")
    hogs = {p.pid for p in procs}
    waiters = sorted((t for t in rep.get("tasks", []) if t["tier"] == "lc" and t["pid"] not in hogs),
                     key=lambda t: -t["wait_ns"])[:5]
    tl.log("cpuset: top LC waiters besides the hogs: " + ", ".join(
        f"{t['comm']}/{t['pid']} wait {t['wait_ns'] / 1e6:.1f} ms run {t['run_ns'] / 1e6:.1f} ms" for t in waiters))
    cpu = {c["cpu"]: c for c in rep["per_cpu"]}
    for c in (0, 1, 2, 3):
        tl.log(f"cpuset: CPU {c}: BE {cpu[c]['be_ns'] / cpu[c]['cpu_ns']:.4f}, "
               f"LC {cpu[c]['lc_ns'] / cpu[c]['cpu_ns']:.4f}, "
               f"inversion {cpu[c]['inversion_ns'] / cpu[c]['cpu_ns']:.4f} of its time")
    # Shares from the tracer's window: the cgroup figures above also cover the
    # tracer's own start-up (a SCHED_FIFO BPF load), which may take CPU 0 for a while.
    assert not frozen, "BE was parked although CPU 0 is free for it"
    left0 = cpu[0]["cpu_ns"] - cpu[0]["lc_ns"] - cpu[0]["other_ns"]
    assert cpu[0]["be_ns"] >= BE_MIN_SHARE * left0, f"BE got too little of what LC left of CPU 0: {cpu[0]}"
    for c in (1, 2):
        assert cpu[c]["lc_ns"] >= LC_MIN_SHARE * cpu[c]["cpu_ns"], f"LC got too little of CPU {c}: {cpu[c]}"
    assert cpu[1]["be_ns"] <= SHARED_BE_MAX * cpu[1]["cpu_ns"], f"BE ran on CPU 1 next to waiting LC: {cpu[1]}"
    assert cpu[1]["inversion_ns"] <= SHARED_BE_MAX * cpu[1]["cpu_ns"], f"inversion on CPU 1: {cpu[1]}"
    assert cpu[3]["be_ns"] == 0, f"BE ran on CPU 3, outside its cpuset: {cpu[3]}"
