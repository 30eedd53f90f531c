"""Helpers for the schedbe test suite: cgroups, workloads, CPU-time probes, the
scheduler and the tracer as subprocesses.

Everything measures behaviour from the kernel's own accounting (/proc/PID/schedstat,
cgroup cpu.stat) or from the independent tracer, never from the scheduler's stats.
"""

import concurrent.futures
import contextlib
import csv
import json
import os
import re
import signal
import struct
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEDBE = Path(os.environ.get("SCHEDBE_BIN", ROOT / "target" / "release" / "schedbe"))
# The benchmark harness, a binary of its own; it runs SCHEDBE (passed on in $SCHEDBE_BIN).
SCHEDBE_BENCH = Path(os.environ.get("SCHEDBE_BENCH_BIN", ROOT / "target" / "release" / "schedbe-bench"))
# Guest writes reach the host only under results/tmp (scripts/vm.sh shares it rw).
RESULTS = Path(os.environ.get("SCHEDBE_TEST_RESULTS", ROOT / "results" / "tmp" / "tests"))
CGROOT = Path("/sys/fs/cgroup")
TEST_CG = "schedbe-test"
SCX = Path("/sys/kernel/sched_ext")
BUSY_LOOP = ["/bin/sh", "-c", "while :; do :; done"]
NR_CPUS = os.cpu_count() or 1


def results_dir():
    RESULTS.mkdir(parents=True, exist_ok=True)
    return RESULTS


