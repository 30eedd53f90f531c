"""The Kubernetes DaemonSet's command lines under sched_ext, as the kubelet runs them.

Parsed out of deploy/kubernetes/schedbe-daemonset.yaml (helpers in
tests/test_deploy.py): the initContainer's command (`schedbe thaw`), then the
main container's exact command line (`schedbe run --config ... --stats 10`),
with only the image's binary path replaced by the built one and the config path
by a copy of the ConfigMap's schedbe.toml. Each test waits until the pod's
readiness probe (its exact shell command) succeeds, then does what the kubelet
does when the pod is deleted: SIGTERM to the main process, SIGKILL after
terminationGracePeriodSeconds. Afterwards: exit status 0, sched_ext disabled,
the probe fails again, and no cgroup anywhere has cgroup.freeze = 1.

The second test does it while schedbe has a BestEffort pod's cgroup parked
(kubelet's cgroupfs-driver layout, classified BE by the default patterns the
ConfigMap keeps on), so SIGTERM has something to thaw.
"""

import json
import signal
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

import schedbe_testlib as tl
import test_deploy as dep

pytestmark = pytest.mark.vm

# How long the pod may take to become ready (load the BPF scheduler) in the guest.
READY_TIMEOUT_S = 30
# Kubelet cgroupfs-driver layout, under the test cgroup (cleaned up by conftest);
# "**/kubepods/besteffort" (default_be_cgroups) makes the BestEffort pod BE.
BE_POD_CG = f"{tl.TEST_CG}/kubepods/besteffort/pod-deploytest"
LC_POD_CG = f"{tl.TEST_CG}/kubepods/burstable/pod-deploytest-lc"
# Time to notice the starvation and reach the freezer, on top of park_after_ms
# plus the half again the cgroup must starve as a whole (see test_park.py).
PARK_SLACK_S = 5.0


def config():
    return tomllib.loads(dep.config_toml_text())


def state_file():
    return Path(config().get("state_file", "/run/schedbe/parked.json"))


def state_cgroups():
    try:
        return json.loads(state_file().read_text())["cgroups"]
    except FileNotFoundError:
        return []


