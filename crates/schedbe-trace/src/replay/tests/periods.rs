//! Per-cgroup per-period series (`--period-ms`).

use super::cgroups::run_cg;
use super::*;

/// Cgroup ids of the tests: A is requested cgroup 0; X is in none.
const A: u64 = 10;
const X: u64 = 99;
const MAP: [(u64, CgroupSet); 2] = [(A, 0b1), (X, 0)];

fn row(start_ns: u64, cpu_ns: u64, wait_ns: u64) -> PeriodStats {
    PeriodStats {
        start_ns,
        cpu_ns,
        wait_ns,
    }
}

/// Window [0, 10 ms), periods of 2 ms, one CPU. Task 1 (X) runs to 1 ms,
/// then 5 (A) to 5 ms, 6 (A) to 8.5 ms, 7 (A) to the end; 6 waits from
/// 3 ms, 7 from 3.5 ms.
fn one_cpu() -> Vec<Event> {
    vec![
        sw_cg(0, 0, 0, 1, Tier::Lc, X),
        sw_cg(MS, 0, 1, 5, Tier::Lc, A),
        waking_cg(3 * MS, 6, A),
        waking_cg(3500 * US, 7, A),
        sw_cg(5 * MS, 0, 5, 6, Tier::Lc, A),
        sw_cg(8500 * US, 0, 6, 7, Tier::Lc, A),
    ]
}

fn one_cpu_rows() -> Vec<PeriodStats> {
    vec![
        row(0, MS, 0),
        // 5 runs across 4 ms: 2 ms here, 1 ms in the next period; 6 and 7
        // wait 1 + 0.5 ms here
        row(2 * MS, 2 * MS, 1500 * US),
        row(4 * MS, 2 * MS, 3 * MS),
        row(6 * MS, 2 * MS, 2 * MS),
        row(8 * MS, 2 * MS, 500 * US),
    ]
}

#[test]
fn cpu_and_wait_time_split_at_the_period_boundaries() {
    let mut c = cfg(1);
    c.period_ns = Some(2 * MS);
    let r = run_cg(c, 1, &MAP, one_cpu());
    let g = &r.cgroups[0];
    assert_eq!(g.periods.as_deref(), Some(&one_cpu_rows()[..]));
    let p = g.periods.as_ref().unwrap();
    assert_eq!(p.iter().map(|p| p.cpu_ns).sum::<u64>(), g.lc_ns, "the window is whole periods");
    let waits: u64 = r.tasks.iter().filter(|t| [6, 7].contains(&t.pid)).map(|t| t.wait_ns).sum();
    assert_eq!(p.iter().map(|p| p.wait_ns).sum::<u64>(), waits, "summed over tasks");
}

#[test]
fn no_period_no_series_and_a_request_does_not_count_waits_twice() {
    let r = run_cg(cfg(1), 1, &MAP, one_cpu());
    assert_eq!(r.cgroups[0].periods, None);
    // with a request the waiting tasks were already counted (for the
    // reservation inversion): the same series
    let mut c = cfg(1);
    c.period_ns = Some(2 * MS);
    c.requests = vec![Some(1000)];
    let r = run_cg(c, 1, &MAP, one_cpu());
    assert_eq!(r.cgroups[0].periods.as_deref(), Some(&one_cpu_rows()[..]));
}

#[test]
fn periods_are_aligned_to_the_clock_not_to_the_window() {
    // Window [10.5 ms, 20.5 ms), periods of 2 ms: [12, 14) .. [18, 20); the
    // parts [10.5, 12) and [20, 20.5) are in no period. Task 5 (A) runs on
    // CPU0 from before the window, is preempted at 17 ms (a wait too) and
    // runs on CPU1 from 19.2 ms; 6 (A) runs on CPU1 from 13 to 15.5 ms.
    let mut c = cfg(2);
    (c.window_start, c.window_end) = (10_500 * US, 20_500 * US);
    c.period_ns = Some(2 * MS);
    let evs = vec![
        sw_cg(0, 0, 0, 5, Tier::Lc, A),
        sw_cg(13 * MS, 1, 0, 6, Tier::Lc, A),
        sw(15_500 * US, 1, 6, 0, Tier::Idle),
        preempt_cg(17 * MS, 0, 5, 9, X),
        sw_cg(19_200 * US, 1, 0, 5, Tier::Lc, A),
    ];
    let r = run_cg(c, 1, &MAP, evs);
    let g = &r.cgroups[0];
    assert_eq!(
        g.periods,
        Some(vec![
            row(12 * MS, 3 * MS, 0),
            row(14 * MS, 3500 * US, 0),
            row(16 * MS, MS, MS),
            row(18 * MS, 800 * US, 1200 * US),
        ])
    );
    assert_eq!(g.lc_ns, 10_300 * US, "2 ms of it outside every period");
}

#[test]
fn a_window_with_no_whole_period() {
    let mut c = cfg(1);
    c.window_start = MS;
    c.period_ns = Some(10 * MS);
    let r = run_cg(c, 1, &MAP, one_cpu());
    assert_eq!(r.cgroups[0].periods, Some(vec![]));
    let mut c = cfg(1);
    c.period_ns = Some(10 * MS);
    let r = run_cg(c, 1, &MAP, one_cpu());
    assert_eq!(r.cgroups[0].periods, Some(vec![row(0, 9 * MS, 7 * MS)]), "the window is one period");
}
