//! Reservation inversion between cgroups given with CPU requests.

use super::cgroups::run_cg;
use super::*;

/// Cgroup ids of the tests: A is requested cgroup 0, B 1, C 2; X is in none.
const A: u64 = 10;
const B: u64 = 20;
const C: u64 = 30;
const X: u64 = 99;
const MAP: [(u64, CgroupSet); 4] = [(A, 0b001), (B, 0b010), (C, 0b100), (X, 0)];

/// Replay with the first `requests.len()` cgroups of [`MAP`] requested
/// (milli-CPUs), and check what holds for any figures: a pair's part is at
/// most the total, the total at most the pairs' sum, the longest interval
/// at most the total, and nobody inverts itself.
fn run_res(c: ReplayConfig, requests: &[Option<u64>], evs: Vec<Event>) -> Vec<Option<ReservationStats>> {
    let mut c = c;
    c.requests = requests.to_vec();
    let r = run_cg(c, requests.len(), &MAP, evs);
    let res: Vec<Option<ReservationStats>> = r.cgroups.into_iter().map(|g| g.reservation).collect();
    for (a, s) in res.iter().enumerate() {
        let Some(s) = s else { continue };
        assert_eq!(s.by_ns.len(), requests.len(), "{s:?}");
        assert_eq!(s.by_ns[a], 0, "{s:?}");
        assert!(s.by_ns.iter().all(|&b| b <= s.inversion_ns), "{s:?}");
        assert!(s.inversion_ns <= s.by_ns.iter().sum::<u64>(), "{s:?}");
        assert!(s.longest_ns <= s.inversion_ns, "{s:?}");
    }
    res
}

fn stats(request_milli: u64, inversion_ns: u64, longest_ns: u64, by_ns: &[u64]) -> Option<ReservationStats> {
    Some(ReservationStats {
        request_milli,
        inversion_ns,
        longest_ns,
        by_ns: by_ns.to_vec(),
    })
}

/// A (request 1) waits at 0 CPUs from 2 ms while B (request 2) runs on 3;
/// at 5 ms A's task preempts one of B's: A at 1 (not below), B at 2 (not
/// above, and its preempted task waits, but B is not below either).
fn a_waits_while_b_runs_on_three() -> Vec<Event> {
    vec![
        sw_cg(0, 0, 0, 21, Tier::Lc, B),
        sw_cg(0, 1, 0, 22, Tier::Lc, B),
        sw_cg(0, 2, 0, 23, Tier::Lc, B),
        sw_cg(0, 3, 0, 30, Tier::Lc, X),
        waking_cg(2 * MS, 11, A),
        preempt_cg(5 * MS, 0, 21, 11, A),
    ]
}

#[test]
fn inversion_while_a_waits_at_zero_and_b_runs_above_its_request() {
    let res = run_res(cfg(4), &[Some(1000), Some(2000)], a_waits_while_b_runs_on_three());
    assert_eq!(res[0], stats(1000, 3 * MS, 3 * MS, &[0, 3 * MS]));
    assert_eq!(res[1], stats(2000, 0, 0, &[0, 0]));
}

#[test]
fn reservation_inversion_is_clipped_to_the_window() {
    let mut c = cfg(4);
    c.window_start = 3 * MS;
    c.window_end = 4 * MS;
    let res = run_res(c, &[Some(1000), Some(2000)], a_waits_while_b_runs_on_three());
    assert_eq!(res[0], stats(1000, MS, MS, &[0, MS]));
}

