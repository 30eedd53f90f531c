"""Classification, checked by behaviour: a CPU hog (LC) is pinned to one CPU and
the task under test to the same CPU. Under schedbe an LC task gets about half the
CPU, a BE task nothing beyond starvation-guard slices (2 ms every 5 s by
default), and the hog all of it. CPU time comes from /proc/PID/schedstat.
"""

import contextlib
import os
import time

import pytest

import schedbe_testlib as tl

CPU = 1
WARM = 1.0      # lets the scheduler pick up new cgroups (path patterns are rescanned)
WINDOW = 2.0
BE_MAX = 0.05   # share of the CPU a BE task may get (guard slices are ~0.1%)
LC_MIN, LC_MAX = 0.30, 0.70
HOG_MIN_VS_BE = 0.85

pytestmark = pytest.mark.vm

# kubelet's cgroup layouts (systemd and cgroupfs drivers), pod and container level
KUBE_SYSTEMD_BE = ("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0a1b.slice/"
                   "cri-containerd-0a1b.scope")
KUBE_CGROUPFS_BE = "kubepods/besteffort/pod0a1b/c0a1b"
KUBE_SYSTEMD_BURSTABLE = ("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2c3d.slice/"
                          "cri-containerd-2c3d.scope")
KUBE_CGROUPFS_GUARANTEED = "kubepods/pod4e5f/c4e5f"


class KubeCgroups:
    """Creates kubelet-style cgroups at the cgroup root and removes what it made."""

    def __init__(self, *paths):
        self.paths = paths
        self.made = []

    def __enter__(self):
        for p in self.paths:
            top = p.split("/")[0]
            if not tl.cg_path(top).exists():
                self.made.append(top)
            tl.cg_create(p)
        return self

    def __exit__(self, *a):
        for top in self.made:
            tl.cg_remove_tree(top)
        return False


def subject(kind):
    """Start the task under test on CPU; returns (Popen, pid to measure)."""
    busy = tl.BUSY_LOOP
    if kind == "lc-plain":
        p = tl.spawn(busy, cgroup=tl.cg_create(f"{tl.TEST_CG}/plain"), cpus={CPU})
    elif kind == "lc-nested":
        p = tl.spawn(busy, cgroup=tl.cg_create(f"{tl.TEST_CG}/a/b/c", cpu_weight=100), cpus={CPU})
    elif kind == "lc-kube-burstable":
        p = tl.spawn(busy, cgroup=KUBE_SYSTEMD_BURSTABLE, cpus={CPU})
    elif kind == "lc-kube-guaranteed":
        p = tl.spawn(busy, cgroup=KUBE_CGROUPFS_GUARANTEED, cpus={CPU})
    elif kind == "be-sched-idle":
        p = tl.spawn(busy, cgroup=tl.cg_create(f"{tl.TEST_CG}/plain"), cpus={CPU},
                     policy=os.SCHED_IDLE)
    elif kind == "be-cpu-idle":
        p = tl.spawn(busy, cgroup=tl.cg_create(f"{tl.TEST_CG}/idle", cpu_idle=1), cpus={CPU})
    elif kind == "be-cpu-idle-descendant":
        tl.cg_create(f"{tl.TEST_CG}/idle2", cpu_idle=1)
        p = tl.spawn(busy, cgroup=tl.cg_create(f"{tl.TEST_CG}/idle2/child"), cpus={CPU})
    elif kind == "be-kube-systemd":
        p = tl.spawn(busy, cgroup=KUBE_SYSTEMD_BE, cpus={CPU})
    elif kind == "be-kube-cgroupfs":
        p = tl.spawn(busy, cgroup=KUBE_CGROUPFS_BE, cpus={CPU})
    elif kind == "be-exec":
        p = tl.spawn([str(tl.SCHEDBE), "exec", "--be", "--", *busy])
        pid = tl.find_proc(p.pid, "sh")
        os.sched_setaffinity(pid, {CPU})
        return p, pid
    else:
        raise ValueError(kind)
    return p, p.pid


CASES = ["lc-plain", "lc-nested", "lc-kube-burstable", "lc-kube-guaranteed",
         "be-sched-idle", "be-cpu-idle", "be-cpu-idle-descendant", "be-kube-systemd",
         "be-kube-cgroupfs", "be-exec"]