def png_size(path):
    """(width, height) of a PNG, checking its signature and IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR", f"{path}: no IHDR chunk"
    return struct.unpack(">II", head[16:24])


def log(msg):
    """Print (pytest shows it for failing tests) and append to results/tmp/tests/log.txt
    (the measurements of passing tests too)."""
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    with contextlib.suppress(OSError):
        with open(results_dir() / "log.txt", "a") as f:
            f.write(line + "\n")


def kmsg(msg):
    """Write a marker into the kernel log (the console), best effort."""
    try:
        with open("/dev/kmsg", "w") as f:
            f.write(f"schedbe-test: {msg}\n")
    except OSError:
        pass


def wait_for(pred, timeout, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def sleep_until(t):
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)


# ------------------------------------------------------------------ schedbe-bench

def bench_env():
    """The environment for schedbe-bench: the schedbe it loads is SCHEDBE."""
    return {**os.environ, "SCHEDBE_BIN": str(SCHEDBE)}


def run_bench(argv, logname, timeout):
    """Run `schedbe-bench ARGV...`; its output goes to RESULTS/LOGNAME and the log.
    Fails the test on a non-zero exit."""
    argv = [str(SCHEDBE_BENCH), *map(str, argv)]
    log("bench: " + " ".join(argv))
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                       env=bench_env())
    (results_dir() / logname).write_text(r.stdout + r.stderr)
    log(f"bench exit {r.returncode}; stdout:\n{r.stdout}")
    assert r.returncode == 0, f"schedbe-bench failed ({r.returncode}):\n{r.stderr[-3000:]}"
    return r


def bench_bad(argv):
    """`schedbe-bench ARGV...` with bad input: exit 1 and one line on stderr,
    "schedbe-bench: error: ...", which is returned."""
    r = subprocess.run([SCHEDBE_BENCH, *map(str, argv)], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60, env=bench_env())
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    log(f"bench {argv} -> {r.returncode}: {r.stderr.strip()!r}")
    assert r.returncode == 1, f"exit {r.returncode}; stderr {r.stderr!r}"
    assert len(lines) == 1 and lines[0].startswith("schedbe-bench: error:"), r.stderr
    return lines[0]


# ------------------------------------------------------------------ sched_ext state

def scx_available():
    return (SCX / "state").exists()


def scx_state():
    try:
        return (SCX / "state").read_text().strip()
    except FileNotFoundError:
        return None


def scx_ops():
    try:
        return (SCX / "root" / "ops").read_text().strip()
    except FileNotFoundError:
        return ""


def scx_enable_seq():
    try:
        return int((SCX / "enable_seq").read_text())
    except (FileNotFoundError, ValueError):
        return None


# ------------------------------------------------------------------ kernel log

_ERR_RES = None


def console_error_res():
    global _ERR_RES
    if _ERR_RES is None:
        pats = (ROOT / "scripts" / "console-errors.ere").read_text().splitlines()
        ign = (ROOT / "scripts" / "console-ignore.ere").read_text().splitlines()
        _ERR_RES = ([re.compile(p) for p in pats if p], [re.compile(p) for p in ign if p])
    return _ERR_RES


class KmsgReader:
    """Reads kernel log records written after construction (from /dev/kmsg)."""

    def __init__(self):
        try:
            self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
        except OSError:
            self.fd = None

    def read_new(self):
        out = []
        if self.fd is None:
            return out
        while True:
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:  # overrun: records were lost, keep going
                continue
            if not rec:
                break
            text = rec.decode(errors="replace")
            msg = text.split(";", 1)[1] if ";" in text else text
            out.append(msg.splitlines()[0] if msg else "")
        return out

    def errors(self):
        errs, ign = console_error_res()
        bad = []
        for line in self.read_new():
            if any(r.search(line) for r in errs) and not any(r.search(line) for r in ign):
                bad.append(line)
        return bad

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# ------------------------------------------------------------------ cgroups

def cg_path(rel):
    return CGROOT / rel


def cg_write(rel, name, value):
    (cg_path(rel) / name).write_text(f"{value}\n")


def cg_read(rel, name):
    return (cg_path(rel) / name).read_text().strip()


def cg_create(rel, **files):
    """Create cgroup `rel` and missing parents, enabling the cpu controller on the
    way down so every level has cpu.* files; then write the given interface files
    (cpu_weight=100 -> cpu.weight)."""
    parts = [p for p in rel.split("/") if p]
    for i in range(len(parts)):
        ctl = cg_path("/".join(parts[:i])) / "cgroup.subtree_control"
        if "cpu" not in ctl.read_text().split():
            ctl.write_text("+cpu\n")
        cg_path("/".join(parts[:i + 1])).mkdir(exist_ok=True)
    for k, v in files.items():
        cg_write(rel, k.replace("_", ".", 1), v)
    return rel


def cg_usage_usec(rel):
    for line in cg_read(rel, "cpu.stat").splitlines():
        k, v = line.split()
        if k == "usage_usec":
            return int(v)
    raise KeyError("usage_usec")


class CpuSample:
    """The cgroups' usage_usec and the idle seconds of all CPUs, read together,
    with the monotonic time at the middle of the reads.

    Rates from two samples divide by the time between their middles, and the
    reads are redone when they took over `tight` s: a test process delayed
    between its clock read and its counter reads (under emulation, on a
    busy guest, a quarter of a second has been seen) would otherwise charge
    the delay's CPU time to a shorter window (a 0.50 CPU limit read as 0.549,
    and two cgroups using 4.22 of 4 CPUs)."""

    def __init__(self, rels, tight=0.02, tries=5):
        for _ in range(tries):
            a = time.monotonic()
            self.usec = [cg_usage_usec(r) for r in rels]
            self.idle = idle_seconds()
            b = time.monotonic()
            if b - a <= tight:
                break
        self.t = (a + b) / 2

    def cpus_since(self, before):
        """CPUs each cgroup used, and the CPUs left idle, since `before`."""
        dt = self.t - before.t
        return [(u - u0) / 1e6 / dt for u, u0 in zip(self.usec, before.usec)], (self.idle - before.idle) / dt


def ctxt_switches(proc):
    """The kernel's counts of `proc`'s context switches so far (/proc/PID/status):
    (voluntary: it slept, nonvoluntary: switched out while runnable)."""
    got = {}
    with open(f"/proc/{proc.pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                got[k] = int(v)
    if len(got) != 2:
        raise AssertionError(f"no context switch counts for {proc.pid}")
    return got["voluntary_ctxt_switches"], got["nonvoluntary_ctxt_switches"]


def _stat_seconds(columns, cpu=None):
    """The sum of /proc/stat `columns` (1: user ... 4: idle, 5: iowait,
    6: irq, 7: softirq) so far, in s: of all CPUs (its cpu line), or of CPU
    `cpu` (its cpuN line)."""
    want = "cpu" if cpu is None else f"cpu{cpu}"
    with open("/proc/stat") as f:
        fields = next(l.split() for l in f if l.split()[0] == want)
    return sum(int(fields[c]) for c in columns) / os.sysconf("SC_CLK_TCK")


def idle_seconds(cpu=None):
    """Idle time so far (idle + iowait), in s: of all CPUs or of CPU `cpu`."""
    return _stat_seconds((4, 5), cpu)


def irq_seconds():
    """Interrupt time so far (irq + softirq) of all CPUs, in s."""
    return _stat_seconds((6, 7))


def cg_frozen(rel):
    """Is the cgroup frozen (cgroup.events "frozen 1")?"""
    return "frozen 1" in cg_read(rel, "cgroup.events").splitlines()


PARK_STATE = Path("/run/schedbe/parked.json")


def park_state_cgroups():
    """The cgroups schedbe's parking state file lists as frozen by it."""
    try:
        return json.loads(PARK_STATE.read_text())["cgroups"]
    except FileNotFoundError:
        return []


