//! Per-cgroup CPU concurrency (`--cgroup`).

use super::*;

fn init_curr(ts: u64, pid: Pid, tier: Tier, on_cpu: u32, cg: u64) -> Event {
    Event {
        ts,
        cpu: 0,
        kind: EventKind::InitCurr {
            pid,
            tier,
            on_cpu,
            cgroup: cg,
        },
    }
}

/// Replay `evs` following `n` cgroups, with `map` (cgroup id, set) known up
/// front, and check what holds for every cgroup: the histogram covers the
/// window, ends at `max_cpus`, and adds up to the cgroup's CPU time.
pub(super) fn run_cg(
    mut c: ReplayConfig,
    n: usize,
    map: &[(u64, CgroupSet)],
    evs: Vec<Event>,
) -> ReplayResult {
    c.nr_cgroups = n;
    let window = c.window_end - c.window_start;
    let mut r = Replay::new(c);
    for &(id, set) in map {
        r.map_cgroup(id, set);
    }
    for e in evs {
        r.push(e);
    }
    let r = r.finish();
    assert_eq!(r.cgroups.len(), n);
    for g in &r.cgroups {
        let h = &g.time_at_cpus_ns;
        assert_eq!(h.len(), g.max_cpus as usize + 1, "{g:?}");
        assert!(g.max_cpus == 0 || h[g.max_cpus as usize] > 0, "{g:?}");
        assert_eq!(h.iter().sum::<u64>(), window, "{g:?}");
        let cpu_ns: u64 = h.iter().enumerate().map(|(k, t)| k as u64 * t).sum();
        assert_eq!(cpu_ns, g.lc_ns + g.be_ns + g.other_ns, "{g:?}");
    }
    r
}

#[test]
fn two_tasks_of_one_cgroup_overlapping_on_two_cpus() {
    let evs = vec![
        sw_cg(0, 0, 0, 1, Tier::Lc, 10),
        sw_cg(2 * MS, 1, 0, 2, Tier::Lc, 10),
        sw(5 * MS, 0, 1, 0, Tier::Idle),
        sw(6 * MS, 1, 2, 0, Tier::Idle),
    ];
    let r = run_cg(cfg(2), 1, &[(10, 0b1)], evs);
    let g = &r.cgroups[0];
    assert_eq!(g.max_cpus, 2);
    assert_eq!(g.time_at_cpus_ns, vec![4 * MS, 3 * MS, 3 * MS]);
    assert_eq!(g.lc_ns, 9 * MS);
    assert_eq!((g.be_ns, g.other_ns), (0, 0));
    assert_eq!(r.totals.lc_ns, 9 * MS, "the same time in the CPU figures");
}

#[test]
fn a_hand_over_at_the_same_instant_is_not_an_overlap() {
    // task 2 starts on CPU1 at the very nanosecond task 1 leaves CPU0 (and
    // its event is seen first)
    let evs = vec![
        sw_cg(0, 0, 0, 1, Tier::Lc, 10),
        sw_cg(5 * MS, 1, 0, 2, Tier::Lc, 10),
        sw(5 * MS, 0, 1, 0, Tier::Idle),
    ];
    let r = run_cg(cfg(2), 1, &[(10, 0b1)], evs);
    assert_eq!(r.cgroups[0].max_cpus, 1);
    assert_eq!(r.cgroups[0].time_at_cpus_ns, vec![0, 10 * MS]);
}

#[test]
fn a_descendant_counts_for_its_ancestor() {
    // requested: A (bit 0) and A/B (bit 1); 10 is A, 11 is A/B, 20 is elsewhere
    let map = [(10, 0b01), (11, 0b11), (20, 0)];
    let evs = vec![
        sw_cg(0, 0, 0, 1, Tier::Lc, 11),
        sw_cg(0, 2, 0, 3, Tier::Lc, 20),
        sw_cg(MS, 1, 0, 2, Tier::Be, 10),
        sw(3 * MS, 1, 2, 0, Tier::Idle),
    ];
    let r = run_cg(cfg(3), 2, &map, evs);
    let (a, b) = (&r.cgroups[0], &r.cgroups[1]);
    assert_eq!(a.max_cpus, 2);
    assert_eq!(a.time_at_cpus_ns, vec![0, 8 * MS, 2 * MS]);
    assert_eq!((a.lc_ns, a.be_ns), (10 * MS, 2 * MS));
    assert_eq!(b.max_cpus, 1, "A's own task is not in A/B");
    assert_eq!(b.time_at_cpus_ns, vec![0, 10 * MS]);
    assert_eq!((b.lc_ns, b.be_ns), (10 * MS, 0));
}

