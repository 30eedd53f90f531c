//! Task life cycle: racing wakeups, tier and mask changes, the start-up
//! snapshot, window clipping, exits.

use super::*;

#[test]
fn waking_that_races_with_switch_out_starts_wait_at_switch_out() {
    // Task 200 (LC) is on CPU0 going to sleep; the waker's sched_waking
    // lands before its switch-out, the sched_wakeup after it.
    let evs = vec![
        sw(0, 0, 0, 200, Tier::Lc),
        sw(0, 1, 0, 100, Tier::Be),
        waking(MS, 1, 200, Tier::Lc, 0b11),
        sw(MS + US, 0, 200, 1, Tier::Lc), // blocks (prev_state S)
        wakeup(MS + 2 * US, 0, 200),
        sw(3 * MS, 0, 1, 200, Tier::Lc),
    ];
    let r = run(cfg(2), evs);
    assert_eq!(r.totals.lc_waits, 1);
    assert_eq!(r.totals.lc_wait_ns, 2 * MS - US);
    assert_eq!(cpu(&r, 1).inversion_ns, 2 * MS - US - 50 * US);
    assert_eq!(r.diag.wakeups_without_waking, 0);
}

#[test]
fn absorbed_waking_does_not_leave_a_stale_wait() {
    // ttwu_runnable: waking and wakeup while the task is still current;
    // it keeps running and much later blocks for real.
    let evs = vec![
        sw(0, 0, 0, 200, Tier::Lc),
        sw(0, 1, 0, 100, Tier::Be),
        waking(MS, 1, 200, Tier::Lc, 0b11),
        wakeup(MS + US, 1, 200),
        sw(2 * MS, 0, 200, 0, Tier::Idle),
    ];
    let r = run(cfg(2), evs);
    assert_eq!(r.totals.inversion_ns, 0);
    assert_eq!(r.totals.lc_wait_ns, 0);
    assert_eq!(r.lc_waits_open_at_end, 0);
}

#[test]
fn tier_change_of_a_waiting_task_takes_effect() {
    // LC task 200 waits from 1 ms; at 2 ms an event shows it moved to BE.
    let evs = vec![
        sw(0, 0, 0, 1, Tier::Lc),
        sw(0, 1, 0, 100, Tier::Be),
        waking(MS, 0, 200, Tier::Lc, 0b11),
        // e.g. a sched_migrate_task would not carry the tier; a second waking does
        Event {
            ts: 2 * MS,
            cpu: 0,
            kind: EventKind::Waking(wake(200, Tier::Be, 0b11)),
        },
        sw(4 * MS, 0, 1, 200, Tier::Be),
    ];
    let r = run(cfg(2), evs);
    assert_eq!(cpu(&r, 1).inversion_ns, MS - 50 * US);
    assert_eq!(r.totals.lc_waits, 0, "it ended as a BE wait");
}

#[test]
fn wakeup_without_waking_uses_last_known_tier_and_mask() {
    // LC task 200 pinned to CPU0 ran, slept; its waking was not seen.
    let evs = vec![
        sw(0, 1, 0, 100, Tier::Be),
        waking(0, 0, 200, Tier::Lc, 0b01),
        sw(10 * US, 0, 0, 200, Tier::Lc),
        sw(20 * US, 0, 200, 1, Tier::Lc),
        wakeup(MS, 0, 200),
        sw(3 * MS, 0, 1, 200, Tier::Lc),
    ];
    let r = run(cfg(2), evs);
    assert_eq!(r.diag.wakeups_without_waking, 1);
    assert_eq!(r.totals.lc_waits, 2);
    assert_eq!(r.totals.lc_wait_ns, 10 * US + 2 * MS);
    assert_eq!(
        cpu(&r, 1).inversion_ns,
        0,
        "pinned to CPU0: the mask was remembered"
    );
}

#[test]
fn mask_update_while_waiting() {
    // LC waiter pinned to CPU0 gets its affinity widened at 2 ms (migrate event).
    let evs = vec![
        sw(0, 0, 0, 1, Tier::Lc),
        sw(0, 1, 0, 100, Tier::Be),
        waking(MS, 0, 200, Tier::Lc, 0b01),
        Event {
            ts: 2 * MS,
            cpu: 0,
            kind: EventKind::Migrate {
                pid: 200,
                dest: 1,
                mask: CpuMask::Word(0b11),
            },
        },
        sw(4 * MS, 0, 1, 200, Tier::Lc),
    ];
    let r = run(cfg(2), evs);
    assert_eq!(
        cpu(&r, 1).inversion_ns,
        2 * MS,
        "since + grace was long past when CPU1 became allowed"
    );
}

