"""scripts/vm.sh on the host. --prompt-timers: bad combinations are refused
before anything starts, and in a real boot the host puts QEMU's main loop (the
thread that raises the guest's timer interrupts under TCG) at SCHED_FIFO while
the vCPU threads stay SCHED_OTHER, and the guest is told so only then. A boot
that hangs leaves no QEMU behind (here vng takes QEMU down on TERM, and the
old script passed too; vm.sh kills a QEMU that outlives vng, which it found
while it was still vng's descendant).
"""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VM = ROOT / "scripts" / "vm.sh"

pytestmark = pytest.mark.host


def _vm(args, env_extra=None, user=None, timeout=60):
    env = dict(os.environ, SCHEDBE_VM_NATIVE="0", **(env_extra or {}))
    cmd = [str(VM), *args]
    if user:
        cmd = ["runuser", "-u", user, "--", *cmd]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("case", ["kvm", "icount"])
def test_prompt_timers_refuses_what_it_cannot_mean(case):
    if case == "kvm":
        r = _vm(["--prompt-timers", "--", "true"], {"SCHEDBE_VM_KVM": "1"})
        assert "not KVM" in r.stderr, r.stderr
    else:
        r = _vm(["--prompt-timers", "--icount", "--", "true"])
        assert "do not mix" in r.stderr, r.stderr
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "booting" not in r.stderr


def test_prompt_timers_needs_root():
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("needs root (to run vm.sh as another user) and runuser")
    if subprocess.run(["runuser", "-u", "nobody", "--", "test", "-x", str(VM)]).returncode != 0:
        pytest.skip(f"user nobody cannot run {VM} from this checkout")
    r = _vm(["--prompt-timers", "--", "true"], user="nobody")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "needs root" in r.stderr, r.stderr


def _threads(pid):
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (t / "comm").read_text().strip()
            policy = os.sched_getscheduler(int(t.name))
        except (OSError, ProcessLookupError):
            continue
        out[int(t.name)] = (comm, policy)
    return out


def _skip_unless_bootable():
    """Skip a test that boots a guest where this host cannot."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    if not shutil.which("qemu-system-x86_64") or not Path("/opt/schedbe-venv/bin/vng").exists():
        pytest.skip("no QEMU or virtme-ng: make setup")
    if not (ROOT / ".cache" / "kernel" / "current" / "vmlinuz").exists():
        pytest.skip("no cached sched_ext kernel: make setup")


def _guest_qemus():
    """Pids of the guests' QEMU processes (vng names each virtme-ng)."""
    r = subprocess.run(["pgrep", "-f", "qemu-system-x86_64 -name virtme-ng"], capture_output=True, text=True)
    return set(map(int, r.stdout.split()))


def test_prompt_timers_in_a_boot():
    """Boot a 2-vCPU guest that sleeps; look at QEMU's threads from the host."""
    _skip_unless_bootable()
    guest = 'test -e "$SCHEDBE_VM_RUN/prompt-timers" && echo guest-sees-prompt-timers; sleep 25'
    p = subprocess.Popen([str(VM), "--prompt-timers", "--cpus", "2", "--mem", "1G", "--timeout", "240", "--", guest],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, SCHEDBE_VM_NATIVE="0"))
    seen = None
    try:
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline and p.poll() is None and seen is None:
            time.sleep(1)
            for pid in _guest_qemus():
                th = _threads(pid)
                if os.sched_getscheduler(pid) & ~os.SCHED_RESET_ON_FORK == os.SCHED_FIFO:
                    seen = (pid, th)
        out, err = p.communicate(timeout=240)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err[-2000:]
    assert "main loop SCHED_FIFO 1" in err, err[-2000:]
    assert seen, "no QEMU main thread at SCHED_FIFO while the guest ran"
    pid, th = seen
    vcpus = [tid for tid, (comm, _) in th.items() if comm.startswith("CPU ")]
    assert len(vcpus) == 2, th
    # the vCPU threads (created before the change) and every other thread stay ordinary
    assert all(pol == os.SCHED_OTHER for tid, (_, pol) in th.items() if tid != pid), th
    assert "guest-sees-prompt-timers" in out, out



def test_boot_hang_leaves_no_qemu():
    """A guest that never starts its command (QEMU started paused, -S) trips the boot
    watchdog: vm.sh exits 75 and no QEMU of it is left running."""
    _skip_unless_bootable()
    if _guest_qemus():
        pytest.skip("another guest runs on this host")
    env = dict(os.environ, SCHEDBE_VM_NATIVE="0", SCHEDBE_VM_QEMU_OPTS="-S", SCHEDBE_VM_BOOT_TIMEOUT="8")
    p = subprocess.Popen([str(VM), "--cpus", "1", "--mem", "512M", "--timeout", "120", "--", "true"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = set()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and p.poll() is None:
            seen |= _guest_qemus()
            time.sleep(0.5)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert seen, "no QEMU ever ran: the hang path was not exercised"
    assert p.returncode == 75, (p.returncode, err[-2000:])
    assert "boot hang" in err, err[-2000:]
    time.sleep(1)
    left = _guest_qemus() & seen
    assert not left, f"QEMU {left} outlived vm.sh after a boot hang: {err[-2000:]}"
