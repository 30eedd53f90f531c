//! CPU budgets (`--budget`) and the over-budget inversion.

use super::cgroups::run_cg;
use super::*;

/// Cgroup ids of the tests: X is requested cgroup 0, Y 1, Z 2; O is in none.
const X: u64 = 10;
const Y: u64 = 20;
const Z: u64 = 30;
const O: u64 = 99;
const MAP: [(u64, CgroupSet); 4] = [(X, 0b001), (Y, 0b010), (Z, 0b100), (O, 0)];

/// `c` ns of budget per `t` ns.
fn spec(c: u64, t: u64) -> Option<BudgetSpec> {
    Some(BudgetSpec {
        budget_ns: c,
        period_ns: t,
    })
}

/// Replay with the first `budgets.len()` cgroups of [`MAP`] budgeted as
/// given (Z never is), and check what holds for any figures: the total is
/// the sum over the others, nobody inverts itself, the longest interval is
/// at most the total.
fn run_budget(
    c: ReplayConfig,
    budgets: &[Option<BudgetSpec>],
    evs: Vec<Event>,
) -> Vec<Option<BudgetStats>> {
    let mut c = c;
    c.budgets = budgets.to_vec();
    let r = run_cg(c, 3, &MAP, evs);
    let res: Vec<Option<BudgetStats>> = r.cgroups.into_iter().map(|g| g.budget).collect();
    for (x, s) in res.iter().enumerate() {
        let Some(s) = s else { continue };
        assert_eq!(s.by_ns.len(), 3, "{s:?}");
        assert_eq!(s.by_ns[x], 0, "{s:?}");
        assert_eq!(s.by_ns[2], 0, "Z has no budget: {s:?}");
        assert_eq!(
            s.over_budget_while_waiting_ns,
            s.by_ns.iter().sum::<u64>(),
            "{s:?}"
        );
        assert!(s.longest_ns <= s.over_budget_while_waiting_ns, "{s:?}");
        assert!(s.periods_over <= s.periods, "{s:?}");
    }
    assert_eq!(res[2], None, "Z has no budget");
    res
}

/// The inversion figures of `s`: (total, by Y, longest).
fn inv(s: &Option<BudgetStats>) -> (u64, u64, u64) {
    let s = s.as_ref().expect("budgeted");
    (s.over_budget_while_waiting_ns, s.by_ns[1], s.longest_ns)
}

/// One CPU. X's task 11 runs from the period's start (0) to 8 ms; Y's task
/// 21 waits from `y_wakes` to 8 ms, then runs to 9 ms. Also waiting, and
/// not counting: Z's task 31 (no budget) from 1 ms, X's own task 12 from
/// 6 ms.
fn x_runs_while_y_waits(y_wakes: u64) -> Vec<Event> {
    vec![
        sw_cg(0, 0, 0, 11, Tier::Lc, X),
        waking_cg(MS, 31, Z),
        waking_cg(y_wakes, 21, Y),
        waking_cg(6 * MS, 12, X),
        sw_cg(8 * MS, 0, 11, 21, Tier::Lc, Y),
        sw(9 * MS, 0, 21, 0, Tier::Idle),
    ]
}

#[test]
fn over_budget_while_another_under_budget_waits() {
    // X reaches its 5 ms at 5 ms: from then to 8 ms, Y waits
    let mut c = cfg(1);
    c.grace_ns = 0;
    let res = run_budget(
        c,
        &[spec(5 * MS, 100 * MS), spec(10 * MS, 100 * MS)],
        x_runs_while_y_waits(2 * MS),
    );
    assert_eq!(inv(&res[0]), (3 * MS, 3 * MS, 3 * MS));
    assert_eq!(inv(&res[1]), (0, 0, 0), "Y is never over");
    let x = res[0].as_ref().unwrap();
    assert_eq!((x.budget_ns, x.period_ns), (5 * MS, 100 * MS));
    assert_eq!(x.periods, 0, "no whole period of 100 ms in a window of 10");
    // without a budget for Y: nothing to invert against
    let mut c = cfg(1);
    c.grace_ns = 0;
    let res = run_budget(c, &[spec(5 * MS, 100 * MS)], x_runs_while_y_waits(2 * MS));
    assert_eq!(inv(&res[0]), (0, 0, 0));
    assert_eq!(res[1], None);
    // no budget at all
    let r = run_cg(cfg(1), 3, &MAP, x_runs_while_y_waits(2 * MS));
    assert!(r.cgroups.iter().all(|g| g.budget.is_none()));
}