#[test]
fn window_clipping_and_snapshot() {
    // Tracing starts at 0, the window at 1 ms. The snapshot finds a BE
    // task on CPU0 and an LC task already queued; CPU1 is idle (unclaimed).
    let mut c = cfg(2);
    c.window_start = MS;
    c.window_end = 3 * MS;
    let evs = vec![
        Event {
            ts: 10 * US,
            cpu: 0,
            kind: EventKind::InitCurr {
                pid: 100,
                tier: Tier::Be,
                on_cpu: 0,
                cgroup: 0,
            },
        },
        Event {
            ts: 20 * US,
            cpu: 0,
            kind: EventKind::InitRunnable(wake(200, Tier::Lc, 0b01)),
        },
        Event {
            ts: 30 * US,
            cpu: 0,
            kind: EventKind::InitDone,
        },
        preempt(2 * MS, 0, 100, Tier::Be, 0b11, 200, Tier::Lc),
    ];
    let r = run(c, evs);
    let (c0, c1) = (cpu(&r, 0), cpu(&r, 1));
    assert_eq!(c0.cpu_ns, 2 * MS);
    assert_eq!(c1.cpu_ns, 2 * MS);
    assert_eq!(
        c0.inversion_ns, MS,
        "waiting since trace start: the whole window until it runs"
    );
    assert_eq!(c1.idle_while_lc_waits_ns, 0, "pinned to CPU0");
    assert_eq!(c1.idle_ns, 2 * MS);
    assert_eq!(r.totals.lc_waits, 1);
    assert_eq!(r.totals.lc_wait_ns, MS, "clipped to the window");
    assert!(
        (r.lc_wait.max - 2000.0).abs() < 1.0,
        "the sample is the full wait: {:?}",
        r.lc_wait
    );
}

#[test]
fn unknown_cpus_are_not_counted_until_their_first_switch() {
    let evs = vec![sw(4 * MS, 0, 9, 1, Tier::Lc)];
    let r = run(cfg(2), evs);
    assert_eq!(cpu(&r, 0).cpu_ns, 6 * MS);
    assert_eq!(cpu(&r, 1).cpu_ns, 0);
}

#[test]
fn snapshot_does_not_override_real_switches() {
    let evs = vec![
        sw(5 * US, 0, 0, 100, Tier::Be),
        Event {
            ts: 10 * US,
            cpu: 1,
            kind: EventKind::InitCurr {
                pid: 1,
                tier: Tier::Lc,
                on_cpu: 0,
                cgroup: 0,
            },
        },
        Event {
            ts: 20 * US,
            cpu: 1,
            kind: EventKind::InitDone,
        },
    ];
    let r = run(cfg(1), evs);
    assert_eq!(r.totals.be_ns, 10 * MS - 5 * US);
    assert_eq!(r.totals.lc_ns, 0);
}

#[test]
fn open_waits_at_the_end_are_counted() {
    let evs = vec![sw(0, 0, 0, 100, Tier::Be), waking(MS, 0, 200, Tier::Lc, 1)];
    let r = run(cfg(1), evs);
    assert_eq!(r.totals.inversion_ns, 9 * MS - 50 * US);
    assert_eq!(r.totals.lc_wait_ns, 9 * MS);
    assert_eq!(r.totals.lc_waits, 0);
    assert_eq!(r.lc_waits_open_at_end, 1);
}

#[test]
fn earliest_eligible_waiter_wins() {
    // Two LC waiters: an early one pinned elsewhere, a later one allowed here.
    let evs = vec![
        sw(0, 0, 0, 1, Tier::Lc),
        sw(0, 1, 0, 100, Tier::Be),
        waking(MS, 0, 200, Tier::Lc, 0b01),
        waking(2 * MS, 0, 201, Tier::Lc, 0b10),
        sw(3 * MS, 1, 100, 201, Tier::Lc),
    ];
    let r = run(cfg(2), evs);
    assert_eq!(cpu(&r, 1).inversion_ns, MS - 50 * US);
}

#[test]
fn wide_masks_beyond_64_cpus() {
    let mut c = cfg(128);
    c.window_end = 4 * MS;
    let mut m = vec![0u64; 2];
    m[1] = 1 << 6; // CPU 70 only
    let w = Wake {
        pid: 200,
        tier: Tier::Lc,
        mask: CpuMask::from_words(&m),
        task_cpu: 70,
        cgroup: 0,
    };
    let evs = vec![
        sw(0, 69, 0, 100, Tier::Be),
        sw(0, 70, 0, 101, Tier::Be),
        Event {
            ts: MS,
            cpu: 0,
            kind: EventKind::Waking(w),
        },
        preempt(2 * MS, 70, 101, Tier::Be, !0, 200, Tier::Lc),
    ];
    let r = run(c, evs);
    assert_eq!(cpu(&r, 70).inversion_ns, MS - 50 * US);
    assert_eq!(cpu(&r, 69).inversion_ns, 0);
}

#[test]
fn exited_tasks_are_dropped_unless_kept() {
    let dead = |ts| Event {
        ts,
        cpu: 0,
        kind: EventKind::Switch(Switch {
            prev: 5,
            prev_runnable: false,
            prev_dead: true,
            prev_tier: None,
            prev_mask: None,
            next: 0,
            next_tier: Tier::Idle,
            next_cgroup: 0,
        }),
    };
    let evs = vec![sw(0, 0, 0, 5, Tier::Lc), dead(MS)];
    let r = run(cfg(1), evs.clone());
    assert_eq!(r.tasks.len(), 1);
    let mut c = cfg(1);
    c.per_task = false;
    let r = run(c, evs);
    assert!(r.tasks.is_empty());
    assert_eq!(r.totals.lc_ns, MS, "CPU time is kept either way");
}
