"""stress-ng with the flags of sched_ext's CI for 60 s under schedbe, with two BE
hogs starving behind it: no stall, no error exit, the scheduler still loaded.

scx CI runs `stress-ng -c N -f N --affinity 1 --affinity-delay 1 --affinity-pin
--aggressive`; Debian 12's stress-ng 0.15.06 has all of these (-f is --fork).
The BE hogs get no CPU while the LC hogs run except starvation-guard slices, so
this also checks that the guard keeps starving tasks from tripping the sched_ext
watchdog (30 s) over a run twice as long.
"""

import subprocess
import time

import pytest

import schedbe_testlib as tl

DURATION = 60

pytestmark = pytest.mark.vm


def test_stress_ng_scx_ci_flags():
    n = str(tl.NR_CPUS)
    argv = ["stress-ng", "-c", n, "--fork", n, "--affinity", "1", "--affinity-delay", "1",
            "--affinity-pin", "--aggressive", "-t", str(DURATION), "--metrics-brief"]
    be = tl.cg_create(f"{tl.TEST_CG}/be", cpu_idle=1)
    with tl.Schedbe(name="stress") as s:
        hogs = [tl.spawn(tl.BUSY_LOOP, cgroup=be), tl.spawn(tl.BUSY_LOOP, policy=tl.os.SCHED_IDLE)]
        try:
            log = open(tl.results_dir() / "stress-ng.log", "w")
            t0 = time.monotonic()
            be0 = [tl.cpu_ns(h.pid) for h in hogs]
            p = tl.spawn(argv, stdout=log, stderr=subprocess.STDOUT)
            while p.poll() is None:
                s.check_running()
                if time.monotonic() - t0 > DURATION + 120:
                    tl.kill_proc(p)
                    pytest.fail("stress-ng did not finish")
                time.sleep(1)
            took = time.monotonic() - t0
            log.close()
            s.check_running()
            be_ms = [(tl.cpu_ns(h.pid) - b) / 1e6 for h, b in zip(hogs, be0)]
            tl.log(f"stress-ng exit {p.returncode} after {took:.0f}s; BE hogs ran {be_ms} ms")
            assert p.returncode == 0, (tl.results_dir() / "stress-ng.log").read_text()[-2000:]
            assert took >= DURATION
            for h, ms in zip(hogs, be_ms):
                assert tl.proc_state(h.pid) not in (None, "Z"), "a BE hog vanished"
                assert ms > 0, "a BE hog never ran in 60 s: the starvation guard did not fire"
        finally:
            for h in hogs:
                tl.kill_proc(h)