/// [`x_runs_while_y_waits`] with Y's task 22 on CPU1 from 0 to 8 ms.
fn y_runs_too() -> Vec<Event> {
    let mut evs = x_runs_while_y_waits(2 * MS);
    evs.insert(1, sw_cg(0, 1, 0, 22, Tier::Lc, Y));
    evs.push(sw_cg(8 * MS, 1, 22, 91, Tier::Lc, O));
    evs
}

#[test]
fn no_inversion_against_a_cgroup_over_its_own_budget() {
    let mut c = cfg(2);
    c.grace_ns = 0;
    // Y has used 4 ms of 4 at 4 ms, before X is over
    let res = run_budget(
        c.clone(),
        &[spec(5 * MS, 100 * MS), spec(4 * MS, 100 * MS)],
        y_runs_too(),
    );
    assert_eq!(inv(&res[0]), (0, 0, 0));
    // Y reaches 6 ms at 6 ms: [5, 6) counts, found between events
    let res = run_budget(
        c,
        &[spec(5 * MS, 100 * MS), spec(6 * MS, 100 * MS)],
        y_runs_too(),
    );
    assert_eq!(inv(&res[0]), (MS, MS, MS));
    assert_eq!(inv(&res[1]), (0, 0, 0), "X never waits");
}

#[test]
fn usage_is_summed_over_cpus_the_inversion_is_wall_time() {
    // X runs on CPU0 and CPU1 from 0 to 8 ms: 5 ms used at 2.5 ms
    let mut c = cfg(2);
    c.grace_ns = 0;
    let mut evs = x_runs_while_y_waits(2 * MS);
    evs.insert(1, sw_cg(0, 1, 0, 13, Tier::Lc, X));
    evs.push(sw(8 * MS, 1, 13, 0, Tier::Idle));
    let res = run_budget(c, &[spec(5 * MS, 100 * MS), spec(10 * MS, 100 * MS)], evs);
    assert_eq!(inv(&res[0]), (5500 * US, 5500 * US, 5500 * US));
}

#[test]
fn a_wait_counts_once_it_exceeds_the_grace() {
    // Y wakes at 4.5 ms; X reaches its budget at 5 ms and runs to 8 ms. With
    // a grace g, X counts as over from 5 ms + g and Y's wait from 4.5 ms + g.
    let budgets = [spec(5 * MS, 100 * MS), spec(10 * MS, 100 * MS)];
    for (grace, want) in [(0, 3 * MS), (MS, 2 * MS), (2 * MS, MS), (3 * MS, 0), (4 * MS, 0)] {
        let mut c = cfg(1);
        c.grace_ns = grace;
        let res = run_budget(c, &budgets, x_runs_while_y_waits(4500 * US));
        assert_eq!(inv(&res[0]), (want, want, want), "grace {grace}");
    }
}

#[test]
fn a_period_boundary_resets_the_usage() {
    // Periods of 10 ms, window [0, 30 ms). X runs from 2 to 16 ms: over
    // from 7 ms, under again from 10 ms (a new period), over from 15 ms.
    // Y waits from 8 to 16 ms: inversion [8, 10) and [15, 16).
    let mut c = cfg(1);
    c.grace_ns = 0;
    c.window_end = 30 * MS;
    let evs = vec![
        sw_cg(2 * MS, 0, 0, 11, Tier::Lc, X),
        waking_cg(8 * MS, 21, Y),
        sw_cg(16 * MS, 0, 11, 21, Tier::Lc, Y),
        sw(18 * MS, 0, 21, 0, Tier::Idle),
    ];
    let res = run_budget(c, &[spec(5 * MS, 10 * MS), spec(5 * MS, 10 * MS)], evs);
    assert_eq!(inv(&res[0]), (3 * MS, 3 * MS, 2 * MS));
    let x = res[0].as_ref().unwrap();
    // 8 ms in [0, 10), 6 ms in [10, 20), none in [20, 30)
    assert_eq!(
        (x.periods, x.periods_over, x.max_period_ns, x.over_budget_ns),
        (3, 2, 8 * MS, 4 * MS)
    );
    let y = res[1].as_ref().unwrap();
    assert_eq!(
        (y.periods, y.periods_over, y.max_period_ns, y.over_budget_ns),
        (3, 0, 2 * MS, 0)
    );
    assert_eq!(inv(&res[1]), (0, 0, 0));
}

