//! Inversion, idle-while-LC-waits and LC wait accounting.

use super::*;

#[test]
fn cpu_mask_contains() {
    assert!(CpuMask::Word(0b10).contains(1));
    assert!(!CpuMask::Word(0b10).contains(0));
    assert!(
        CpuMask::Word(0).contains(64),
        "CPUs past the words are allowed"
    );
    let w = CpuMask::from_words(&[0, 1 << 6]);
    assert!(w.contains(70) && !w.contains(69) && !w.contains(6) && w.contains(200));
    assert_eq!(CpuMask::from_words(&[]), CpuMask::ALL);
}

#[test]
fn inversion_accrues_only_after_grace() {
    // CPU0: BE task 100 from 0; LC task 200 wakes at 1 ms and runs at
    // 1.03 ms (within grace: no inversion), then sleeps; wakes at 2 ms,
    // runs at 2.2 ms: 150 us of inversion.
    let evs = vec![
        sw(0, 0, 0, 100, Tier::Be),
        waking(MS, 1, 200, Tier::Lc, 1),
        preempt(MS + 30 * US, 0, 100, Tier::Be, 1, 200, Tier::Lc),
        sw(MS + 40 * US, 0, 200, 100, Tier::Be),
        waking(2 * MS, 1, 200, Tier::Lc, 1),
        preempt(2 * MS + 200 * US, 0, 100, Tier::Be, 1, 200, Tier::Lc),
        sw(3 * MS, 0, 200, 100, Tier::Be),
    ];
    let mut c = cfg(1);
    c.window_end = 4 * MS;
    let r = run(c, evs);
    let s = cpu(&r, 0);
    assert_eq!(s.inversion_ns, 150 * US);
    assert_eq!(s.idle_while_lc_waits_ns, 0);
    assert_eq!(s.cpu_ns, 4 * MS);
    assert_eq!(s.lc_ns, 10 * US + 800 * US);
    assert_eq!(s.be_ns, 4 * MS - 810 * US);
    assert_eq!(s.lc_waits, 2);
    assert_eq!(s.lc_wait_ns, 230 * US);
    assert_eq!(r.lc_wait.count, 2);
    assert!((r.lc_wait.max - 200.0).abs() < 0.5, "{:?}", r.lc_wait);
    assert!((r.lc_wait.mean - 115.0).abs() < 0.5, "{:?}", r.lc_wait);
    // the preempted BE task's waits are not LC waits but are in the task table
    let be = r.tasks.iter().find(|t| t.pid == 100).unwrap();
    assert_eq!(be.wait_ns, 10 * US + 800 * US);
    assert_eq!(be.tier, Some(Tier::Be));
    assert_eq!(r.diag, Diagnostics::default());
}

#[test]
fn inversion_by_grace_period() {
    // BE on CPU0 while LC 200 waits 1 ms..1.3 ms and 2 ms..4 ms.
    let evs = vec![
        sw(0, 0, 0, 100, Tier::Be),
        waking(MS, 0, 200, Tier::Lc, 1),
        preempt(MS + 300 * US, 0, 100, Tier::Be, 1, 200, Tier::Lc),
        sw(MS + 400 * US, 0, 200, 100, Tier::Be),
        waking(2 * MS, 0, 200, Tier::Lc, 1),
        preempt(4 * MS, 0, 100, Tier::Be, 1, 200, Tier::Lc),
    ];
    let mut c = cfg(1);
    c.extra_graces_ns = vec![0, 50 * US, 500 * US, 5 * MS];
    c.window_end = 5 * MS;
    let r = run(c, evs);
    assert_eq!(
        r.inversion_by_grace,
        vec![
            (0, 2300 * US),
            (50 * US, 2200 * US),
            (500 * US, 1500 * US),
            (5 * MS, 0)
        ]
    );
    assert_eq!(r.totals.inversion_ns, 2200 * US, "the headline grace agrees");
}

#[test]
fn grace_zero_counts_every_waiting_instant() {
    let evs = vec![
        sw(0, 0, 0, 100, Tier::Be),
        waking(MS, 0, 200, Tier::Lc, 1),
        preempt(MS + 30 * US, 0, 100, Tier::Be, 1, 200, Tier::Lc),
    ];
    let mut c = cfg(1);
    c.grace_ns = 0;
    c.window_end = 2 * MS;
    let r = run(c, evs);
    assert_eq!(r.totals.inversion_ns, 30 * US);
}