#[test]
fn cgroup_figures_are_clipped_to_the_window_and_start_from_the_snapshot() {
    // Window [1 ms, 3 ms). The snapshot finds tasks 5 (LC) and 6 (BE) of the
    // cgroup running on CPUs 0 and 1, and 8 on CPU2; 8 stops before the
    // window (3 CPUs at once, but not in the window), 6 at 1.2 ms, 5 at 2 ms.
    // Task 7 runs on CPU1 from 2.5 ms to past the end.
    let mut c = cfg(3);
    c.window_start = MS;
    c.window_end = 3 * MS;
    let evs = vec![
        init_curr(10 * US, 5, Tier::Lc, 0, 10),
        init_curr(10 * US, 6, Tier::Be, 1, 10),
        init_curr(10 * US, 8, Tier::Lc, 2, 10),
        Event {
            ts: 30 * US,
            cpu: 0,
            kind: EventKind::InitDone,
        },
        sw(500 * US, 2, 8, 0, Tier::Idle),
        sw(1200 * US, 1, 6, 0, Tier::Idle),
        sw(2 * MS, 0, 5, 0, Tier::Idle),
        sw_cg(2500 * US, 1, 0, 7, Tier::Lc, 10),
        sw(5 * MS, 1, 7, 0, Tier::Idle),
    ];
    let r = run_cg(c, 1, &[(10, 0b1)], evs);
    let g = &r.cgroups[0];
    assert_eq!(g.max_cpus, 2);
    assert_eq!(g.time_at_cpus_ns, vec![500 * US, 1300 * US, 200 * US]);
    assert_eq!(g.time_at_cpus_ns.iter().sum::<u64>(), 2 * MS, "the window");
    assert_eq!(g.lc_ns, MS + 500 * US);
    assert_eq!(g.be_ns, 200 * US);
}

#[test]
fn a_task_counts_with_the_cgroup_it_had_when_switched_in() {
    // Task 5 runs in cgroup 10 (bit 0) on CPU0 from 1 ms, is preempted at
    // 2 ms, moved to cgroup 20 (bit 1), and runs there on CPU1 until 4 ms.
    let evs = vec![
        sw(0, 1, 0, 9, Tier::Lc),
        sw_cg(MS, 0, 0, 5, Tier::Lc, 10),
        preempt(2 * MS, 0, 5, Tier::Lc, 0b11, 8, Tier::Lc),
        Event {
            ts: 2 * MS,
            cpu: 1,
            kind: EventKind::Switch(Switch {
                prev: 9,
                prev_runnable: false,
                prev_dead: false,
                prev_tier: None,
                prev_mask: None,
                next: 5,
                next_tier: Tier::Lc,
                next_cgroup: 20,
            }),
        },
        sw(4 * MS, 1, 5, 0, Tier::Idle),
    ];
    let r = run_cg(cfg(2), 2, &[(10, 0b01), (20, 0b10)], evs);
    let (a, b) = (&r.cgroups[0], &r.cgroups[1]);
    assert_eq!((a.max_cpus, a.lc_ns), (1, MS));
    assert_eq!(a.time_at_cpus_ns, vec![9 * MS, MS]);
    assert_eq!((b.max_cpus, b.lc_ns), (1, 2 * MS));
    assert_eq!(b.time_at_cpus_ns, vec![8 * MS, 2 * MS]);
    assert_eq!(r.tasks.iter().find(|t| t.pid == 5).unwrap().run_ns, 3 * MS);
    assert_eq!(r.diag, Diagnostics::default());
}

#[test]
fn unmapped_ids_and_no_cgroups() {
    let evs = vec![sw_cg(0, 0, 0, 1, Tier::Lc, 99)];
    let r = run_cg(cfg(1), 1, &[(10, 0b1)], evs.clone());
    assert_eq!(r.cgroups[0].max_cpus, 0);
    assert_eq!(r.cgroups[0].time_at_cpus_ns, vec![10 * MS]);
    assert_eq!(r.cgroups[0].lc_ns, 0);
    let r = run_cg(cfg(1), 0, &[(99, 0b1)], evs);
    assert!(r.cgroups.is_empty());
    assert_eq!(r.totals.lc_ns, 10 * MS);
}
