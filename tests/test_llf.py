"""The least-loaded-first policy (`schedbe run llf`, docs/serverless.md)
in the VM.

Sandboxes are cgroups under schedbe-test/llf/ given with --sandbox. Shares
come from the kernel's cgroup cpu.stat, wakeup latencies from the tracer,
not from the scheduler's counters.
"""

import contextlib
import sys
import threading
import time

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.vm

BASE = f"{tl.TEST_CG}/llf"
CPU = tl.NR_CPUS - 1
DUTY = [sys.executable, str(tl.ROOT / "tests" / "progs" / "duty.py")]


def llf(name, *extra):
    return tl.Schedbe("--policy", "llf", "--sandbox", f"{BASE}/*", "--stats", "1", *extra, name=name)


def usage(names):
    return {n: tl.cg_usage_usec(f"{BASE}/{n}") for n in names}


@pytest.fixture
def procs():
    ps = []
    yield ps
    for p in ps:
        tl.kill_proc(p)
    tl.cg_remove_tree(BASE)


def make(names):
    tl.cg_create(BASE)
    for n in names:
        tl.cg_create(f"{BASE}/{n}")


def test_light_sandbox_first_heavy_ones_share(procs):
    """On one CPU: a light sandbox (1 ms of work every 10 ms) and two heavy
    ones (one and three CPU-bound threads). The light one's work is ordered
    first (its wakeups wait for no heavy slice: p99 under 5 ms, the emulated
    IPI's scale), and the heavy ones, ordered by their own decaying loads,
    share the rest about equally whatever their thread counts."""
    names = ["light", "heavy1", "heavy3"]
    make(names)
    with llf("llf-light") as sched:
        procs.append(tl.spawn(tl.BUSY_LOOP, cgroup=f"{BASE}/heavy1", cpus=[CPU]))
        procs += [tl.spawn(tl.BUSY_LOOP, cgroup=f"{BASE}/heavy3", cpus=[CPU]) for _ in range(3)]
        procs.append(tl.spawn(DUTY + ["10", "1"], cgroup=f"{BASE}/light", cpus=[CPU]))
        time.sleep(4)
        u0, t0 = usage(names), time.monotonic()
        rep = tl.run_trace(6, "llf-light-trace", cgroups=[f"{BASE}/{n}" for n in names], cpu=0)
        dt = time.monotonic() - t0
        u1 = usage(names)
        sched.check_running()
    share = {n: (u1[n] - u0[n]) / 1e6 / dt for n in names}
    lat = tl.cg_report(rep, f"{BASE}/light")["wakeup_latency"]
    tl.log(f"shares {share}; light wakeup latency {lat}")
    assert lat["n"] >= 300, lat
    assert lat["p99_us"] < 5000, f"the light sandbox waited for heavy slices: {lat}"
    assert share["light"] >= 0.08, share
    h1, h3 = share["heavy1"], share["heavy3"]
    assert min(h1, h3) / max(h1, h3) >= 0.7, f"heavy sandboxes should share by load, not by threads: {share}"


def test_overload_no_stall_and_be_below(procs):
    """30 s with three CPU-bound sandboxes (two threads per CPU each), a
    host hog and a BE hog: no watchdog stall, every sandbox and the host
    progress, BE gets only guard slices."""
    names = ["a", "b", "c"]
    make(names)
    tl.cg_create(f"{BASE}-be")
    tl.cg_write(f"{BASE}-be", "cpu.idle", "1")
    try:
        # the guard is what keeps BE going here (parking: test_be_parked_...)
        with llf("llf-overload", "--no-park") as sched:
            # BE first: its exec, once every CPU is busy, runs on guard slices only
            be = tl.spawn(tl.BUSY_LOOP, cgroup=f"{BASE}-be")
            procs.append(be)
            for n in names:
                procs += [tl.spawn(tl.BUSY_LOOP, cgroup=f"{BASE}/{n}") for _ in range(2 * tl.NR_CPUS)]
            host = tl.spawn(tl.BUSY_LOOP)
            procs.append(host)
            time.sleep(2)
            u0 = usage(names)
            be0 = tl.cpu_ns(be.pid)
            t_end = time.monotonic() + 30
            while time.monotonic() < t_end:
                time.sleep(5)
                sched.check_running()
            u1 = usage(names)
            host_cpu, be_cpu = tl.cpu_ns(host.pid) / 1e9, (tl.cpu_ns(be.pid) - be0) / 1e9
        share = {n: (u1[n] - u0[n]) / 1e6 / 30 for n in names}
        tl.log(f"sandbox CPUs {share}, host {host_cpu:.2f} CPU-s, BE {be_cpu:.3f} CPU-s in the 30 s")
        assert tl.scx_state() == "disabled"
        assert min(share.values()) / max(share.values()) >= 0.7, f"equal demands, equal shares: {share}"
        assert host_cpu > 1.0
        assert 0.0 < be_cpu < 1.0, "BE runs on guard slices only while LC saturates the CPUs"
    finally:
        for p in procs:
            tl.kill_proc(p)
        procs.clear()
        tl.cg_remove_tree(f"{BASE}-be")


