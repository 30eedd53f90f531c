"""cpu.max enforced by schedbe (crates/schedbe/src/bpf/cpumax.bpf.h), under
the SCHED_BE policy and, in quota mode, under LLF (the tests that do not
need --limit-mode run under both).

The kernel's CFS bandwidth control does not apply to sched_ext tasks; schedbe
enforces cpu.max itself. Every figure here is the kernel's own CPU accounting
(cgroup cpu.stat usage_usec, /proc/PID/schedstat), which schedbe does not
write; schedbe's own counters (its stats JSON) are only checked to be
consistent with it.
"""

import json
import time

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.vm

PERIOD_S = 0.1
WARM = 1.5          # new cgroups are picked up by the next rescan (1 s)
WINDOW = 5.0
TOL = 0.05          # acceptance: a limit holds within +-5%


def hogs(rel, n):
    return [tl.spawn(tl.BUSY_LOOP, cgroup=rel) for _ in range(n)]


def cpus_used(rels, window, idle=None):
    """CPUs each cgroup used over `window` seconds (kernel cpu.stat); with
    `idle` (a list), also appends the CPUs left idle over it (/proc/stat)."""
    s0 = tl.CpuSample(rels)
    time.sleep(window)
    used, idle_cpus = tl.CpuSample(rels).cpus_since(s0)
    if idle is not None:
        idle.append(idle_cpus)
    return used


last_stats = tl.last_stats


def stop_all(procs):
    for p in procs:
        tl.kill_proc(p)


@pytest.mark.parametrize("policy", ["sched-be", "llf"])
def test_quota_holds_and_unlimited_keep_the_rest(policy):
    """cpu.max 50000 100000 with 4 hogs: 0.50 CPU; an unlimited cgroup with 4
    hogs beside it keeps what the limited one leaves (work conservation): the
    CPUs are not left idle, and the unlimited hogs get nearly all of the rest.

    Work conservation is asserted on idle time: what the two cgroups do not
    use is idle time plus everything else that runs (the harness, schedbe's
    stats, kernel threads), and under emulation on a busy host that else
    took 2-9% of the rest (0.913-0.989 of it went to the unlimited hogs
    over 11 runs), while the CPUs stayed busy."""
    lim = tl.cg_create(f"{tl.TEST_CG}/lim", cpu_max="50000 100000")
    free = tl.cg_create(f"{tl.TEST_CG}/free")
    procs = []
    with tl.Schedbe(*tl.policy_args(policy), "--stats", 1, "--json", name=f"cpumax-quota-{policy}") as sched:
        try:
            procs += hogs(lim, 4) + hogs(free, 4)
            time.sleep(WARM)
            idle = []
            procs0, irq0 = tl.cpu_by_process(), tl.irq_seconds()
            used_lim, used_free = cpus_used([lim, free], WINDOW, idle)
            # what took the rest, for the log and a failure
            others = tl.who_ran(procs0, WINDOW, exclude={p.pid for p in procs})
            irq = (tl.irq_seconds() - irq0) / WINDOW
            time.sleep(1.2)     # one more stats line, covering the window
            st = last_stats(sched)
            sched.check_running()
        finally:
            stop_all(procs)
    rest = tl.NR_CPUS - used_lim
    tl.log(f"cpumax ({policy}): limited 0.50 -> {used_lim:.3f} CPUs; unlimited {used_free:.3f} of the {rest:.2f} left "
           f"({used_free / rest:.3f}); idle {idle[0]:.3f} CPUs; interrupts {irq:.3f} CPUs; "
           f"most CPU besides the hogs (pid, comm, CPUs): {others}; schedbe's view: {st['cgroups']}")
    assert abs(used_lim - 0.50) <= TOL * 0.50, f"limit 0.50 CPU not held: {used_lim:.3f}"
    assert idle[0] <= 0.02 * tl.NR_CPUS, f"{idle[0]:.3f} CPUs idle while unlimited hogs were runnable"
    assert used_free >= 0.88 * rest, (f"unlimited cgroup got {used_free:.3f} of {rest:.2f} CPUs left; "
                                      f"interrupts {irq:.3f} CPUs, most CPU besides the hogs: {others}")
    bw = st["cgroups"][f"/{lim}"]
    assert (bw["quota_us"], bw["period_us"]) == (50000, 100000)
    assert bw["nr_throttled"] >= 0.8 * WINDOW / PERIOD_S, bw     # throttled in (nearly) every period
    # a period is counted when it ends, a throttle when it starts: the current one may lead
    assert bw["throttled_usec"] > 0 and bw["nr_periods"] + 1 >= bw["nr_throttled"], bw
    assert f"/{free}" not in st["cgroups"], "an unlimited cgroup is reported as limited"


