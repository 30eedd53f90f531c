"""Parking: BE cgroups starved by LC overload are frozen (cgroup v2 freezer)
and thawed when LC leaves room; nothing stays frozen when schedbe dies.

Everything is observed from the kernel's side: cgroup.events ("frozen"),
cgroup cpu.stat usage, /proc schedstat, and sched_ext's state, never from
schedbe's own counters.
"""

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.vm

LC_CG = f"{tl.TEST_CG}/park-lc"
BE_CG = f"{tl.TEST_CG}/park-be"
PROGS = Path(__file__).resolve().parent / "progs"
PY = "/usr/bin/python3"

PARK_AFTER_MS = 1000
UNPARK_AFTER_MS = 500
PARK_ARGS = ["--park-after-ms", PARK_AFTER_MS, "--unpark-after-ms", UNPARK_AFTER_MS]
# Time to notice a starved task (BPF housekeeping every 50 ms, userspace every
# 100 ms) and for its tasks to reach the freezer trap, on top of park_after.
PARK_SLACK_S = 3.0
# The guardian must thaw within this after the daemon is SIGKILLed (issue 4).
GUARDIAN_MAX_S = 5.0


@contextlib.contextmanager
def be_and_lc_cgroups():
    lc = tl.cg_create(LC_CG)
    be = tl.cg_create(BE_CG, cpu_idle=1)
    try:
        yield lc, be
    finally:
        # The BE cgroup may be frozen: cgroup.kill works on frozen tasks.
        tl.cg_remove_tree(BE_CG)
        tl.cg_remove_tree(LC_CG)


def lc_hogs(lc, cpus=None):
    cpus = list(range(tl.NR_CPUS)) if cpus is None else cpus
    return [tl.spawn(tl.BUSY_LOOP, cgroup=lc, cpus={c}) for c in cpus]


def guardians():
    """PIDs of running `schedbe guard` processes (the parking guardian)."""
    found = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError):
            continue
        if len(argv) > 1 and argv[1] == b"guard":
            found.append(int(d))
    return found


def park_under_overload(sched, lc, be):
    """BE hogs run, then LC hogs take every CPU: wait until BE is parked.
    Returns (LC procs, seconds from overload start to frozen)."""
    assert tl.usage_grows(be) > 100_000, "BE did not run before the overload"
    hogs = lc_hogs(lc)
    t = tl.wait_frozen(be, True, PARK_AFTER_MS / 1000 + PARK_SLACK_S)
    sched.check_running()
    return hogs, t


def test_overload_parks_then_resumes():
    """LC overload: BE is parked (no progress, LC gets every CPU, no stall,
    state file lists it); after LC stops, BE is thawed and runs again
    (tl.park_cycle, which the other policies' parking tests share)."""
    with be_and_lc_cgroups() as (lc, be), tl.Schedbe(*PARK_ARGS, "--stats", 1, name="park-overload") as sched:
        def lc_gets_every_cpu():
            lc_cpus = tl.usage_grows(lc, 5.0) / 1e6 / 5.0
            tl.log(f"park: LC {lc_cpus:.2f} of {tl.NR_CPUS} CPUs while BE was parked")
            assert lc_cpus > 0.9 * tl.NR_CPUS, f"LC got only {lc_cpus:.2f} CPUs while BE was parked"

        bes = tl.park_cycle(sched, be, lambda: lc_hogs(lc), lc_gets_every_cpu, PARK_AFTER_MS, UNPARK_AFTER_MS,
                            PARK_SLACK_S, "park")
        for p in bes:
            tl.kill_proc(p)


