"""Bad input to `schedbe run` and `schedbe exec` exit statuses.

The bad-input tests run on the host (whose kernel has no sched_ext) and in the VM.
Each checks: non-zero exit, exactly one line on stderr starting with
"schedbe: error:" that names the problem, and that nothing changed (sched_ext state
and enable count where sched_ext exists, the top-level cgroups).
"""

import os
import subprocess
import time

import pytest

import schedbe_testlib as tl


def snapshot():
    s = {"state": tl.scx_state(), "enable_seq": tl.scx_enable_seq(), "ops": tl.scx_ops()}
    if (tl.CGROOT / "cgroup.controllers").exists():
        s["cgroups"] = sorted(p.name for p in tl.CGROOT.iterdir() if p.is_dir())
    return s


def run_bad(argv, **kw):
    before = snapshot()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120, **kw)
    after = snapshot()
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    tl.log(f"{' '.join(map(str, argv))} -> {r.returncode}: {r.stderr.strip()!r}")
    assert r.returncode != 0, f"exit status 0 for bad input; stderr: {r.stderr!r}"
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {r.stderr!r}"
    assert lines[0].startswith("schedbe: error:"), f"unexpected error line: {lines[0]!r}"
    assert after == before, f"bad input changed the system: {before} -> {after}"
    return lines[0]


def test_run_without_sched_ext():
    if tl.scx_available():
        pytest.skip("this kernel has sched_ext (the case runs on the host)")
    line = run_bad([tl.SCHEDBE, "run"])
    assert "sched_ext" in line, line


def test_run_without_root():
    line = run_bad(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    tl.SCHEDBE, "run"])
    if tl.scx_available():
        low = line.lower()
        assert any(w in low for w in ("root", "permission", "privilege", "cap_")), line


@pytest.mark.parametrize("args", [["srv-bg", "--quick"], ["plot", "--help"], []])
def test_bench_is_its_own_binary(args):
    """`schedbe bench ...` names the command that replaced it, exit 2."""
    r = subprocess.run([tl.SCHEDBE, "bench", *args], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    tl.log(f"schedbe bench {args} -> {r.returncode}: {r.stderr.strip()!r}")
    want = "schedbe: error: the benchmark harness is its own binary now: run `" + " ".join(["schedbe-bench", *args]) + "`"
    assert (r.returncode, r.stdout, r.stderr.splitlines()) == (2, "", [want])


def test_help_lists_the_tools_and_the_experiments():
    top = subprocess.run([tl.SCHEDBE, "--help"], capture_output=True, text=True, timeout=60)
    assert top.returncode == 0, top.stderr
    assert "bench" not in top.stdout, top.stdout
    bench = subprocess.run([tl.SCHEDBE_BENCH, "--help"], capture_output=True, text=True, timeout=60)
    assert bench.returncode == 0, bench.stderr
    listed = {l.split()[0] for l in bench.stdout.splitlines() if l.startswith("  ") and l.split()}
    assert {"srv-bg", "overhead", "pods", "plot", "serverless", "akita-mc"} <= listed, bench.stdout
    assert not {"lc-server", "client", "be-worker", "job-server", "fn-pool", "duty"} & listed, bench.stdout


# kind -> (file content, what the error line must name; None = the file's path)
BAD_CONFIGS = {
    "syntax": ("this is [[ not toml\n", None),
    "unknown-key": ("no_such_option = 1\n", "no_such_option"),
    "wrong-type": ('starvation_limit_ms = "soon"\n', None),
    "out-of-range": ("starvation_limit_ms = 3600000\n", "starvation_limit_ms"),
    "bad-pattern": ('be_cgroups = ["a/[b"]\n', "a/[b"),
}


@pytest.mark.parametrize("kind", sorted(BAD_CONFIGS))
def test_run_invalid_config(kind):
    path = tl.results_dir() / f"bad-{kind}.toml"
    text, names = BAD_CONFIGS[kind]
    path.write_text(text)
    line = run_bad([tl.SCHEDBE, "run", "--config", path])
    # Where sched_ext exists and we are root, the config is the only problem, so
    # the line must name it (elsewhere a missing sched_ext may be reported first).
    if tl.scx_available() and os.geteuid() == 0:
        assert (names or str(path)) in line, f"error line does not name {names or path}: {line}"


def test_run_missing_config():
    line = run_bad([tl.SCHEDBE, "run", "--config", "/nonexistent/schedbe.toml"])
    if tl.scx_available() and os.geteuid() == 0:
        assert "/nonexistent/schedbe.toml" in line, line


# `schedbe trace` arguments -> what the error line must say. Run unprivileged:
# the arguments are checked before the privileges and before anything is loaded.
BAD_TRACE_ARGS = {
    "request-not-a-number": (["--cgroup", "kubepods.slice/pod1.slice=x"],
                             "--cgroup kubepods.slice/pod1.slice=x: bad CPU request"),
    "request-negative": (["--cgroup", "pod1=-1"], "--cgroup pod1=-1: bad CPU request"),
    "request-too-precise": (["--cgroup", "pod1=1.2345"], "at most 3 decimals"),
    "request-without-path": (["--cgroup", "=2"], "no cgroup path"),
    "timeline-window-reversed": (["--timeline", "TIMELINE", "--timeline-window", "2:1"],
                                 "--timeline-window 2:1"),
}


@pytest.mark.parametrize("kind", sorted(BAD_TRACE_ARGS))
def test_trace_bad_arguments(kind):
    args, names = BAD_TRACE_ARGS[kind]
    args = [str(tl.results_dir() / "timeline.csv") if a == "TIMELINE" else a for a in args]
    line = run_bad(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    tl.SCHEDBE, "trace", "--duration", "1", *args])
    assert names in line, line


