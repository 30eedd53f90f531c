"""CPU hotplug under schedbe: a CPU goes offline and comes back while LC and BE
load runs; the scheduler stays loaded (ops.cpu_online/offline are implemented, so
the kernel does not eject it), no task is lost, and BE still runs afterwards."""

import time
from pathlib import Path

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.vm

CPU = tl.NR_CPUS - 1
ONLINE = Path(f"/sys/devices/system/cpu/cpu{CPU}/online")


def set_online(v):
    ONLINE.write_text(f"{v}\n")


def test_hotplug_keeps_scheduler_and_tasks():
    if tl.NR_CPUS < 2 or not ONLINE.exists():
        pytest.fail(f"cpu{CPU} cannot be hot-unplugged in this guest")
    be = tl.cg_create(f"{tl.TEST_CG}/hp-be", cpu_idle=1)
    lc = tl.cg_create(f"{tl.TEST_CG}/hp-lc")
    procs = []
    try:
        with tl.Schedbe(name="hotplug") as s:
            procs += [tl.spawn(tl.BUSY_LOOP, cgroup=be) for _ in range(tl.NR_CPUS)]
            procs += [tl.spawn(tl.BUSY_LOOP, cgroup=lc) for _ in range(tl.NR_CPUS // 2)]
            time.sleep(1)
            for cycle in range(3):
                set_online(0)
                time.sleep(1)
                s.check_running()
                set_online(1)
                time.sleep(1)
                s.check_running()
                tl.log(f"hotplug cycle {cycle + 1}: cpu{CPU} off and on, schedbe still loaded")
            alive = [p for p in procs if p.poll() is None]
            assert len(alive) == len(procs), f"{len(procs) - len(alive)} workload tasks died"
            # BE still gets CPU once the CPU is back (LC leaves half the machine idle).
            be_t0 = tl.cg_usage_usec(be)
            time.sleep(2)
            got = (tl.cg_usage_usec(be) - be_t0) / 2e6
            tl.log(f"after hotplug BE used {got:.2f} CPUs")
            assert got > 0.5, f"BE used only {got:.2f} CPUs after hotplug with half the machine free"
    finally:
        if ONLINE.exists() and ONLINE.read_text().strip() != "1":
            set_online(1)
        for p in procs:
            tl.kill_proc(p)
        tl.cg_remove_tree(tl.TEST_CG)