def test_parked_job_resumes_over_tcp():
    """A BE server parked for 30 s in the middle of a request, with TCP
    keepalive probing every second after 2 s idle (dead after 3 misses),
    finishes and answers correctly on the same connection."""
    parked_s = 30
    # Size the job at ~2 s of CPU here (the test process runs at full speed).
    t0, n0 = time.thread_time(), 20000
    h = b"schedbe"
    for _ in range(n0):
        h = hashlib.sha256(h).digest()
    n = int(n0 * 2.0 / max(time.thread_time() - t0, 1e-3))
    h = b"schedbe"
    for _ in range(n):
        h = hashlib.sha256(h).digest()
    expect = h.hex()

    with be_and_lc_cgroups() as (lc, be), tl.Schedbe(*PARK_ARGS, name="park-tcp") as sched:
        srv = tl.spawn([PY, str(PROGS / "sha_server.py")], cgroup=be, stdout=subprocess.PIPE)
        port = int(srv.stdout.readline())
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 2)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
        s.sendall(f"{n}\n".encode())
        time.sleep(0.3)  # the job is running
        hogs = lc_hogs(lc)
        t_park = tl.wait_frozen(be, True, PARK_AFTER_MS / 1000 + PARK_SLACK_S)
        t_parked = time.monotonic()
        while time.monotonic() - t_parked < parked_s:
            assert tl.cg_frozen(be), "the BE server was thawed while LC still overloaded every CPU"
            sched.check_running()
            time.sleep(1)
        for p in hogs:
            tl.kill_proc(p)
        s.settimeout(120)
        reply = s.makefile().readline().strip()
        total = time.monotonic() - t_parked
        tl.log(f"park-tcp: job of {n} SHA-256 steps parked {t_park:.2f}s after overload began, "
               f"stayed parked >= {parked_s}s, answered {total:.1f}s after parking, correct={reply == expect}")
        assert reply == expect, f"wrong or missing answer {reply!r}"
        s.close()
        srv.wait(10)


def test_sigkill_daemon_guardian_thaws():
    """SIGKILL of `schedbe run` while BE is parked: the kernel falls back to
    EEVDF and the guardian thaws BE within 5 s; BE runs again."""
    with be_and_lc_cgroups() as (lc, be):
        sched = tl.Schedbe(*PARK_ARGS, name="park-sigkill").start()
        try:
            bes = [tl.spawn(tl.BUSY_LOOP, cgroup=be) for _ in range(tl.NR_CPUS)]
            hogs, _ = park_under_overload(sched, lc, be)
            t0 = time.monotonic()
            os.kill(sched.proc.pid, signal.SIGKILL)  # the daemon only, not its guardian
            t_off = []      # when sched_ext was first seen disabled, for the log

            def thawed():
                if not t_off and tl.scx_state() == "disabled":
                    t_off.append(time.monotonic() - t0)
                return not tl.cg_frozen(be)
            try:
                tl.wait_for(thawed, GUARDIAN_MAX_S, what="the guardian to thaw BE")
            except TimeoutError:
                raise AssertionError(
                    f"BE still frozen {GUARDIAN_MAX_S}s after SIGKILL of the daemon: sched_ext {tl.scx_state()} "
                    f"(seen disabled after {t_off[0] if t_off else '-'} s), guardian processes {guardians()}; "
                    f"daemon's log:\n{sched.log_tail()}") from None
            t_thaw = time.monotonic() - t0
            tl.wait_for(lambda: tl.scx_state() == "disabled", 30, what="sched_ext disabled")
            # Next to one LC hog per CPU, EEVDF gives a cpu.idle group (weight 3
            # against 1024) a few ms per second, often none in a given second:
            # logged, not asserted. Whether BE is really free to run is asked
            # once the LC hogs are gone.
            beside = tl.usage_grows(be, 1.0)
            for p in hogs:
                tl.kill_proc(p)
            ran = tl.usage_grows(be, 1.0)
            tl.log(f"park-sigkill: BE thawed {t_thaw:.2f}s after SIGKILL of the daemon (sched_ext seen disabled "
                   f"after {t_off[0] if t_off else '-'} s); "
                   f"then used {beside} us in 1 s under EEVDF beside the LC hogs and {ran} us "
                   f"in 1 s after them; state file {tl.park_state_cgroups()}")
            assert all(p.poll() is None for p in bes), "a BE task died with the daemon"
            # One busy loop per CPU, alone: well over 0.1 CPU-s in 1 s unless frozen.
            assert ran > 100_000, f"BE used only {ran} us in 1 s after the daemon died"
            assert tl.park_state_cgroups() == []
            for p in bes:
                tl.kill_proc(p)
        finally:
            sched.kill()