class Pod:
    """One start of the DaemonSet's pod: initContainer, then the main container
    until it is ready; terminate() stops it the way the kubelet does."""

    def __init__(self, tmp_path, name):
        cfg = tmp_path / "schedbe.toml"
        cfg.write_text(dep.config_toml_text())
        self.init_argv = dep.host_argv(dep.init_container())
        self.argv = dep.host_argv(dep.main_container(), config=cfg)
        assert str(cfg) in self.argv, f"config path not substituted: {self.argv}"
        self.grace = dep.pod_spec()["terminationGracePeriodSeconds"]
        self.log_path = tl.results_dir() / f"{name}.log"
        self.proc = None
        self.logf = None

    def log_tail(self, n=30):
        return "\n".join(tl.read_shared(self.log_path).splitlines()[-n:])

    def start(self):
        assert tl.scx_state() == "disabled", f"a sched_ext scheduler is already loaded: {tl.scx_ops()!r}"
        r = subprocess.run(self.init_argv, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
        tl.log(f"initContainer: {' '.join(self.init_argv)} -> {r.returncode}: "
               f"{r.stdout.strip()!r} {r.stderr.strip()!r}")
        assert r.returncode == 0, f"initContainer `schedbe thaw` failed: {r}"

        tl.log(f"container: {' '.join(self.argv)}")
        self.logf = open(self.log_path, "w")
        self.proc = tl.spawn(self.argv, stdout=self.logf, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        last = {}

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"schedbe run exited with {self.proc.returncode} before the pod "
                                     f"became ready:\n{self.log_tail()}")
            r = dep.run_probe()
            last["probe"] = (r.returncode, (r.stdout + r.stderr).strip())
            return r.returncode == 0

        try:
            tl.wait_for(ready, READY_TIMEOUT_S, interval=0.5, what="the readiness probe to succeed")
        except TimeoutError:
            self.kill()
            raise AssertionError(f"pod not ready after {READY_TIMEOUT_S}s (last probe: {last.get('probe')}; "
                                 f"sched_ext {tl.scx_state()}, ops {tl.scx_ops()!r}):\n{self.log_tail()}")
        self.ready_s = time.monotonic() - t0
        tl.log(f"pod ready after {self.ready_s:.2f}s (ops {tl.scx_ops()!r})")
        return self

    def check_running(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"schedbe exited with {self.proc.returncode}:\n{self.log_tail()}")
        r = dep.run_probe()
        assert r.returncode == 0, f"pod no longer ready: {(r.stdout + r.stderr).strip()!r}\n{self.log_tail()}"

    def terminate(self):
        """SIGTERM to the main process only (what the container runtime sends);
        SIGKILL after the grace period, which fails the test. Returns the exit
        status and the seconds it took."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(self.grace)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"schedbe did not exit within terminationGracePeriodSeconds "
                                 f"({self.grace}s) of SIGTERM:\n{self.log_tail()}")
        finally:
            self.logf.close()
        took = time.monotonic() - t0
        self.proc = None
        tl.log(f"SIGTERM -> exit {rc} after {took:.2f}s")
        return rc, took

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            tl.kill_proc(self.proc)
        if self.logf is not None:
            self.logf.close()


def check_terminated(pod, rc):
    assert rc == 0, f"schedbe exited with {rc} on SIGTERM (documented: 0):\n{pod.log_tail()}"
    tl.wait_for(lambda: tl.scx_state() == "disabled", 10, what="sched_ext state disabled")
    # Just after an unload next to weight-1 tasks (a thawed BestEffort pod) the
    # kernel's own grace periods can lag: once a probe forked then took over
    # 10 s, with an rcu_tasks grace period 10 s old (docs/design.md, "RCU
    # readers"). What is checked here is the probe's answer; its time is logged.
    t0 = time.monotonic()
    r = dep.run_probe(timeout=60)
    tl.log(f"readiness probe after exit: status {r.returncode} in {time.monotonic() - t0:.2f}s")
    assert r.returncode != 0, "the readiness probe still succeeds after schedbe exited"
    assert "disabled" in r.stdout, f"probe reason: {r.stdout!r}"
    frozen = dep.frozen_cgroups()
    assert not frozen, f"cgroups left frozen after SIGTERM: {frozen}"
    assert state_cgroups() == [], f"{state_file()} still lists {state_cgroups()}"


def test_daemonset_command_line(tmp_path):
    """initContainer, main container until ready, SIGTERM: exit 0, disabled, nothing frozen."""
    before = dep.frozen_cgroups()
    assert not before, f"testbed: cgroups frozen before the test: {before}"
    pod = Pod(tmp_path, "deploy-daemonset")
    try:
        pod.start()
        time.sleep(2.0)
        pod.check_running()
        rc, took = pod.terminate()
    finally:
        pod.kill()
    check_terminated(pod, rc)


def usage_grows(rel, window=0.5):
    a = tl.cg_usage_usec(rel)
    time.sleep(window)
    return tl.cg_usage_usec(rel) - a


def test_daemonset_sigterm_thaws_parked_besteffort_pod(tmp_path):
    """A BestEffort pod's cgroup is parked under LC overload with the ConfigMap's
    settings; SIGTERM then thaws it before schedbe exits 0, and it runs again."""
    cfg = config()
    if not cfg.get("park", True) or not cfg.get("default_be_cgroups", True):
        pytest.skip("the ConfigMap turns parking or the kubelet BestEffort patterns off")
    park_after_s = cfg.get("park_after_ms", 3000) / 1000
    before = dep.frozen_cgroups()
    assert not before, f"testbed: cgroups frozen before the test: {before}"

    lc = tl.cg_create(LC_POD_CG)
    be = tl.cg_create(BE_POD_CG)
    pod = Pod(tmp_path, "deploy-daemonset-parked")
    procs = []
    try:
        pod.start()
        procs += [tl.spawn(tl.BUSY_LOOP, cgroup=be) for _ in range(tl.NR_CPUS)]
        assert usage_grows(be) > 100_000, "the BestEffort pod did not run before the overload"
        procs += [tl.spawn(tl.BUSY_LOOP, cgroup=lc, cpus={c}) for c in range(tl.NR_CPUS)]
        t0 = time.monotonic()
        tl.wait_for(lambda: tl.cg_frozen(be), park_after_s * 1.5 + PARK_SLACK_S, interval=0.1,
                    what=f"/{be} parked (frozen)")
        tl.log(f"BestEffort pod cgroup parked {time.monotonic() - t0:.2f}s after the LC overload started")
        pod.check_running()
        assert be in state_cgroups(), f"{state_file()} lists {state_cgroups()}, not {be}"

        rc, took = pod.terminate()
        check_terminated(pod, rc)
        assert not tl.cg_frozen(be), f"/{be} still frozen (cgroup.events) after SIGTERM"
        # Back on EEVDF, next to the LC hogs, the BestEffort pod gets CPU again.
        ran = usage_grows(be, window=1.0)
        tl.log(f"after SIGTERM ({took:.2f}s): BestEffort pod used {ran} us of CPU in 1 s")
        assert ran > 10_000, f"the BestEffort pod used only {ran} us in 1 s after SIGTERM"
    finally:
        pod.kill()
        for p in procs:
            tl.kill_proc(p)
        # Frozen tasks die too: cgroup.kill works on them.
        tl.cg_remove_tree(f"{tl.TEST_CG}/kubepods")
