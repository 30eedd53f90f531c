//! Per-cgroup wakeup latency (`--cgroup`).

use super::cgroups::run_cg;
use super::*;

/// Cgroup ids of the tests: A is requested cgroup 0, A/B (in A) 1; X is in none.
const A: u64 = 10;
const AB: u64 = 11;
const X: u64 = 99;
const MAP: [(u64, CgroupSet); 3] = [(A, 0b01), (AB, 0b11), (X, 0)];

/// A distribution of one wait of `ns`.
fn one(ns: u64) -> LatencyStats {
    LatencyStats {
        n: 1,
        mean_ns: ns,
        p50_ns: ns,
        p99_ns: ns,
        max_ns: ns,
    }
}

/// LC `pid` of cgroup `cg`: sched_wakeup_new, or found queued by the snapshot.
fn new_task(ts: u64, pid: Pid, cg: u64) -> Event {
    let mut w = wake(pid, Tier::Lc, u64::MAX);
    w.cgroup = cg;
    Event {
        ts,
        cpu: 0,
        kind: EventKind::WakeupNew(w),
    }
}
fn queued(ts: u64, pid: Pid, cg: u64) -> Event {
    let mut e = new_task(ts, pid, cg);
    if let EventKind::WakeupNew(w) = e.kind {
        e.kind = EventKind::InitRunnable(w);
    }
    e
}

#[test]
fn a_task_woken_at_t_and_run_at_t_plus_3ms() {
    let evs = vec![
        sw_cg(0, 0, 0, 1, Tier::Lc, X),
        waking_cg(2 * MS, 5, A),
        sw_cg(5 * MS, 0, 1, 5, Tier::Lc, A),
        sw(7 * MS, 0, 5, 0, Tier::Idle),
    ];
    let r = run_cg(cfg(1), 2, &MAP, evs);
    assert_eq!(r.cgroups[0].wakeup_latency, one(3 * MS), "3000 us");
    assert_eq!(r.cgroups[1].wakeup_latency, LatencyStats::default(), "not in A/B");
}

/// Task 5 (A) runs from 0, is preempted at 2 ms by 6 (X), runs again from
/// 4 ms, blocks at 6 ms, is woken at 7 ms and runs at 7.5 ms.
fn preempted_then_woken() -> Vec<Event> {
    vec![
        sw_cg(0, 0, 0, 5, Tier::Lc, A),
        preempt_cg(2 * MS, 0, 5, 6, X),
        sw_cg(4 * MS, 0, 6, 5, Tier::Lc, A),
        sw(6 * MS, 0, 5, 0, Tier::Idle),
        waking_cg(7 * MS, 5, A),
        sw_cg(7500 * US, 0, 0, 5, Tier::Lc, A),
    ]
}

#[test]
fn a_preemption_wait_is_not_a_wakeup() {
    // Task 5's wait from 2 to 4 ms, preempted, is not a wakeup; its wait
    // from 7 to 7.5 ms, woken, counts.
    let r = run_cg(cfg(1), 2, &MAP, preempted_then_woken());
    assert_eq!(r.cgroups[0].wakeup_latency, one(500 * US));
    assert_eq!(r.totals.lc_waits, 2, "both are LC waits");
    let t5 = r.tasks.iter().find(|t| t.pid == 5).unwrap();
    assert_eq!(t5.wait_ns, 2500 * US);
}

#[test]
fn which_waits_count() {
    // Window [1 ms, 10 ms) on two CPUs. Counted: 9 (A) woken before the
    // window, in from 1.5 ms (700 us: a wait that ends in the window counts
    // whole); 8 (A/B, so A too) new at 3 ms, in at 3.2 ms (200 us); 5 (A)
    // woken while still switching out at 4 ms, runnable from its switch-out
    // at 4.01 ms, in at 4.11 ms (100 us). Not counted: 7 found queued by the
    // snapshot; 6 woken at 9 ms, in after the window; 4 still waiting at
    // the end.
    let mut c = cfg(2);
    c.window_start = MS;
    let evs = vec![
        queued(10 * US, 7, A),
        Event {
            ts: 30 * US,
            cpu: 0,
            kind: EventKind::InitDone,
        },
        sw_cg(500 * US, 0, 0, 5, Tier::Lc, A),
        waking_cg(800 * US, 9, A),
        sw_cg(1500 * US, 1, 0, 9, Tier::Lc, A),
        sw_cg(2 * MS, 1, 9, 7, Tier::Lc, A),
        new_task(3 * MS, 8, AB),
        sw_cg(3200 * US, 1, 7, 8, Tier::Lc, AB),
        waking_cg(4 * MS, 5, A),
        sw(4010 * US, 0, 5, 0, Tier::Idle),
        sw_cg(4110 * US, 0, 0, 5, Tier::Lc, A),
        waking_cg(9 * MS, 6, A),
        waking_cg(9500 * US, 4, A),
        sw_cg(12 * MS, 0, 5, 6, Tier::Lc, A),
    ];
    let r = run_cg(c, 2, &MAP, evs);
    let a = r.cgroups[0].wakeup_latency;
    assert_eq!(a.n, 3, "{a:?}");
    assert_eq!(a.mean_ns, (700 + 200 + 100) * US / 3);
    assert_eq!(a.max_ns, 700 * US);
    assert_eq!(a.p99_ns, 700 * US, "at most the largest wait");
    // quantiles to 3 significant figures
    assert!(a.p50_ns.abs_diff(200 * US) <= 200, "{a:?}");
    assert_eq!(r.cgroups[1].wakeup_latency, one(200 * US), "A/B: task 8 only");
    assert_eq!(r.diag, Diagnostics::default());
}

#[test]
fn sleep_timer_lateness_counts_per_cgroup_in_the_window() {
    let timer = |ts: u64, pid: Pid, late_ns: u64, cgroup: u64| Event {
        ts,
        cpu: 0,
        kind: EventKind::Timer { pid, late_ns, cgroup },
    };
    let mut c = cfg(1);
    c.window_start = MS;
    let evs = vec![
        sw_cg(0, 0, 0, 1, Tier::Lc, X),
        // before the window: not counted
        timer(MS / 2, 5, 9_000, A),
        timer(2 * MS, 5, 40_000, A),
        timer(3 * MS, 6, 20_000, AB),
        // a task in no requested cgroup
        timer(4 * MS, 7, 70_000, X),
    ];
    let r = run_cg(c, 2, &MAP, evs);
    let a = r.cgroups[0].timer_latency;
    assert_eq!((a.n, a.mean_ns, a.max_ns), (2, 30_000, 40_000), "A holds A/B's timers too");
    assert_eq!(r.cgroups[1].timer_latency, one(20_000), "A/B");
    assert_eq!(r.cgroups[0].wakeup_latency, LatencyStats::default(), "a timer is not a wait");
}

#[test]
fn per_task_wakeup_latency_counts_wakeups_only() {
    // Task 5's one wakeup waited 500 us (its 2 ms wait after a preemption
    // is not one); 6, which only preempted, has none. Without the per-task
    // table nothing is kept.
    let task = |r: &ReplayResult, pid: Pid| r.tasks.iter().find(|t| t.pid == pid).expect("task present").clone();
    let r = run_cg(cfg(1), 2, &MAP, preempted_then_woken());
    assert_eq!(task(&r, 5).wakeup_latency, one(500 * US));
    assert_eq!(task(&r, 6).wakeup_latency, LatencyStats::default());
    let mut c = cfg(1);
    c.per_task = false;
    let r = run_cg(c, 2, &MAP, preempted_then_woken());
    assert_eq!(task(&r, 5).wakeup_latency, LatencyStats::default());
}