@pytest.mark.parametrize("policy", ["sched-be", "llf"])
def test_nested_limits(policy):
    """Parent 1 CPU, two children at 0.8 CPU each, 4 hogs in each child: the
    parent holds 1 CPU and neither child exceeds 0.8."""
    parent = tl.cg_create(f"{tl.TEST_CG}/parent", cpu_max="100000 100000")
    kids = [tl.cg_create(f"{parent}/{k}", cpu_max="80000 100000") for k in ("a", "b")]
    procs = []
    with tl.Schedbe(*tl.policy_args(policy), name=f"cpumax-nested-{policy}") as sched:
        try:
            procs += hogs(kids[0], 4) + hogs(kids[1], 4)
            time.sleep(WARM)
            used_p, used_a, used_b = cpus_used([parent] + kids, WINDOW)
            sched.check_running()
        finally:
            stop_all(procs)
    tl.log(f"cpumax ({policy}): nested: parent {used_p:.3f} (limit 1.0), children {used_a:.3f} / {used_b:.3f} (limit 0.8 each)")
    # The limit must hold (upper bound); the lower bound allows for the release
    # of held tasks at each period boundary landing late under emulation.
    assert 0.85 <= used_p <= 1.0 + TOL, f"parent limit 1.0 not held: {used_p:.3f}"
    for u in (used_a, used_b):
        assert u <= 0.8 * (1 + TOL), f"child above its 0.8 limit: {u:.3f}"


@pytest.mark.parametrize("policy", ["sched-be", "llf"])
@pytest.mark.parametrize("before,after,want", [("50000 100000", "20000 100000", 0.20),
                                               ("max 100000", "30000 100000", 0.30)])
def test_limit_changed_at_run_time(before, after, want, policy):
    """A limit written while schedbe runs holds from two periods later."""
    rel = tl.cg_create(f"{tl.TEST_CG}/chg", cpu_max=before)
    procs = []
    with tl.Schedbe(*tl.policy_args(policy), name=f"cpumax-change-{policy}") as sched:
        try:
            procs += hogs(rel, 4)
            time.sleep(WARM + 0.5)
            tl.cg_write(rel, "cpu.max", after)
            time.sleep(2 * PERIOD_S)
            (used,) = cpus_used([rel], 3.0)
            sched.check_running()
        finally:
            stop_all(procs)
    tl.log(f"cpumax ({policy}): {before} -> {after}: {used:.3f} CPUs from two periods after the write (want {want})")
    assert abs(used - want) <= 2 * TOL * want, f"{after} not in effect two periods after the write: {used:.3f}"