def test_classification():
    hog_cg = tl.cg_create(f"{tl.TEST_CG}/hog")
    rows, bad = [], []
    with tl.Schedbe(name="classification") as s, \
            KubeCgroups(KUBE_SYSTEMD_BE, KUBE_CGROUPFS_BE, KUBE_SYSTEMD_BURSTABLE,
                        KUBE_CGROUPFS_GUARANTEED):
        hog = tl.spawn(tl.BUSY_LOOP, cgroup=hog_cg, cpus={CPU})
        try:
            time.sleep(WARM)
            for kind in CASES:
                p, pid = subject(kind)
                try:
                    time.sleep(WARM)
                    a, h = tl.cpu_ns(pid), tl.cpu_ns(hog.pid)
                    t = time.monotonic()
                    time.sleep(WINDOW)
                    dt = (time.monotonic() - t) * 1e9
                    sh, hs = (tl.cpu_ns(pid) - a) / dt, (tl.cpu_ns(hog.pid) - h) / dt
                finally:
                    with contextlib.suppress(OSError):
                        os.sched_setaffinity(pid, range(tl.NR_CPUS))
                    tl.kill_proc(p)
                ok = (sh <= BE_MAX and hs >= HOG_MIN_VS_BE) if kind.startswith("be-") \
                    else (LC_MIN <= sh <= LC_MAX)
                rows.append(f"{kind:24s} task {sh:6.3f}  LC hog {hs:6.3f}  {'ok' if ok else 'WRONG'}")
                tl.log(rows[-1])
                if not ok:
                    bad.append(kind)
                s.check_running()
        finally:
            tl.kill_proc(hog)
    assert not bad, ("share of CPU %d next to an LC hog (BE: <= %.2f, LC: %.2f-%.2f):\n"
                     % (CPU, BE_MAX, LC_MIN, LC_MAX)) + "\n".join(rows)


# Tier changes at run time: the subject starts LC next to the hog; after each change
# its CPU time in the window 100-400 ms later must match the new tier.
MOVE_WINDOW = (0.1, 0.4)
MOVE_BE_MAX = 0.10    # of the 300 ms window
MOVE_LC_MIN = 0.25


def test_tier_follows_changes():
    hog_cg = tl.cg_create(f"{tl.TEST_CG}/hog")
    lc = tl.cg_create(f"{tl.TEST_CG}/lc")
    idle = tl.cg_create(f"{tl.TEST_CG}/idle", cpu_idle=1)
    rows, bad = [], []
    with tl.Schedbe(name="tier-changes") as s, KubeCgroups(KUBE_SYSTEMD_BE, KUBE_CGROUPFS_BE):
        hog = tl.spawn(tl.BUSY_LOOP, cgroup=hog_cg, cpus={CPU})
        sub = tl.spawn(tl.BUSY_LOOP, cgroup=lc, cpus={CPU})
        pid = sub.pid

        def setpol(pol):
            return lambda: os.sched_setscheduler(pid, pol, os.sched_param(0))

        steps = [
            ("start (LC cgroup)", None, "lc"),
            ("move to cpu.idle=1 cgroup", lambda: tl.cg_move(pid, idle), "be"),
            ("move back to LC cgroup", lambda: tl.cg_move(pid, lc), "lc"),
            ("move to kubelet BE (systemd)", lambda: tl.cg_move(pid, KUBE_SYSTEMD_BE), "be"),
            ("move back to LC cgroup", lambda: tl.cg_move(pid, lc), "lc"),
            ("move to kubelet BE (cgroupfs)", lambda: tl.cg_move(pid, KUBE_CGROUPFS_BE), "be"),
            ("move back to LC cgroup", lambda: tl.cg_move(pid, lc), "lc"),
            ("policy -> SCHED_IDLE", setpol(os.SCHED_IDLE), "be"),
            ("policy -> SCHED_OTHER", setpol(os.SCHED_OTHER), "lc"),
            ("cgroup cpu.idle=1 written", lambda: tl.cg_write(lc, "cpu.idle", 1), "be"),
            ("cgroup cpu.idle=0 written", lambda: tl.cg_write(lc, "cpu.idle", 0), "lc"),
        ]
        try:
            time.sleep(WARM)
            for what, act, tier in steps:
                t0 = time.monotonic()
                if act:
                    act()
                tl.sleep_until(t0 + MOVE_WINDOW[0])
                a, ta = tl.cpu_ns(pid), time.monotonic()
                tl.sleep_until(t0 + MOVE_WINDOW[1])
                got = (tl.cpu_ns(pid) - a) / ((time.monotonic() - ta) * 1e9)
                ok = got <= MOVE_BE_MAX if tier == "be" else got >= MOVE_LC_MIN
                rows.append(f"{what:32s} -> {tier}: share {got:6.3f} {'ok' if ok else 'WRONG'}")
                tl.log(rows[-1])
                if not ok:
                    bad.append(what)
                if not act:
                    time.sleep(0.2)
            s.check_running()
        finally:
            tl.kill_proc(sub)
            tl.kill_proc(hog)
    assert not bad, ("CPU share 100-400 ms after each change (BE <= %.2f, LC >= %.2f):\n"
                     % (MOVE_BE_MAX, MOVE_LC_MIN)) + "\n".join(rows)