def test_daemon_not_queued_behind_the_sandboxes(procs):
    """The order is only as fresh as the loads the daemon publishes, so the
    daemon goes first. An overload that starts at once while every sandbox
    still has its start key 0 (three sandboxes' CPU-bound threads, two per
    CPU each, frozen before schedbe starts and thawed together inside the
    trace's window) must not queue it behind all of them: ordered by its
    own small load, it would wait for the floor (over 200 ms) while the
    keys it should publish stayed 0. Its wakeups, from the tracer (the
    daemon moved to a cgroup of its own), wait less than half the floor's
    200 ms."""
    names = ["a", "b", "c"]
    make(names)
    daemon_cg = f"{BASE}-daemon"
    tl.cg_create(daemon_cg)
    try:
        for n in names:
            procs.extend(tl.spawn(tl.BUSY_LOOP, cgroup=f"{BASE}/{n}") for _ in range(2 * tl.NR_CPUS))
            tl.cg_write(f"{BASE}/{n}", "cgroup.freeze", "1")
        for n in names:
            tl.wait_frozen(f"{BASE}/{n}", True, 30)
        with llf("llf-daemon") as sched:
            tl.cg_write(daemon_cg, "cgroup.procs", str(sched.proc.pid))
            time.sleep(1)

            def thaw():
                time.sleep(3)  # the trace's window is open by then
                for n in names:
                    tl.cg_write(f"{BASE}/{n}", "cgroup.freeze", "0")

            t = threading.Thread(target=thaw)
            t.start()
            try:
                rep = tl.run_trace(10, "llf-daemon-trace", cgroups=[daemon_cg], cpu=0)
            finally:
                t.join()
            sched.check_running()
    finally:
        for n in names:
            with contextlib.suppress(OSError):
                tl.cg_write(f"{BASE}/{n}", "cgroup.freeze", "0")
        for p in procs:
            tl.kill_proc(p)
        procs.clear()
        tl.cg_remove_tree(daemon_cg)
    lat = tl.cg_report(rep, daemon_cg)["wakeup_latency"]
    tl.log(f"llf daemon wakeup latency under an overload from key 0: {lat}")
    assert lat["n"] >= 20, f"the daemon (waking every 200 ms) woke too rarely to judge: {lat}"
    assert lat["max_us"] < 100_000, f"the daemon waited behind the sandboxes it orders: {lat}"


def test_be_parked_under_sandbox_overload_then_resumed(procs):
    """Parking under LLF, as under the other policies (tl.park_cycle):
    CPU-bound sandboxes on every CPU starve BE below them; its cgroup is
    parked, the sandboxes keep the CPUs meanwhile, and once the load stops
    BE is thawed and runs."""
    names = ["a", "b"]
    make(names)
    be = f"{BASE}-be"
    tl.cg_create(be)
    tl.cg_write(be, "cpu.idle", "1")

    def load():
        ps = [tl.spawn(tl.BUSY_LOOP, cgroup=f"{BASE}/{n}") for n in names for _ in range(tl.NR_CPUS)]
        procs.extend(ps)
        return ps

    def sandboxes_keep_the_cpus():
        u0, t0 = usage(names), time.monotonic()
        time.sleep(2.0)
        u1, dt = usage(names), time.monotonic() - t0
        got = sum(u1[n] - u0[n] for n in names) / 1e6 / dt
        tl.log(f"llf park: the sandboxes got {got:.2f} of {tl.NR_CPUS} CPUs while BE was parked")
        assert got > 0.9 * tl.NR_CPUS - 0.5, f"the sandboxes got {got:.2f} CPUs while BE was parked"

    try:
        with llf("llf-park", "--park-after-ms", 1000, "--unpark-after-ms", 500) as sched:
            procs += tl.park_cycle(sched, be, load, sandboxes_keep_the_cpus, what="llf park")
        assert not tl.cg_frozen(be)
    finally:
        for p in procs:
            tl.kill_proc(p)
        procs.clear()
        tl.cg_remove_tree(be)