@pytest.mark.parametrize("policy", ["sched-be", "llf"])
def test_throttled_most_of_the_time_no_stall(policy):
    """60 s of cgroups whose every task is throttled 99% of the time (LC and
    BE): no watchdog stall (the kernel log guard fails the test on one), and
    the throttled BE cgroup, which LC does not starve, is never parked.

    The 1% limit itself is held loosely here: under emulation the kernel's
    cpu.stat shows 1.5-1.9% for it while schedbe charges ~1.1% of a CPU (an
    open discrepancy, docs/results.md); the bound only checks that the
    cgroups stay throttled nearly all the time."""
    stage = tl.cg_create(f"{tl.TEST_CG}/stage")
    lc = tl.cg_create(f"{tl.TEST_CG}/lc1", cpu_max="1000 100000")
    be = tl.cg_create(f"{tl.TEST_CG}/be1", cpu_max="1000 100000", cpu_idle=1)
    procs = []
    frozen = False
    with tl.Schedbe(*tl.policy_args(policy), name=f"cpumax-60s-{policy}") as sched:
        try:
            # Exec'd elsewhere, then moved: an exec at 1% of a CPU takes seconds,
            # and a child that joins a cgroup before its exec would hang spawn()
            # if that cgroup got parked meanwhile.
            procs += hogs(stage, 8)
            time.sleep(WARM)
            for i, p in enumerate(procs):
                tl.cg_move(p.pid, lc if i < 4 else be)
            time.sleep(WARM)
            u0 = [tl.cg_usage_usec(r) for r in (lc, be)]
            t0 = time.monotonic()
            while time.monotonic() - t0 < 60:
                time.sleep(2)
                frozen |= tl.cg_frozen(be)
                sched.check_running()
            dt = time.monotonic() - t0
            used = [(tl.cg_usage_usec(r) - a) / 1e6 / dt for r, a in zip((lc, be), u0)]
        finally:
            stop_all(procs)
    tl.log(f"cpumax ({policy}): 60 s at 1% with 4 hogs each: LC {used[0]:.4f} CPUs, BE {used[1]:.4f} CPUs, BE parked: {frozen}")
    assert not frozen, "a throttled BE cgroup was parked (throttling is not starvation)"
    for u in used:
        assert 0.005 <= u <= 0.03, f"a 1% cgroup used {u:.4f} CPUs"


@pytest.mark.parametrize("policy", ["sched-be", "llf"])
def test_cgroup_removed_while_throttled(policy):
    """Tasks moved out of a throttled cgroup, which is then removed, run again
    within a period; nothing stays held."""
    lim = tl.cg_create(f"{tl.TEST_CG}/gone", cpu_max="1000 100000")
    dst = tl.cg_create(f"{tl.TEST_CG}/after")
    procs = []
    with tl.Schedbe(*tl.policy_args(policy), name=f"cpumax-rmdir-{policy}") as sched:
        try:
            procs += hogs(dst, 2)
            time.sleep(WARM)
            for p in procs:
                tl.cg_move(p.pid, lim)
            time.sleep(WARM)
            for p in procs:
                tl.cg_move(p.pid, dst)
            tl.cg_path(lim).rmdir()
            time.sleep(2 * PERIOD_S)
            shares = [tl.share(p.pid, 2.0) for p in procs]
            sched.check_running()
        finally:
            stop_all(procs)
    tl.log(f"cpumax ({policy}): hogs moved out of a throttled cgroup that was removed: {shares}")
    for s in shares:
        assert s >= 0.5, f"a task from the removed cgroup got {s:.3f} of a CPU"


def over_cap(timeline, cap, most=5):
    """From a tracer timeline (CSV) whose only --cgroup is the limited one: the
    first `most` intervals in which its tasks ran on more than `cap` CPUs at
    once, each with the run segments that made it up (cpu, pid, comm, start and
    end in ms from the window's start), for a failure to show what ran where."""
    segs = [(r["start_ns"], r["end_ns"], r["cpu"], r["pid"], r["comm"])
            for r in tl.read_timeline(timeline) if r["cgroup"]]
    edges = sorted([(s, 1, i) for i, (s, _, _, _, _) in enumerate(segs)] +
                   [(e, -1, i) for i, (_, e, _, _, _) in enumerate(segs)])

    def ms(ns):
        return round(ns / 1e6, 3)

    on, found, start = set(), [], None
    for t, d, i in edges:
        if d > 0:
            on.add(i)
        else:
            on.discard(i)
        if len(on) > cap and start is None:
            start, members = t, set(on)
        elif len(on) > cap:
            members |= on
        elif start is not None:
            found.append({"from_ms": ms(start), "to_ms": ms(t),
                          "segments": [(segs[j][2], segs[j][3], segs[j][4], ms(segs[j][0]), ms(segs[j][1]))
                                       for j in sorted(members)]})
            start = None
            if len(found) >= most:
                break
    return found