#[test]
fn no_inversion_when_the_one_above_its_request_runs_alone_and_the_other_does_not_wait() {
    // A's task runs on CPU0 until 1 ms, then sleeps for good; B runs on CPU1
    // from 0 and on CPU0 from 1 ms: 2 CPUs for a request of 1, while A is
    // at 0 CPUs of 1 but has nothing waiting.
    let evs = vec![
        sw_cg(0, 0, 0, 11, Tier::Lc, A),
        sw_cg(0, 1, 0, 21, Tier::Lc, B),
        sw_cg(MS, 0, 11, 22, Tier::Lc, B),
    ];
    let res = run_res(cfg(2), &[Some(1000), Some(1000)], evs.clone());
    assert_eq!(res[0], stats(1000, 0, 0, &[0, 0]));
    assert_eq!(res[1], stats(1000, 0, 0, &[0, 0]));
    // the same, and A's task wakes at 8 ms without getting a CPU: 2 ms
    let mut evs = evs;
    evs.push(waking_cg(8 * MS, 11, A));
    let res = run_res(cfg(2), &[Some(1000), Some(1000)], evs);
    assert_eq!(res[0], stats(1000, 2 * MS, 2 * MS, &[0, 2 * MS]));
}

#[test]
fn fractional_requests() {
    // A requests 1.5 CPUs, B 0.5; 3 CPUs.
    // 0: A's 11 on CPU0, B's 21 on CPU1: A at 1 < 1.5 (below, nothing
    //    waits), B at 1 > 0.5 (above).
    // 1 ms: A's 12 wakes: A below and waiting -> inversion of A.
    // 3 ms: 12 runs on CPU2: A at 2 > 1.5 (above), nothing waits.
    // 4 ms: B's 22 wakes: B at 1 is not below 0.5: no inversion.
    // 6 ms: 21 sleeps: B at 0 < 0.5 with 22 waiting, A above -> inversion of B.
    // 7 ms: 11 sleeps, 22 runs on CPU0: B at 1 (above), A at 1 with nothing
    //       waiting: no inversion.
    let evs = vec![
        sw_cg(0, 0, 0, 11, Tier::Lc, A),
        sw_cg(0, 1, 0, 21, Tier::Lc, B),
        waking_cg(MS, 12, A),
        sw_cg(3 * MS, 2, 0, 12, Tier::Lc, A),
        waking_cg(4 * MS, 22, B),
        sw(6 * MS, 1, 21, 0, Tier::Idle),
        sw_cg(7 * MS, 0, 11, 22, Tier::Lc, B),
    ];
    let res = run_res(cfg(3), &[Some(1500), Some(500)], evs);
    assert_eq!(res[0], stats(1500, 2 * MS, 2 * MS, &[0, 2 * MS]));
    assert_eq!(res[1], stats(500, MS, MS, &[MS, 0]));
}

#[test]
fn a_cgroup_without_a_request_is_never_above() {
    // C (no request) runs on all 3 CPUs; A (request 1) waits from 1 ms on;
    // B (request 1) has nothing running.
    let evs = vec![
        sw_cg(0, 0, 0, 31, Tier::Lc, C),
        sw_cg(0, 1, 0, 32, Tier::Lc, C),
        sw_cg(0, 2, 0, 33, Tier::Lc, C),
        waking_cg(MS, 11, A),
    ];
    let res = run_res(cfg(3), &[Some(1000), Some(1000), None], evs);
    assert_eq!(res[0], stats(1000, 0, 0, &[0, 0, 0]));
    assert_eq!(res[1], stats(1000, 0, 0, &[0, 0, 0]));
    assert_eq!(res[2], None, "no request: no figures");
}

#[test]
fn a_preempted_task_waits_in_the_cgroup_it_ran_in() {
    // A (request 2) runs 11 and 12 on CPUs 0-1, B (request 1) 21 on CPU2.
    // At 2 ms B's 22 wakes and preempts 11 on CPU0 (the switch carries no
    // cgroup for 11: it waits in A, where it ran). At 5 ms 22 sleeps and 11
    // runs again.
    let evs = vec![
        sw_cg(0, 0, 0, 11, Tier::Lc, A),
        sw_cg(0, 1, 0, 12, Tier::Lc, A),
        sw_cg(0, 2, 0, 21, Tier::Lc, B),
        waking_cg(2 * MS, 22, B),
        preempt_cg(2 * MS, 0, 11, 22, B),
        sw_cg(5 * MS, 0, 22, 11, Tier::Lc, A),
    ];
    let res = run_res(cfg(3), &[Some(2000), Some(1000)], evs);
    assert_eq!(res[0], stats(2000, 3 * MS, 3 * MS, &[0, 3 * MS]));
    assert_eq!(res[1], stats(1000, 0, 0, &[0, 0]));
}