#[test]
fn whole_periods_over_the_budget() {
    // Budget 2 ms per 4 ms; X's CPU time per period: [0, 4) 3 ms, [4, 8)
    // 2.04 ms (over by less than the 50 us grace), [8, 12) 1 ms, [12, 16)
    // none, [16, 20) 4 ms (running at the window's end).
    let evs = vec![
        sw_cg(0, 0, 0, 11, Tier::Lc, X),
        sw(3 * MS, 0, 11, 0, Tier::Idle),
        sw_cg(4 * MS, 0, 0, 11, Tier::Lc, X),
        sw(6040 * US, 0, 11, 0, Tier::Idle),
        sw_cg(8 * MS, 0, 0, 11, Tier::Lc, X),
        sw(9 * MS, 0, 11, 0, Tier::Idle),
        sw_cg(16 * MS, 0, 0, 11, Tier::Lc, X),
    ];
    let budgets = [spec(2 * MS, 4 * MS)];
    let mut c = cfg(1);
    c.window_end = 20 * MS;
    let x = run_budget(c.clone(), &budgets, evs.clone())[0]
        .clone()
        .unwrap();
    assert_eq!((x.periods, x.periods_over, x.max_period_ns), (5, 2, 4 * MS));
    assert_eq!(x.over_budget_ns, MS + 40 * US + 2 * MS);
    // window [1 ms, 20 ms): [0, 4) is not a whole period in it
    c.window_start = MS;
    let x = run_budget(c, &budgets, evs)[0].clone().unwrap();
    assert_eq!((x.periods, x.periods_over, x.max_period_ns), (4, 1, 4 * MS));
    assert_eq!(x.over_budget_ns, 40 * US + 2 * MS);
}

#[test]
fn over_budget_inversion_is_clipped_to_the_window() {
    let mut c = cfg(1);
    c.grace_ns = 0;
    c.window_start = 6 * MS;
    c.window_end = 7500 * US;
    let res = run_budget(
        c,
        &[spec(5 * MS, 100 * MS), spec(10 * MS, 100 * MS)],
        x_runs_while_y_waits(2 * MS),
    );
    assert_eq!(inv(&res[0]), (1500 * US, 1500 * US, 1500 * US));
}

#[test]
fn the_total_sums_the_others_the_longest_spans_them() {
    // X over from 5 to 8 ms on CPU0; Y waits from 2 to 7 ms (then runs on
    // CPU1), Z from 6 to 8 ms: [5, 7) against Y, [6, 8) against Z.
    let mut c = cfg(2);
    c.grace_ns = 0;
    c.budgets = vec![
        spec(5 * MS, 100 * MS),
        spec(10 * MS, 100 * MS),
        spec(10 * MS, 100 * MS),
    ];
    let evs = vec![
        sw_cg(0, 0, 0, 11, Tier::Lc, X),
        sw_cg(0, 1, 0, 91, Tier::Lc, O),
        waking_cg(2 * MS, 21, Y),
        waking_cg(6 * MS, 31, Z),
        sw_cg(7 * MS, 1, 91, 21, Tier::Lc, Y),
        sw_cg(8 * MS, 0, 11, 31, Tier::Lc, Z),
    ];
    let r = run_cg(c, 3, &MAP, evs);
    let x = r.cgroups[0].budget.as_ref().unwrap();
    assert_eq!(x.by_ns, vec![0, 2 * MS, 2 * MS]);
    assert_eq!(
        (x.over_budget_while_waiting_ns, x.longest_ns),
        (4 * MS, 3 * MS)
    );
}

