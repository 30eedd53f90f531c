"""pytest configuration for the schedbe suite.

Markers:
  vm      needs a kernel with sched_ext (runs in the VM: `make test-vm`)
  cgroup  needs cgroup v2 with the cpu controller at /sys/fs/cgroup
  bench_plot  draws the figures of the VM suite's bench run on the host, after it
  host    needs nothing of the kernel (offline checks, figures): make test-host runs
          it, the VM suite leaves it out

Outside the VM, tests whose requirements are missing are skipped. Inside it
(SCHEDBE_REQUIRE_SCX=1, set by tests/run-vm-suite.sh) a missing requirement is a
failure, so a broken testbed cannot pass silently.
"""

import os
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import schedbe_testlib as tl  # noqa: E402

REQUIRE = os.environ.get("SCHEDBE_REQUIRE_SCX") == "1"

# One hung test must fail itself, not eat the suite's whole VM timeout (the
# guest is killed then, and no test after it reports anything). The longest
# tests take ~2.5 min under emulation; override with SCHEDBE_TEST_TIMEOUT.
TEST_TIMEOUT_S = int(os.environ.get("SCHEDBE_TEST_TIMEOUT", "480"))


class TestTimeout(Exception):
    pass


def pytest_configure(config):
    config.addinivalue_line("markers", "vm: needs a kernel with sched_ext (runs in the VM)")
    config.addinivalue_line("markers", "cgroup: needs cgroup v2 with the cpu controller")
    config.addinivalue_line("markers", "host: offline; on the host only, not in the VM suite")
    config.addinivalue_line("markers", "bench_plot: on the host, after the VM suite (make test-bench-plot)")


def _cgroup_ok():
    try:
        return "cpu" in (tl.CGROOT / "cgroup.controllers").read_text().split() and os.geteuid() == 0
    except OSError:
        return False


def _missing(item):
    if item.get_closest_marker("vm") and not tl.scx_available():
        return "this kernel has no sched_ext (run it in the VM: make test-vm)"
    if (item.get_closest_marker("vm") or item.get_closest_marker("cgroup")) and not _cgroup_ok():
        return "needs root and cgroup v2 with the cpu controller"
    return None


def _on_alarm(signum, frame):
    raise TestTimeout(f"test ran longer than {TEST_TIMEOUT_S} s (SCHEDBE_TEST_TIMEOUT): hung?")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """SIGALRM interrupts the test's blocking call with TestTimeout, so its own
    cleanup (context managers: scheduler stop, process kill, thaw) still runs."""
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(TEST_TIMEOUT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# A line per test start and outcome, written as it happens, for tests/digest.py:
# when the guest is killed (VM timeout) pytest prints no summary, and CI shows only
# the tail of the output.
PROGRESS = tl.ROOT / "results" / "tmp" / "tests" / "progress.txt"


def _progress(line):
    try:
        PROGRESS.parent.mkdir(parents=True, exist_ok=True)
        with open(PROGRESS, "a") as f:
            f.write(f"{time.time():.1f} {line}\n")
    except OSError:
        pass


def pytest_sessionstart(session):
    try:
        PROGRESS.unlink()
    except OSError:
        pass


def pytest_runtest_logstart(nodeid, location):
    _progress(f"START {nodeid}")


def _reason(report):
    """The first line that says why: an `E ` line of the traceback, else the last line."""
    text = getattr(report, "longreprtext", "") or ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    why = next((ln[1:].strip() for ln in lines if ln.startswith("E ")), lines[-1] if lines else "")
    return " ".join(why.split())[:300]


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        outcome = report.outcome.upper()
        if report.when != "call" and report.failed:
            outcome = f"ERROR-IN-{report.when.upper()}"
        why = _reason(report) if not report.passed else ""
        _progress(f"{outcome} {report.duration:.1f}s {report.nodeid}" + (f" :: {why}" if why else ""))


def pytest_runtest_setup(item):
    why = _missing(item)
    if why:
        if REQUIRE:
            pytest.fail(f"testbed broken: {why}")
        pytest.skip(why)
    for binary in (tl.SCHEDBE, tl.SCHEDBE_BENCH):
        if not binary.exists():
            pytest.fail(f"{binary} not built (make build)")


@pytest.fixture(autouse=True)
def kernel_log_guard(request):
    """Marks each test in the kernel log, fails it when the kernel logs an error
    (BUG/WARNING/stall/sched_ext error exit) while it runs, and makes sure it
    leaves no scheduler loaded and no test cgroups behind."""
    name = request.node.nodeid
    vm = request.node.get_closest_marker("vm") is not None and tl.scx_available()
    if vm and tl.scx_state() != "disabled":
        pytest.fail(f"a sched_ext scheduler is loaded before the test: {tl.scx_ops()!r}")
    tl.kmsg(f"BEGIN {name}")
    reader = tl.KmsgReader()
    yield
    errs = reader.errors()
    reader.close()
    tl.kmsg(f"END {name}")
    problems = []
    if vm and tl.scx_state() != "disabled":
        problems.append(f"test left a scheduler loaded ({tl.scx_ops()!r})")
    if tl.cg_path(tl.TEST_CG).exists():
        try:
            tl.cg_remove_tree(tl.TEST_CG)
        except OSError as e:
            problems.append(f"cannot remove test cgroups: {e}")
    if errs:
        problems.append("kernel log errors during the test:\n  " + "\n  ".join(errs[:20]))
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)