def cpus_at_once(mode, name, diag=None):
    """Under `schedbe run --limit-mode MODE`, a cgroup limited to 1.5 CPUs with 4
    hogs (a child of it holding them, so the limit applies to a parent, as a pod's
    does): its CPU use (kernel cpu.stat) and, from the tracer, the time it ran on
    each number of CPUs at once. With `diag` (a dict), also the intervals on
    more than 2 CPUs (over_cap) and the scheduler's bw_conc_yields."""
    pod = tl.cg_create(f"{tl.TEST_CG}/pod-{mode}", cpu_max="150000 100000")
    ctr = tl.cg_create(f"{pod}/ctr")
    procs = []
    with tl.Schedbe("--limit-mode", mode, "--stats", 1, "--json", name=name) as sched:
        try:
            procs += hogs(ctr, 4)
            time.sleep(WARM)
            u0 = tl.cg_usage_usec(pod)
            t0 = time.monotonic()
            timeline = tl.results_dir() / f"{name}.timeline.csv"
            rep = tl.run_trace(WINDOW, name, cgroups=[pod], extra=["--timeline", str(timeline)])
            used = (tl.cg_usage_usec(pod) - u0) / 1e6 / (time.monotonic() - t0)
            sched.check_running()
            if diag is not None:
                diag["over_cap"] = over_cap(timeline, 2)
                # per stats line (1 s); the key is checked, so a renamed stat fails loudly
                diag["bw_conc_yields"] = [s["bw_conc_yields"] for s in tl.all_stats(sched)]
        finally:
            stop_all(procs)
    at = rep["cgroups"][pod]["time_at_cpus_ms"]
    tl.log(f"cpumax: {mode}: limit 1.5 CPUs, 4 hogs -> {used:.3f} CPUs; ms at k CPUs at once: {[round(x, 1) for x in at]}")
    return used, at


def test_concurrency_mode_caps_cpus_at_once():
    """--limit-mode concurrency: a 1.5-CPU limit means at most 2 CPUs at any
    instant (tracer), and still 1.5 CPUs of time (kernel cpu.stat). The default
    quota mode, side by side, spreads the same hogs over more CPUs.

    Since tokens go back at the sched_switch tracepoint (cpumax_conc.bpf.h), the
    tracer has seen 0-2.5 ms of a 5 s window on 3 CPUs (2.5 in the CI run of
    f09d803, 0 or 0.2 in seven others); before, when they went back in
    ops.stopping, 20-32 ms (docs/design.md, "Concurrency mode"). The bound, 0.2%
    of the window (10 ms), fails on that earlier code; it is not 0 because the
    tracer's timestamps come from different vCPUs' clocks. Open: the CI run of
    bb55168 (2026-11-28) saw 12.5 ms with no event dropped or inconsistent,
    and nine runs of this test alone the same day, of three builds
    (scripts/ab/conc-cap-ab.sh), 0-0.4 ms: a rare path that runs a third task
    of the pod is not ruled out. The whole of this file run four times in one
    boot (2026-11-29, scripts/ab/cpumax-repeat.sh) gave 0, 2.2, 0, 0.2 ms; in
    the 2.2 ms a task moved to a CPU ran 3 ms there while an idle CPU started
    the one it had replaced. One race that fits, closed since (consume.bpf.h,
    conc_hand_over_retry()): the hand-over failing because another CPU was
    trying the same queued task. After it, two runs: 0 and 0 ms, but
    ops.running's backstop still fired (bw_conc_yields 6 and 5 over each
    ~14 s run), so some path still gives a CPU without tokens. A failure here
    prints the intervals over the cap, their run segments and the backstop's
    count per second (the timeline is kept in
    results/tmp/tests/cpumax-conc-cap.timeline.csv)."""
    if tl.NR_CPUS < 4:
        pytest.skip(f"needs 4 CPUs to tell 2 CPUs at once from more ({tl.NR_CPUS} here)")
    used_q, at_q = cpus_at_once("quota", "cpumax-quota-spread")
    diag = {}
    used_c, at_c = cpus_at_once("concurrency", "cpumax-conc-cap", diag)
    window_ms = sum(at_c)
    over = sum(at_c[3:])
    assert abs(used_c - 1.5) <= 1.5 * TOL, f"concurrency mode: {used_c:.3f} CPUs for a 1.5-CPU limit"
    assert abs(used_q - 1.5) <= 1.5 * TOL, f"quota mode: {used_q:.3f} CPUs for a 1.5-CPU limit"
    if over:
        tl.log(f"cpumax: concurrency: on 3+ CPUs: {diag}")
    assert over <= 0.002 * window_ms, f"concurrency mode: {over:.1f} ms of {window_ms:.0f} on more than 2 CPUs: {diag}"
    assert sum(at_q[3:]) > 10 * max(over, 1.0), f"quota mode did not spread: {at_q} (concurrency: {at_c})"