#[test]
fn inversion_needs_the_waiter_allowed_on_that_cpu() {
    // CPU0 busy with LC task 1; CPU1 runs BE task 100. LC task 200 waits
    // 1 ms..3 ms and then runs on CPU0.
    let mk = |mask: u64| {
        vec![
            sw(0, 0, 0, 1, Tier::Lc),
            sw(0, 1, 0, 100, Tier::Be),
            waking(MS, 0, 200, Tier::Lc, mask),
            sw(3 * MS, 0, 1, 200, Tier::Lc),
        ]
    };
    let r = run(cfg(2), mk(0b01));
    assert_eq!(
        r.totals.inversion_ns, 0,
        "waiter pinned to CPU0 cannot use CPU1"
    );
    assert_eq!(r.totals.lc_wait_ns, 2 * MS);
    let r = run(cfg(2), mk(0b11));
    assert_eq!(cpu(&r, 1).inversion_ns, 2 * MS - 50 * US);
    assert_eq!(
        cpu(&r, 0).inversion_ns,
        0,
        "CPU0 runs LC: contention, not inversion"
    );
    assert_eq!(r.totals.lc_waits, 1);
    assert_eq!(
        cpu(&r, 0).lc_waits,
        1,
        "the wait is attributed to the CPU it ended on"
    );
}

#[test]
fn inversion_is_charged_to_the_waiter_and_to_where_it_is_queued() {
    // CPU0 runs BE task 100, CPU1 runs BE task 101. LC task 200 (allowed
    // on both) is woken at 1 ms onto CPU1's runqueue and runs there at
    // 1.3 ms. Both CPUs ran BE for 250 us past the grace period: CPU1 is
    // where 200 waited to be switched in, CPU0 ran BE while 200 sat on
    // another CPU's queue.
    let evs = vec![
        sw(0, 0, 0, 100, Tier::Be),
        sw(0, 1, 0, 101, Tier::Be),
        waking_onto(MS, 200, 0b11, 1),
        preempt(MS + 300 * US, 1, 101, Tier::Be, 0b11, 200, Tier::Lc),
    ];
    let mut c = cfg(2);
    c.window_end = 2 * MS;
    let r = run(c, evs);
    let (c0, c1) = (cpu(&r, 0), cpu(&r, 1));
    assert_eq!(c0.inversion_ns, 250 * US);
    assert_eq!(c0.inversion_elsewhere_ns, 250 * US, "200 was queued on CPU1");
    assert_eq!(c1.inversion_ns, 250 * US);
    assert_eq!(c1.inversion_elsewhere_ns, 0, "200 was queued on CPU1 itself");
    assert_eq!(r.totals.inversion_elsewhere_ns, 250 * US);
    let t = r.tasks.iter().find(|t| t.pid == 200).unwrap();
    assert_eq!(t.inversion_ns, 500 * US, "both CPUs' inversion is charged to 200");
    assert_eq!(r.tasks.iter().find(|t| t.pid == 100).unwrap().inversion_ns, 0);
}

#[test]
fn a_migration_moves_where_the_waiter_is_queued() {
    // 200 wakes onto CPU1's queue at 1 ms, is migrated to CPU0's queue at
    // 1.1 ms and runs on CPU0 at 1.2 ms. CPU0's inversion (1.05..1.2 ms)
    // is "elsewhere" until the migration, then local.
    let evs = vec![
        sw(0, 0, 0, 100, Tier::Be),
        sw(0, 1, 0, 1, Tier::Lc),
        waking_onto(MS, 200, 0b11, 1),
        Event {
            ts: MS + 100 * US,
            cpu: 0,
            kind: EventKind::Migrate {
                pid: 200,
                dest: 0,
                mask: CpuMask::Word(0b11),
            },
        },
        preempt(MS + 200 * US, 0, 100, Tier::Be, 0b11, 200, Tier::Lc),
    ];
    let mut c = cfg(2);
    c.window_end = 2 * MS;
    let r = run(c, evs);
    let c0 = cpu(&r, 0);
    assert_eq!(c0.inversion_ns, 150 * US);
    assert_eq!(c0.inversion_elsewhere_ns, 50 * US);
}

