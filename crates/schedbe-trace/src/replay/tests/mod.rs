//! Unit tests of the replay on synthetic event sequences.

use super::*;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn cfg(n: usize) -> ReplayConfig {
    ReplayConfig {
        nr_cpus: n,
        online: (0..n as u32).collect(),
        grace_ns: 50 * US,
        extra_graces_ns: vec![],
        window_start: 0,
        window_end: 10 * MS,
        trace_start: 0,
        reorder_ns: MS,
        per_task: true,
        nr_cgroups: 0,
        requests: vec![],
        timeline: None,
        period_ns: None,
        budgets: vec![],
    }
}

fn sw(ts: u64, cpu: u32, prev: Pid, next: Pid, next_tier: Tier) -> Event {
    Event {
        ts,
        cpu,
        kind: EventKind::Switch(Switch {
            prev,
            prev_runnable: false,
            prev_dead: false,
            prev_tier: None,
            prev_mask: None,
            next,
            next_tier,
            next_cgroup: 0,
        }),
    }
}

/// `next` (in cgroup `cg`) switched in on `cpu`; prev blocks.
fn sw_cg(ts: u64, cpu: u32, prev: Pid, next: Pid, next_tier: Tier, cg: u64) -> Event {
    let mut e = sw(ts, cpu, prev, next, next_tier);
    if let EventKind::Switch(Switch { next_cgroup, .. }) = &mut e.kind {
        *next_cgroup = cg;
    }
    e
}

/// prev is preempted (stays runnable) by next.
fn preempt(
    ts: u64,
    cpu: u32,
    prev: Pid,
    prev_tier: Tier,
    mask: u64,
    next: Pid,
    next_tier: Tier,
) -> Event {
    Event {
        ts,
        cpu,
        kind: EventKind::Switch(Switch {
            prev,
            prev_runnable: true,
            prev_dead: false,
            prev_tier: Some(prev_tier),
            prev_mask: Some(CpuMask::Word(mask)),
            next,
            next_tier,
            next_cgroup: 0,
        }),
    }
}

fn wake(pid: Pid, tier: Tier, mask: u64) -> Wake {
    Wake {
        pid,
        tier,
        mask: CpuMask::Word(mask),
        task_cpu: 0,
        cgroup: 0,
    }
}
fn waking(ts: u64, cpu: u32, pid: Pid, tier: Tier, mask: u64) -> Event {
    Event {
        ts,
        cpu,
        kind: EventKind::Waking(wake(pid, tier, mask)),
    }
}
/// LC `pid` woken (from CPU 0) onto `task_cpu`'s runqueue.
fn waking_onto(ts: u64, pid: Pid, mask: u64, task_cpu: u32) -> Event {
    Event {
        ts,
        cpu: 0,
        kind: EventKind::Waking(Wake {
            pid,
            tier: Tier::Lc,
            mask: CpuMask::Word(mask),
            task_cpu,
            cgroup: 0,
        }),
    }
}
fn wakeup(ts: u64, cpu: u32, pid: Pid) -> Event {
    Event {
        ts,
        cpu,
        kind: EventKind::Wakeup { pid, task_cpu: 0 },
    }
}

/// LC task `pid` of cgroup `cg` woken (from CPU 0).
fn waking_cg(ts: u64, pid: Pid, cg: u64) -> Event {
    let mut e = waking(ts, 0, pid, Tier::Lc, u64::MAX);
    if let EventKind::Waking(w) = &mut e.kind {
        w.cgroup = cg;
    }
    e
}

/// `prev` is preempted on `cpu` by `next` of cgroup `cg`.
fn preempt_cg(ts: u64, cpu: u32, prev: Pid, next: Pid, cg: u64) -> Event {
    let mut e = preempt(ts, cpu, prev, Tier::Lc, u64::MAX, next, Tier::Lc);
    if let EventKind::Switch(s) = &mut e.kind {
        s.next_cgroup = cg;
    }
    e
}

fn run(cfg: ReplayConfig, evs: Vec<Event>) -> ReplayResult {
    let mut r = Replay::new(cfg);
    for e in evs {
        r.push(e);
    }
    r.finish()
}

fn cpu(r: &ReplayResult, c: u32) -> CpuStats {
    r.per_cpu
        .iter()
        .find(|(i, _)| *i == c)
        .expect("cpu present")
        .1
}

mod budget;
mod cgroups;
mod inversion;
mod lifecycle;
mod periods;
mod reservation;
mod timeline;
mod wakeup;