def test_leftovers_thawed_by_thaw_and_next_start():
    """Daemon and guardian both SIGKILLed (as if the machine's supervisor killed
    the whole group): BE stays frozen and the state file lists it; `schedbe
    thaw` thaws it. Again, and the next `schedbe run` thaws it at start."""
    with be_and_lc_cgroups() as (lc, be):
        for how in ("thaw", "restart"):
            sched = tl.Schedbe(*PARK_ARGS, name=f"park-leftover-{how}").start()
            bes = [tl.spawn(tl.BUSY_LOOP, cgroup=be) for _ in range(tl.NR_CPUS)]
            hogs, _ = park_under_overload(sched, lc, be)
            os.killpg(sched.proc.pid, signal.SIGKILL)  # daemon and guardian
            sched.proc.wait(10)
            sched.kill()
            tl.wait_for(lambda: tl.scx_state() == "disabled", 30, what="sched_ext disabled")
            for p in hogs:
                tl.kill_proc(p)
            time.sleep(1.0)
            assert tl.cg_frozen(be), "BE was thawed although nothing was left to thaw it"
            assert tl.park_state_cgroups() == [be]
            if how == "thaw":
                r = subprocess.run([str(tl.SCHEDBE), "thaw"], capture_output=True, text=True, timeout=30)
                assert r.returncode == 0, r.stderr
                assert be in r.stdout, r.stdout
                assert not tl.cg_frozen(be)
            else:
                with tl.Schedbe(*PARK_ARGS, name="park-restarted") as s2:
                    tl.wait_for(lambda: not tl.cg_frozen(be), 5, what="the restarted schedbe to thaw BE")
                    assert "left frozen" in s2.log_tail(50)
            assert tl.park_state_cgroups() == []
            assert tl.usage_grows(be) > 0
            for p in bes:
                tl.kill_proc(p)


def test_lock_held_by_parked_be_is_bounded():
    """A BE process is parked while holding a futex-based mutex its LC peer
    needs; LC hogs keep every other CPU busy. The LC peer's wait is bounded by
    unparking (its own CPU goes idle while it waits); report the bound."""
    rounds, hog_s, crit_s = 3, 3.0, 0.2
    with be_and_lc_cgroups() as (lc, be):
        with tl.Schedbe(*PARK_ARGS, name="park-lock") as sched:
            hogs = lc_hogs(lc, cpus=range(1, tl.NR_CPUS))
            out = tl.results_dir() / "park-lock.jsonl"
            with open(out, "w") as f:
                pair = tl.spawn([PY, str(PROGS / "lock_pair.py"), str(tl.cg_path(be)), "0",
                                 str(rounds), str(hog_s), str(crit_s)], cgroup=lc, stdout=f)
                pair.wait(rounds * (hog_s + 30) + 30)
            sched.check_running()
            for p in hogs:
                tl.kill_proc(p)
        res = [json.loads(line) for line in out.read_text().splitlines()]
    assert pair.returncode == 0 and len(res) == rounds, res
    waits = [r["wait_s"] for r in res]
    parked = sum(r["be_frozen_at_wait"] for r in res)
    tl.log(f"park-lock: LC waits for a lock held by parked BE: {', '.join(f'{w:.3f}' for w in waits)} s "
           f"(max {max(waits):.3f} s; BE frozen at {parked}/{rounds} waits; unpark_after {UNPARK_AFTER_MS} ms, "
           f"critical section {crit_s} s CPU)")
    assert parked >= 1, "BE was never parked holding the lock: the test did not test anything"
    bound = UNPARK_AFTER_MS / 1000 + crit_s + PARK_SLACK_S
    assert max(waits) < bound, f"LC waited {max(waits):.2f}s for the lock (bound {bound:.2f}s)"