#[test]
fn idle_while_lc_waits_is_separate_from_inversion() {
    let evs = vec![
        sw(0, 0, 0, 1, Tier::Lc),
        sw(0, 1, 5, 0, Tier::Idle), // CPU1 goes idle
        waking(MS, 0, 200, Tier::Lc, 0b11),
        sw(2 * MS, 0, 1, 200, Tier::Lc),
    ];
    let r = run(cfg(2), evs);
    assert_eq!(cpu(&r, 1).idle_while_lc_waits_ns, MS - 50 * US);
    assert_eq!(cpu(&r, 1).idle_ns, 10 * MS);
    assert_eq!(r.totals.inversion_ns, 0);
}

#[test]
fn preemption_makes_a_task_wait_and_blocking_does_not() {
    // LC task 1 preempted by BE task 100 at 1 ms, back at 2 ms.
    let evs = vec![
        sw(0, 0, 0, 1, Tier::Lc),
        preempt(MS, 0, 1, Tier::Lc, 1, 100, Tier::Be),
        preempt(2 * MS, 0, 100, Tier::Be, 1, 1, Tier::Lc),
    ];
    let r = run(cfg(1), evs);
    assert_eq!(r.totals.inversion_ns, MS - 50 * US);
    assert_eq!(r.totals.lc_waits, 1);
    // same, but task 1 blocks instead of being preempted
    let evs = vec![
        sw(0, 0, 0, 1, Tier::Lc),
        sw(MS, 0, 1, 100, Tier::Be),
        preempt(2 * MS, 0, 100, Tier::Be, 1, 1, Tier::Lc),
    ];
    let r = run(cfg(1), evs);
    assert_eq!(r.totals.inversion_ns, 0);
    assert_eq!(r.totals.lc_waits, 0, "switched in without having waited");
}

#[test]
fn other_tier_and_be_waiters_never_count() {
    // CPU0 runs an RT task while an LC task waits: not an inversion.
    // CPU1 runs BE while only a BE task waits: not an inversion either.
    let evs = vec![
        sw(0, 0, 0, 7, Tier::Other),
        sw(0, 1, 0, 100, Tier::Be),
        waking(MS, 0, 200, Tier::Lc, 0b01),
        waking(MS, 1, 101, Tier::Be, 0b11),
        sw(5 * MS, 0, 7, 200, Tier::Lc),
    ];
    let r = run(cfg(2), evs);
    assert_eq!(r.totals.inversion_ns, 0);
    assert_eq!(r.totals.idle_while_lc_waits_ns, 0);
    let t = r.totals;
    assert_eq!(t.other_ns, 5 * MS);
    assert_eq!(t.cpu_ns, t.lc_ns + t.be_ns + t.idle_ns + t.other_ns);
    assert_eq!(t.cpu_ns, 20 * MS);
    assert_eq!(r.lc_waits_open_at_end, 0);
    // the BE waiter is still waiting at the end: only in the task table
    assert_eq!(
        r.tasks.iter().find(|t| t.pid == 101).unwrap().wait_ns,
        9 * MS
    );
}

#[test]
fn out_of_order_events_are_sorted() {
    let evs = vec![
        sw(0, 0, 0, 1, Tier::Lc),
        sw(0, 1, 0, 100, Tier::Be),
        waking(MS, 0, 200, Tier::Lc, 0b11),
        sw(3 * MS, 0, 1, 200, Tier::Lc),
        sw(4 * MS, 1, 100, 0, Tier::Idle),
        waking(5 * MS, 0, 201, Tier::Lc, 0b11),
        sw(6 * MS, 1, 0, 201, Tier::Lc),
    ];
    let sorted = run(cfg(2), evs.clone());
    let mut shuffled = evs.clone();
    shuffled.swap(2, 3);
    shuffled.swap(4, 6);
    shuffled.reverse();
    let mut c = cfg(2);
    c.reorder_ns = 10 * MS;
    let r = run(c, shuffled.clone());
    assert_eq!(r.totals, sorted.totals);
    assert_eq!(r.diag.late_events, 0);
    assert_eq!(sorted.totals.inversion_ns, 2 * MS - 50 * US);
    assert_eq!(sorted.totals.idle_while_lc_waits_ns, MS - 50 * US);
    // with a reorder window too small to absorb it, the late events are counted
    let mut c = cfg(2);
    c.reorder_ns = 0;
    let r = run(c, shuffled);
    assert!(r.diag.late_events > 0);
}