def wait_frozen(rel, want, timeout):
    """Wait until cgroup.events says frozen == want; returns the seconds it took."""
    t0 = time.monotonic()
    wait_for(lambda: cg_frozen(rel) == want, timeout, what=f"/{rel} frozen={int(want)}")
    return time.monotonic() - t0


def usage_grows(rel, window=0.5):
    """The CPU time (µs, cpu.stat) cgroup rel gets over the next window seconds."""
    a = cg_usage_usec(rel)
    time.sleep(window)
    return cg_usage_usec(rel) - a


def park_cycle(sched, be, start_load, while_parked=lambda: None, park_after_ms=1000, unpark_after_ms=500,
               slack_s=3.0, what="park"):
    """Parking's whole cycle under any policy: BE hogs in cgroup `be` (a BE
    subtree) run on free CPUs; start_load() starts what starves them and
    returns its processes; the cgroup is then frozen (cgroup.events) within
    park_after_ms + slack_s, listed in the state file, and makes no progress
    for 3 s, while while_parked() checks what the load gets; once the load
    is killed it is thawed within unpark_after_ms + slack_s and runs again,
    and the state file is empty. `sched` must run with --park-after-ms
    park_after_ms --unpark-after-ms unpark_after_ms. Returns the BE processes."""
    bes = [spawn(BUSY_LOOP, cgroup=be) for _ in range(NR_CPUS)]
    assert usage_grows(be) > 100_000, "BE did not run on free CPUs"
    load = start_load()
    try:
        t_park = wait_frozen(be, True, park_after_ms / 1000 + slack_s)
        assert park_state_cgroups() == [be], f"state file lists {park_state_cgroups()}"
        be_us = usage_grows(be, 3.0)
        while_parked()
        sched.check_running()
        log(f"{what}: frozen {t_park:.2f}s after the load began; parked BE used {be_us} us in 3 s")
        assert cg_frozen(be)
        assert be_us < 1000, f"parked BE ran {be_us} us"
    finally:
        for p in load:
            kill_proc(p)
    t_unpark = wait_frozen(be, False, unpark_after_ms / 1000 + slack_s)
    ran = usage_grows(be)
    log(f"{what}: thawed {t_unpark:.2f}s after the load stopped; BE then used {ran / 5e5:.2f} CPUs")
    assert ran > 0.25 * 500_000 * NR_CPUS, f"BE used only {ran} us in 0.5 s after unpark"
    assert park_state_cgroups() == []
    log_text = sched.log_tail(200)
    assert "parked /" + be in log_text and "unparked /" + be in log_text, log_text
    return bes


def cg_procs(rel):
    return [int(x) for x in cg_read(rel, "cgroup.procs").split()]


def cg_move(pid, rel):
    cg_write(rel, "cgroup.procs", pid)


def cg_remove_tree(rel, timeout=10):
    """Kill everything in cgroup `rel` and its descendants and remove them."""
    top = cg_path(rel)
    if not top.exists():
        return
    kill = top / "cgroup.kill"
    if kill.exists():
        kill.write_text("1\n")
    dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
    dirs.append(top)
    deadline = time.monotonic() + timeout
    for d in dirs:
        while True:
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                if (d / "cgroup.kill").exists():
                    (d / "cgroup.kill").write_text("1\n")
                time.sleep(0.05)


# ------------------------------------------------------------------ processes