def nonvoluntary_switches(proc):
    """The kernel's count of times `proc` was switched out while runnable."""
    return tl.ctxt_switches(proc)[1]


def test_concurrency_mode_sibling_containers_take_turns():
    """--limit-mode concurrency, a pod limited to 1 CPU whose two containers
    have limits of their own (1 CPU each, as kubelet writes a Guaranteed pod's),
    one hog in each. Their chains of limited cgroups differ, so the pod's one
    token cannot be handed from one to the other as within a container: the
    leaving hog gives it back and its sibling takes it, slice by slice. Both
    get a fair part (>= 0.35 CPU each) and the pod stays on one CPU at a time
    (tracer); each hog is switched out while runnable (kernel's count) at
    least 20 times a second. VM, 2 runs each: 57-59/s; 3-5/s before the
    give-back (6213ce8), when a hog kept the CPU slice after slice and the
    turns came only with throttling, with the same shares over 5 s."""
    pod = tl.cg_create(f"{tl.TEST_CG}/pod-siblings", cpu_max="100000 100000")
    ctrs = [tl.cg_create(f"{pod}/c{i}", cpu_max="100000 100000") for i in (1, 2)]
    procs = []
    with tl.Schedbe("--limit-mode", "concurrency", name="cpumax-conc-siblings") as sched:
        try:
            for c in ctrs:
                procs += hogs(c, 1)
            time.sleep(WARM)
            n0, t0 = [nonvoluntary_switches(p) for p in procs], time.monotonic()
            rep = tl.run_trace(WINDOW, "cpumax-conc-siblings", cgroups=[pod] + ctrs)
            rates = [(nonvoluntary_switches(p) - n) / (time.monotonic() - t0) for p, n in zip(procs, n0)]
            sched.check_running()
        finally:
            stop_all(procs)
    cg = rep["cgroups"]
    at = cg[pod]["time_at_cpus_ms"]
    window_ms = sum(at)
    shares = [cg[c]["cpu_time_ms"]["total"] / window_ms for c in ctrs]
    over = sum(at[2:])
    tl.log(f"cpumax: siblings under a 1-CPU pod, concurrency mode: CPUs {[round(s, 3) for s in shares]}; "
           f"ms at k CPUs at once: {[round(x, 1) for x in at]}; switched out while runnable "
           f"{[round(r) for r in rates]} /s")
    assert min(shares) >= 0.35, f"a container got {min(shares):.3f} CPU of the pod's 1 (shares {shares})"
    assert over <= 0.005 * window_ms, f"the pod ran on 2+ CPUs for {over:.1f} ms of {window_ms:.0f}"
    assert min(rates) >= 20, f"the containers did not take turns slice by slice: {rates} switches/s"