/// CPU `cpu` absent for the `ns` before `ts`, as the BPF side reports it.
fn absent(ts: u64, cpu: u32, ns: u64) -> Event {
    Event {
        ts,
        cpu,
        kind: EventKind::Absent { ns },
    }
}

#[test]
fn an_absent_cpu_does_not_run_its_task_for_the_budget() {
    // X (5 ms budget) runs on CPU0 from 0 to 8 ms while Y waits from 2 ms,
    // but CPU0 is absent from 4 to 7 ms: X reaches 5 ms at 8 ms, no inversion
    let budgets = [spec(5 * MS, 100 * MS), spec(10 * MS, 100 * MS)];
    let mut evs = x_runs_while_y_waits(2 * MS);
    evs.insert(4, absent(7 * MS, 0, 3 * MS));
    let mut c = cfg(1);
    c.grace_ns = 0;
    c.reorder_ns = 10 * MS;
    let mut c3 = c.clone();
    c3.budgets = budgets.to_vec();
    let r = run_cg(c3, 3, &MAP, evs.clone());
    assert_eq!(inv(&r.cgroups[0].budget), (0, 0, 0));
    assert_eq!((cpu(&r, 0).absent_ns, cpu(&r, 0).absences), (3 * MS, 1));
    assert_eq!(r.totals.absent_ns, 3 * MS);
    assert_eq!(r.diag.absences_cut, 0);
    // everything else still counts the CPU as X's
    assert_eq!(r.cgroups[0].lc_ns, 8 * MS);
    assert_eq!(cpu(&r, 0).lc_ns, 9 * MS);

    // the same absence 1 ms longer (from 3 ms): X reaches 5 ms at 9 ms, off the CPU by then
    let mut longer = evs.clone();
    longer[4] = absent(7 * MS, 0, 4 * MS);
    assert_eq!(inv(&run_budget(c.clone(), &budgets, longer)[0]), (0, 0, 0));

    // an absence shorter than the overrun takes only its own part: 4-5 ms
    // absent, X over from 6 ms, inversion [6, 8)
    let mut short = evs.clone();
    short[4] = absent(5 * MS, 0, MS);
    short.swap(3, 4); // 5 ms comes before X's own waking at 6 ms
    assert_eq!(inv(&run_budget(c.clone(), &budgets, short)[0]), (2 * MS, 2 * MS, 2 * MS));

    // with a reorder window of 1 ms, the replay has released the events up
    // to 2 ms when an absence of 5.5 ms is reported at 7 ms: it counts from
    // 2 ms, and is said to be cut (X: 3 ms used by 8 ms)
    c.reorder_ns = MS;
    let mut cut = evs;
    cut[4] = absent(7 * MS, 0, 5500 * US);
    let mut c3 = c.clone();
    c3.budgets = budgets.to_vec();
    let r = run_cg(c3, 3, &MAP, cut);
    assert_eq!(inv(&r.cgroups[0].budget), (0, 0, 0));
    assert_eq!((cpu(&r, 0).absent_ns, r.diag.absences_cut), (5 * MS, 1));
}

#[test]
fn an_absence_on_an_idle_or_other_cpu_leaves_the_budget_alone() {
    // CPU1 (idle, then O's task) absent: X's inversion [5, 8) is unchanged
    let mut evs = x_runs_while_y_waits(2 * MS);
    evs.insert(1, sw_cg(0, 1, 0, 91, Tier::Lc, O));
    evs.insert(5, absent(7 * MS, 1, 3 * MS));
    let mut c = cfg(2);
    c.grace_ns = 0;
    c.reorder_ns = 10 * MS;
    let res = run_budget(c, &[spec(5 * MS, 100 * MS), spec(10 * MS, 100 * MS)], evs);
    assert_eq!(inv(&res[0]), (3 * MS, 3 * MS, 3 * MS));
}