def cpu_ns(pid):
    """CPU time of a process (all its threads) in ns, from the kernel's accounting."""
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((t / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return total


def cpu_by_process():
    """{pid: (comm, CPU time in s)} of every process now (/proc/PID/stat's
    utime + stime, threads included), for who_ran()."""
    tck = os.sysconf("SC_CLK_TCK")
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            text = (d / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        comm, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        out[int(d.name)] = (comm, (int(rest[11]) + int(rest[12])) / tck)
    return out


def who_ran(before, window, exclude=(), most=5):
    """The processes that used the most CPU since cpu_by_process() returned
    `before`, over `window` s, other than the pids in `exclude`: [(pid, comm,
    CPUs)], for a test's failure message to show what else ran."""
    now = cpu_by_process()
    used = [(pid, comm, round((t - before.get(pid, (comm, 0.0))[1]) / window, 3))
            for pid, (comm, t) in now.items() if pid not in exclude]
    return sorted((u for u in used if u[2] > 0), key=lambda u: -u[2])[:most]


def stat_fields(text):
    """The fields of a /proc/PID/stat line after the command, which may hold
    spaces and parentheses: [0] is the state (field 3), [36] the CPU it last
    ran on (field 39)."""
    return text.rsplit(")", 1)[-1].split()


def last_cpu(pid):
    """The CPU task `pid` last ran on, by the kernel (/proc/PID/stat)."""
    return int(stat_fields(Path(f"/proc/{pid}/stat").read_text())[36])


def proc_state(pid):
    """Single-letter state of a process, or None when it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat[stat.rindex(")") + 2]


def spawn(argv, cgroup=None, cpus=None, policy=None, nice=None, stdout=None, stderr=None,
          env=None, cwd="/tmp"):
    """Start argv as SCHED_OTHER in its own session, optionally in a cgroup (joined
    before exec, so it and everything it forks never run outside it).

    `cpus` and `policy` are applied right after exec, to that process only: a task
    that is BE (or pinned next to an LC hog) before its exec could take many
    starvation-guard periods just to finish exec'ing."""
    procs_file = str(cg_path(cgroup) / "cgroup.procs") if cgroup is not None else None

    def pre():
        os.setsid()
        if procs_file:
            with open(procs_file, "w") as f:
                f.write(str(os.getpid()))
        os.sched_setaffinity(0, range(NR_CPUS))
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        if nice is not None:
            os.nice(nice)

    p = subprocess.Popen(argv, preexec_fn=pre, stdin=subprocess.DEVNULL,
                         stdout=stdout if stdout is not None else subprocess.DEVNULL,
                         stderr=stderr if stderr is not None else subprocess.DEVNULL,
                         env=env, cwd=cwd)
    # Popen returns once the exec succeeded
    if cpus is not None:
        os.sched_setaffinity(p.pid, cpus)
    if policy is not None:
        os.sched_setscheduler(p.pid, policy, os.sched_param(0))
    return p


def kill_proc(p, sig=signal.SIGKILL, timeout=20):
    """Kill a process group. Its leader is unpinned first: a starving BE task pinned
    next to an LC hog would otherwise exit only as fast as guard slices allow."""
    if p.poll() is None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(p.pid, range(NR_CPUS))
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout)


def children(pid):
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def find_proc(pid, comm, timeout=10):
    """`pid` or its first descendant whose comm is `comm` (e.g. the command a
    wrapper such as `schedbe exec` starts)."""
    def look():
        todo = [pid]
        while todo:
            p = todo.pop(0)
            try:
                if Path(f"/proc/{p}/comm").read_text().strip() == comm:
                    return p
            except (FileNotFoundError, ProcessLookupError):
                continue
            todo += children(p)
        return None
    return wait_for(look, timeout, what=f"a {comm} process under {pid}")


def share(pid, window, t0=None):
    """Fraction of one CPU that `pid` used in a window of `window` seconds."""
    a = cpu_ns(pid)
    s = time.monotonic()
    time.sleep(window)
    b = cpu_ns(pid)
    return (b - a) / ((time.monotonic() - s) * 1e9)


# ------------------------------------------------------------------ the scheduler

def read_shared(path):
    """A log's text so far ("" before it exists). Logs are on the host-shared
    results directory, where a read fails now and then with ENODATA while the
    writer is appending (seen in CI): such a read is retried."""
    for attempt in range(10):
        try:
            return path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        except OSError:
            if attempt == 9:
                raise
            time.sleep(0.1)


class SchedbeError(AssertionError):
    pass


class Schedbe:
    """`schedbe run` as a subprocess; start() waits until sched_ext reports it
    enabled, stop() sends SIGINT and checks a clean exit (status 0, disabled)."""

    def __init__(self, *args, name="schedbe", start_timeout=120):
        self.args = [str(SCHEDBE), "run", *map(str, args)]
        self.log_path = results_dir() / f"{name}.log"
        self.start_timeout = start_timeout
        self.proc = None
        self.started_at = None

    def log_text(self):
        return read_shared(self.log_path)

    def log_tail(self, n=30):
        return "\n".join(self.log_text().splitlines()[-n:])

    def start(self):
        assert scx_state() == "disabled", f"a sched_ext scheduler is already loaded: {scx_ops()!r}"
        self.logf = open(self.log_path, "w")
        self.proc = spawn(self.args, stdout=self.logf, stderr=subprocess.STDOUT)
        t0 = time.monotonic()

        def ready():
            if self.proc.poll() is not None:
                raise SchedbeError(f"schedbe run exited with {self.proc.returncode} while "
                                   f"loading:\n{self.log_tail()}")
            return scx_state() == "enabled" and scx_ops().startswith("schedbe")

        try:
            wait_for(ready, self.start_timeout, what="schedbe to be enabled")
        except TimeoutError:
            self.kill()
            raise SchedbeError(f"schedbe not enabled after {self.start_timeout}s "
                               f"(state {scx_state()}, ops {scx_ops()!r}):\n{self.log_tail()}")
        self.started_at = time.monotonic()
        self.load_s = self.started_at - t0
        log(f"{self.log_path.stem}: schedbe enabled after {self.load_s:.1f}s")
        return self

    def check_running(self):
        if self.proc.poll() is not None:
            raise SchedbeError(f"schedbe exited with {self.proc.returncode}:\n{self.log_tail()}")
        if scx_state() != "enabled" or not scx_ops().startswith("schedbe"):
            raise SchedbeError(f"sched_ext state {scx_state()}, ops {scx_ops()!r}:\n{self.log_tail()}")

    def stop(self, timeout=60, sig=signal.SIGINT):
        """SIGINT (or `sig`); checks exit status 0 and that sched_ext returned to
        disabled."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            where = self.threads_report()
            self.kill()
            raise SchedbeError(f"schedbe did not exit within {timeout}s of SIGINT (sched_ext {scx_state()}):\n"
                               f"{where}\n{self.log_tail()}")
        finally:
            self.logf.close()
        wait_for(lambda: scx_state() == "disabled", 30, what="sched_ext state disabled")
        self.proc = None
        if rc != 0:
            raise SchedbeError(f"schedbe exited with {rc}:\n{self.log_tail()}")
        return rc

    def threads_report(self):
        """Where each of the daemon's threads is: state, CPU, wchan and kernel
        stack (for a daemon that does not exit: what it waits for)."""
        out = []
        for t in sorted(Path(f"/proc/{self.proc.pid}/task").glob("*")):
            def rd(name):
                try:
                    return (t / name).read_text(errors="replace").strip()
                except OSError as e:
                    return f"({e.strerror})"
            stat = rd("stat")
            fields = stat_fields(stat)
            state, cpu = (fields[0], fields[36]) if len(fields) > 36 else ("?", "?")
            out.append(f"thread {t.name} {rd('comm')}: state {state} cpu {cpu} wchan {rd('wchan')}\n  "
                       + rd("stack").replace("\n", "\n  "))
        return "\n".join(out)

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            kill_proc(self.proc)
        with contextlib.suppress(Exception):
            self.logf.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, et, ev, tb):
        if et is None:
            self.check_running()
            self.stop()
        else:  # the test already failed: clean up without masking its error
            with contextlib.suppress(Exception):
                self.stop()
            self.kill()
        return False


def all_stats(sched):
    """Every JSON stats line `schedbe run --stats 1 --json` wrote, in order."""
    return [json.loads(line) for line in sched.log_text().splitlines() if line.startswith("{")]


def last_stats(sched):
    """The last JSON stats line `schedbe run --stats 1 --json` wrote."""
    lines = all_stats(sched)
    if not lines:
        raise AssertionError(f"no stats line in {sched.log_path}")
    return lines[-1]


def policy_args(policy):
    """`schedbe run` arguments for a policy under test: "sched-be" (the
    default), "llf" (no sandbox pattern matched: every LC task is a host
    task), "akita" (a VM file with no VM, on the last CPU: LC tasks are host
    tasks). BE is below them all."""
    if policy == "sched-be":
        return []
    if policy == "llf":
        return ["--policy", "llf"]
    if policy == "akita":
        vms = results_dir() / "akita-no-vm.toml"
        vms.write_text(f'cpus = "{NR_CPUS - 1}"\ninitial_temperature = 5\n')
        return ["--policy", "akita", "--vms", str(vms)]
    raise ValueError(f"unknown policy {policy!r}")


# ------------------------------------------------------------------ the tracer

def trace_cmd(duration, be_cgroups=(), output=None, per_task=False, grace_us=None, cgroups=(), extra=(),
              cpu=None):
    argv = ["chrt", "-f", "50", str(SCHEDBE), "trace", "--duration", str(duration)]
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu)] + argv
    for p in be_cgroups:
        argv += ["--be-cgroup", p]
    for p in cgroups:
        argv += ["--cgroup", p]
    if output:
        argv += ["--output", str(output)]
    if per_task:
        argv.append("--per-task")
    if grace_us is not None:
        argv += ["--grace-us", str(grace_us)]
    return argv + list(extra)


def run_trace(duration, name, be_cgroups=(), per_task=False, timeout_extra=120, grace_us=None,
              cgroups=(), extra=(), cpu=None):
    """Run `schedbe trace` (as SCHED_FIFO, so the load cannot starve it) and return
    its JSON report, also saved as results/tmp/tests/<name>.json. `cgroups`:
    cgroups (relative to the v2 root, optionally PATH=REQ) to report per-cgroup
    figures for; `extra`: more arguments; `cpu`: the CPU its userspace runs on."""
    out = results_dir() / f"{name}.json"
    with contextlib.suppress(FileNotFoundError):
        out.unlink()
    argv = trace_cmd(duration, be_cgroups, out, per_task, grace_us, cgroups, extra, cpu)
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=duration + timeout_extra)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited with {r.returncode}:\n{r.stderr[-3000:]}")
    text = out.read_text() if out.exists() and out.stat().st_size else r.stdout
    rep = json.loads(text)
    out.write_text(json.dumps(rep, indent=1))
    return rep


def trace_in_background(duration, name, **kw):
    """run_trace() in a thread, over a window the caller's workload fills: a
    Future whose result() is its report, or raises its error (run_trace's
    own timeout bounds the wait)."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(run_trace, duration, name, **kw)
    finally:
        pool.shutdown(wait=False)


def read_timeline(path):
    """The run segments of a tracer timeline (`schedbe trace --timeline`): one
    dict per row, keyed by its columns, with cpu, start_ns, end_ns and pid as
    ints (the rest as written: comm, tier, cgroup_index, cgroup, ended)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("cpu", "start_ns", "end_ns", "pid"):
            r[k] = int(r[k])
    return rows


def cg_report(rep, rel):
    """A tracer report's figures for cgroup `rel` (keyed with or without the leading /)."""
    c = rep["cgroups"]
    return c[rel] if rel in c else c["/" + rel]


def trace_summary(rep):
    t = rep["totals"]
    cpu = t["cpu_ns"] or 1
    return (f"inversion_frac={rep['inversion_frac']:.6f} "
            f"idle_while_lc_waits_frac={rep.get('idle_while_lc_waits_frac', float('nan')):.6f} "
            f"lc={t['lc_ns'] / cpu:.3f} be={t['be_ns'] / cpu:.3f} idle={t['idle_ns'] / cpu:.3f} "
            f"other={t['other_ns'] / cpu:.3f} grace_ns={rep.get('grace_ns')} events={rep.get('events')} "
            f"dropped={rep.get('dropped_events')} lc_wait_us={rep.get('lc_wait_us')}")