def be_cgroups():
    d = tl.CGROOT / "schedbe-be"
    return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.exists() else []


@pytest.mark.cgroup
@pytest.mark.parametrize("code", [0, 7, 255])
def test_exec_returns_status(code):
    before = be_cgroups()
    r = subprocess.run([tl.SCHEDBE, "exec", "--be", "--", "sh", "-c", f"exit {code}"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert r.returncode == code, f"exit {r.returncode}, wanted {code}; stderr {r.stderr!r}"
    assert be_cgroups() == before, f"exec left cgroups behind: {before} -> {be_cgroups()}"


@pytest.mark.cgroup
def test_exec_runs_in_idle_cgroup():
    """The command runs in its own cgroup under schedbe-be/, and its cpu cgroup (the
    nearest one with the cpu controller, whose task group the kernel uses) has
    cpu.idle=1."""
    script = ('cg=$(sed -n "s/^0:://p" /proc/self/cgroup); echo "$cg"; d=/sys/fs/cgroup$cg; '
              'while [ ! -e "$d/cpu.idle" ] && [ "$d" != /sys/fs/cgroup ]; do d=${d%/*}; done; '
              'echo "$d"; cat "$d/cpu.idle" 2>/dev/null || echo none')
    r = subprocess.run([tl.SCHEDBE, "exec", "--be", "--", "sh", "-c", script],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    cg, cpu_cg, idle = r.stdout.split()
    assert cg.startswith("/schedbe-be/"), cg
    assert cpu_cg.startswith("/sys/fs/cgroup/schedbe-be") and idle == "1", \
        f"task in {cg}: its cpu cgroup {cpu_cg} has cpu.idle={idle}"


def test_exec_without_command_fails():
    r = subprocess.run([tl.SCHEDBE, "exec", "--be", "--"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0


def test_systemd_unit_verifies(tmp_path):
    """The shipped unit parses cleanly (systemd-analyze verify, pointed at the
    built binary) and keeps the parts the no-frozen-task guarantee relies on.
    Host only: the guest has no systemd unit tree to resolve dependencies in."""
    if os.environ.get("SCHEDBE_REQUIRE_SCX") == "1":
        pytest.skip("runs on the host (make test-host): no systemd in the guest")
    unit = (tl.ROOT / "packaging" / "systemd" / "schedbe.service").read_text()
    for line in ("ExecStopPost=/usr/local/bin/schedbe thaw", "Restart=on-failure",
                 "RuntimeDirectoryPreserve=yes"):
        assert line in unit.splitlines(), f"unit lacks {line!r}"
    f = tmp_path / "schedbe.service"
    f.write_text(unit.replace("/usr/local/bin/schedbe", str(tl.SCHEDBE)))
    r = subprocess.run(["systemd-analyze", "verify", str(f)], capture_output=True, text=True, timeout=60)
    complaints = [l for l in (r.stdout + r.stderr).splitlines() if "schedbe.service" in l]
    assert r.returncode == 0 and not complaints, r.stdout + r.stderr


def test_thaw_without_state_file(tmp_path):
    r = subprocess.run([str(tl.SCHEDBE), "thaw", "--state-file", str(tmp_path / "none.json")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "nothing to thaw" in r.stdout, r


def test_thaw_corrupt_state_file(tmp_path):
    f = tmp_path / "parked.json"
    f.write_text("{garbage")
    r = subprocess.run([str(tl.SCHEDBE), "thaw", "--state-file", str(f)], capture_output=True, text=True, timeout=30)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode != 0 and len(lines) == 1 and "corrupt" in lines[0], r


# The policies' options, as subcommands (`run akita`, `run llf`) and in the flag
# form of earlier versions (`run --policy X`): argv (after `schedbe`) -> what the
# error line must name. clap refuses an option of another policy.
AKITA_VMS = 'cpus = "0"\ninitial_temperature = 5\n[[vm]]\nname = "a"\ncgroup = "a"\ncriticality = "LO"\ntype = 2\nvcpus = 1\n'
BAD_AKITA = {
    "no-vms": (["run", "--policy", "akita"], "--vms"),
    "sched-be-flag": (["run", "--policy", "akita", "--vms", "{vms}", "--lc-slice-us", "5"], "--lc-slice-us"),
    "vms-without-policy": (["run", "--vms", "{vms}"], "schedbe run akita"),
    "bad-file": (["run", "--policy", "akita", "--vms", "{bad}"], "c_opt_ms"),
    "missing-file": (["run", "--policy", "akita", "--vms", "/nonexistent/vms.toml"], "/nonexistent/vms.toml"),
    "no-daemon": (["akita", "list", "--socket", "/nonexistent/akita.sock"], "no Akita daemon"),
    "add-missing-file": (["akita", "add", "/nonexistent/frag.toml"], "/nonexistent/frag.toml"),
    "llf-bad-pattern": (["run", "--policy", "llf", "--sandbox", "a/[b"], "a/[b"),
    "llf-vms": (["run", "--policy", "llf", "--vms", "{vms}"], "--vms"),
    "llf-sched-be-flag": (["run", "--policy", "llf", "--lc-slice-us", "5000"], "--lc-slice-us"),
    "llf-bad-park": (["run", "--policy", "llf", "--unpark-after-ms", "5"], "unpark_after_ms"),
    "akita-bad-park": (["run", "--policy", "akita", "--vms", "{vms}", "--park-after-ms", "50"], "park_after_ms"),
    "llf-half-life": (["run", "--policy", "llf", "--load-half-life-s", "0"], "load-half-life-s"),
    "sandbox-without-llf": (["run", "--sandbox", "x/*"], "schedbe run llf"),
    "sub-no-vms": (["run", "akita"], "--vms"),
    "sub-sched-be-flag": (["run", "akita", "--vms", "{vms}", "--lc-slice-us", "5"], "--lc-slice-us"),
    "sub-llf-vms": (["run", "llf", "--vms", "{vms}"], "schedbe run akita"),
    "sub-llf-sched-be-flag": (["run", "llf", "--be-cgroup", "x"], "--be-cgroup"),
    "sub-after-sched-be-flag": (["run", "--lc-slice-us", "5", "llf"], "right after `run`"),
    "sub-bad-park": (["run", "llf", "--park-after-ms", "50"], "park_after_ms"),
    "unknown-policy": (["run", "--policy", "eevdf"], "possible values"),
}


@pytest.mark.parametrize("kind", sorted(BAD_AKITA))
def test_akita_bad_input(kind):
    vms = tl.results_dir() / "cli-akita-vms.toml"
    vms.write_text(AKITA_VMS)
    bad = tl.results_dir() / "cli-akita-bad.toml"
    bad.write_text(AKITA_VMS.replace("type = 2", "c_opt_ms = 150\nperiod_ms = 100"))
    argv, names = BAD_AKITA[kind]
    argv = [a.format(vms=vms, bad=bad) for a in argv]
    line = run_bad([tl.SCHEDBE, *argv])
    assert names in line, f"error line does not name {names}: {line}"


def test_stats_without_scheduler():
    """`schedbe stats` with no schedbe running says so within 2 s and exits
    non-zero (where sched_ext exists, nothing is loaded between tests)."""
    t0 = time.monotonic()
    line = run_bad([tl.SCHEDBE, "stats"])
    dt = time.monotonic() - t0
    assert dt < 2, f"schedbe stats took {dt:.1f} s to fail"
    assert "no schedbe stats server at /var/run/scx/root/stats (is schedbe run running?" in line, line