#[test]
fn longest_interval_and_two_cgroups_above() {
    // A (request 1) has 11 waiting from 0 to the end. B and C (request 1
    // each): B's 21, 22 on CPUs 0-1 and C's 31 on CPU2 from 0; X on CPU3.
    // 4 ms: C's 32 replaces B's 22 on CPU1 (B 1, C 2): the zero-length
    //       break does not end A's interval.
    // 7 ms: C's 31 sleeps (C 1): A's interval ends, 7 ms long.
    // 8 ms: B's 23 runs on CPU2 (B 2): inverted again until the end, 2 ms.
    let evs = vec![
        sw_cg(0, 0, 0, 21, Tier::Lc, B),
        sw_cg(0, 1, 0, 22, Tier::Lc, B),
        sw_cg(0, 2, 0, 31, Tier::Lc, C),
        sw_cg(0, 3, 0, 90, Tier::Lc, X),
        waking_cg(0, 11, A),
        sw_cg(4 * MS, 1, 22, 32, Tier::Lc, C),
        sw(7 * MS, 2, 31, 0, Tier::Idle),
        sw_cg(8 * MS, 2, 0, 23, Tier::Lc, B),
    ];
    let res = run_res(cfg(4), &[Some(1000), Some(1000), Some(1000)], evs);
    assert_eq!(res[0], stats(1000, 9 * MS, 7 * MS, &[0, 6 * MS, 3 * MS]));
    assert_eq!(res[1], stats(1000, 0, 0, &[0, 0, 0]));
    assert_eq!(res[2], stats(1000, 0, 0, &[0, 0, 0]));
}

#[test]
fn a_waiting_task_seen_in_another_cgroup_moves_its_wait() {
    // B (request 1) runs on both CPUs. A's 11 wakes at 1 ms in A; at 3 ms a
    // waking reports it in B (moved while it waited): A no longer waits.
    let evs = vec![
        sw_cg(0, 0, 0, 21, Tier::Lc, B),
        sw_cg(0, 1, 0, 22, Tier::Lc, B),
        waking_cg(MS, 11, A),
        waking_cg(3 * MS, 11, B),
    ];
    let res = run_res(cfg(2), &[Some(1000), Some(1000)], evs);
    assert_eq!(res[0], stats(1000, 2 * MS, 2 * MS, &[0, 2 * MS]));
    assert_eq!(res[1], stats(1000, 0, 0, &[0, 0]), "B waits, but is not below");
}

#[test]
fn snapshot_tasks_count() {
    // The snapshot finds B's 21, 22 running on both CPUs and A's 11 queued:
    // inversion from the window's start.
    let init_runnable = Event {
        ts: 10 * US,
        cpu: 0,
        kind: EventKind::InitRunnable(Wake {
            pid: 11,
            tier: Tier::Lc,
            mask: CpuMask::ALL,
            task_cpu: 0,
            cgroup: A,
        }),
    };
    let init_curr = |pid, on_cpu| Event {
        ts: 10 * US,
        cpu: 0,
        kind: EventKind::InitCurr {
            pid,
            tier: Tier::Lc,
            on_cpu,
            cgroup: B,
        },
    };
    let mut c = cfg(2);
    c.window_start = MS;
    let evs = vec![init_curr(21, 0), init_curr(22, 1), init_runnable, sw_cg(4 * MS, 0, 21, 11, Tier::Lc, A)];
    let res = run_res(c, &[Some(1000), Some(1000)], evs);
    assert_eq!(res[0], stats(1000, 3 * MS, 3 * MS, &[0, 3 * MS]));
}

#[test]
fn without_requests_nothing_is_tracked() {
    let r = run_cg(cfg(4), 2, &MAP, a_waits_while_b_runs_on_three());
    assert!(r.cgroups.iter().all(|g| g.reservation.is_none()));
}
