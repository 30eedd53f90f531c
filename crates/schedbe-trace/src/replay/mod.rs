//! Replay of scheduler events into inversion figures.
//!
//! The BPF side records sched_switch / sched_waking / sched_wakeup /
//! sched_wakeup_new / sched_migrate_task plus a start-up snapshot; this module
//! replays them in timestamp order and keeps:
//!
//! * per CPU: the current occupant (pid, tier, since when, its `--cgroup`s);
//! * per task: running on a CPU, waiting (runnable, not running: since when,
//!   allowed CPUs), or sleeping;
//! * the set of waiting LC tasks ordered by the time they started waiting.
//!
//! Definitions (per CPU `c`, at time `t`):
//!
//! * **inversion**: `c` runs a BE task while some LC task allowed on `c` has
//!   been waiting for more than the grace period, i.e. `t >= since + grace`;
//! * **idle while LC waits**: the same with `c` idle instead of running BE;
//! * **LC wait**: an LC task is waiting (from becoming runnable, or being
//!   preempted, to being switched in), counted once per task, not per CPU.
//!
//! Per requested cgroup `g` (`--cgroup`; `nr_cgroups`, ids mapped with
//! [`Replay::map_cgroup`]): a CPU runs `g` while its occupant is a task that
//! was in `g` or a descendant of `g` when switched in (or when the start-up
//! snapshot found it running). Then
//!
//! * **time at k CPUs**: time during which exactly `k` CPUs run `g`;
//! * **max CPUs**: the largest `k` with a non-zero time at `k` CPUs in the
//!   window (two CPUs handing over at the same nanosecond are not an
//!   overlap);
//! * **CPU time** of `g`, by the tier its tasks had when switched in; it
//!   equals the sum over `k` of `k` x time at `k` CPUs;
//! * **reservation inversion** (cgroups given a CPU request, `requests`):
//!   the time `g` ran on fewer CPUs than its request while one of its tasks
//!   waited (a waiting task counts with the cgroup it was last seen in,
//!   switched in, woken or found by the snapshot) and another cgroup with a
//!   request ran on more CPUs than its own; see `reservation`;
//! * **wakeup latency**: the distribution of the waits of its tasks that
//!   began with a wakeup (woken or new, not preempted), from becoming
//!   runnable to being switched in, for waits ending in the window; a wait
//!   counts with the cgroup the task was last seen in, as for the
//!   reservation inversion; see `latency`;
//! * **per-period series** (with `period_ns`, T): for each period `[k * T,
//!   (k + 1) * T)` of the events' clock entirely inside the window, the CPU
//!   time of its tasks (as for CPU time) and their wait time (summed over
//!   tasks, counted as for the reservation inversion), both clipped to the
//!   period; see `period`.
//! * **over-budget inversion** (cgroups given a CPU budget C per period T,
//!   `budgets`): the time `g` ran with its CPU time in its current period
//!   `[k * T, (k + 1) * T)` at C or more while another budgeted cgroup,
//!   under its own budget, had a task waiting longer than the grace period
//!   (waits counted as for the reservation inversion), per other cgroup;
//!   and per whole period in the window its CPU time against C; see
//!   `budget`.
//!
//! With `timeline`, every interval a task occupied a CPU is also kept as a
//! [`Segment`].
//!
//! A CPU is **absent** from an [`EventKind::AbsentBegin`] to its
//! [`EventKind::Absent`]: busy but executing nothing (see `CpuStats::absent_ns`).
//! Its occupant still holds it for every figure above except the budgets,
//! where the occupant's cgroups do not run on it meanwhile: no scheduler can
//! stop a task on a CPU that does not execute.
//!
//! Between two events the waiting set is constant, so for an interval
//! `[a, b)` during which `c` runs BE (or idles) the inversion is
//! `b - max(a, e)`, with `e` the earliest `since + grace` among waiting LC
//! tasks allowed on `c`. Every change of the waiting LC set first settles the
//! BE/idle CPUs up to that instant; every switch settles its CPU.
//!
//! When does a task start waiting?
//! * on `sched_waking` if it is not on a CPU (the earliest point the kernel
//!   reports it runnable);
//! * on `sched_switch` away from it while it stays runnable (preempted);
//! * on `sched_wakeup_new`;
//! * `sched_waking` can land while the task is still on its CPU: either the
//!   wakeup is absorbed (`ttwu_runnable`, the task never sleeps; a
//!   `sched_wakeup` follows while it is still current) or it races with the
//!   task's switch-out, in which case the task is runnable from that
//!   switch-out on. So a waking seen on a running task is kept pending: a
//!   `sched_wakeup` while still running cancels it, a switch-out consumes it.
//!
//! Everything is clipped to the measurement window `[window_start,
//! window_end)`. Events are accepted slightly out of order (the ring buffer
//! is filled by all CPUs): they go through a reorder buffer of `reorder_ns`.
//!
//! Layout: `event` (the input), `stats` (the output), `state` (per-CPU and
//! per-task state), `process` (one event at a time), `cpu` (per-CPU time
//! accounting), `wait` (waiting-task transitions), `cgroup` (per-cgroup
//! concurrency and waiting tasks), `reservation` (reservation inversion
//! between cgroups with CPU requests), `latency` (per-cgroup wakeup
//! latency), `period` (the per-period series' periods), `budget` (CPU
//! budgets and the over-budget inversion), `timeline` (run segments).

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

use hdrhistogram::Histogram;

mod budget;
mod cgroup;
mod cgroup_set;
mod cpu;
mod event;
mod latency;
mod occ;
mod period;
mod process;
mod reservation;
mod state;
mod stats;
mod timeline;
mod wait;

#[cfg(test)]
mod tests;

pub use budget::BudgetSpec;
pub use cgroup_set::{bits, CgroupSet, MAX_CGROUPS};
pub use event::{CpuMask, Event, EventKind, Pid, Switch, Tier, Wake};
pub use stats::{
    BudgetStats, CgroupStats, CpuStats, Diagnostics, LatencyStats, PeriodStats, ReplayResult, ReservationStats,
    TaskStats, WaitSummary,
};
pub use timeline::{Segment, SegmentEnd};
use cgroup::Cgroups;
use state::{CpuState, Queued, TState, Task};

#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// Size of the CPU index space (possible CPUs).
    pub nr_cpus: usize,
    /// CPUs reported in the result (online CPUs).
    pub online: Vec<u32>,
    pub grace_ns: u64,
    /// More grace periods to compute the total inversion for (a sensitivity
    /// table: how much of it comes from short waits).
    pub extra_graces_ns: Vec<u64>,
    pub window_start: u64,
    pub window_end: u64,
    /// When tracing started: tasks found runnable by the snapshot have been
    /// waiting since at least then.
    pub trace_start: u64,
    /// Events are held this long (in event time) to be sorted.
    pub reorder_ns: u64,
    /// For the per-task table: keep exited tasks' figures too, and each
    /// task's wakeup latency (a histogram per task that woke in the window).
    pub per_task: bool,
    /// Requested cgroups to follow (at most [`MAX_CGROUPS`]); ids are mapped
    /// to them with [`Replay::map_cgroup`].
    pub nr_cgroups: usize,
    /// CPU requests of the requested cgroups, in milli-CPUs, by index (None
    /// or missing: no request): the reservation inversion is computed
    /// between those that have one.
    pub requests: Vec<Option<u64>>,
    /// Keep the run segments within [from, to) (CLOCK_MONOTONIC ns) for the
    /// timeline; None: keep none.
    pub timeline: Option<(u64, u64)>,
    /// Period of the per-cgroup per-period series, ns (None: none): periods
    /// `[k * T, (k + 1) * T)` of the events' clock entirely in the window.
    pub period_ns: Option<u64>,
    /// CPU budgets of the requested cgroups, by index (None or missing: no
    /// budget): the over-budget inversion is computed between those that
    /// have one (with `grace_ns`).
    pub budgets: Vec<Option<BudgetSpec>>,
}

pub struct Replay {
    cfg: ReplayConfig,
    cpus: Vec<CpuState>,
    tasks: HashMap<Pid, Task>,
    /// Waiting LC tasks: (since, pid).
    lc_waiting: BTreeSet<(u64, Pid)>,
    hist: Histogram<u64>,
    wait_sum_ns: u128,
    wait_max_ns: u64,
    heap: BinaryHeap<Reverse<Queued>>,
    seq: u64,
    max_seen: u64,
    /// Timestamp of the last event released from the reorder buffer.
    released: u64,
    processed: u64,
    diag: Diagnostics,
    /// Total inversion for each of `cfg.extra_graces_ns`.
    by_grace: Vec<u64>,
    /// Per-cgroup concurrency (`cfg.nr_cgroups`).
    cgroups: Cgroups,
    /// Run segments for the timeline (`cfg.timeline`).
    segments: Vec<Segment>,
}

impl Replay {
    pub fn new(cfg: ReplayConfig) -> Self {
        let n = cfg.nr_cpus.max(1);
        Replay {
            cpus: vec![CpuState::default(); n],
            tasks: HashMap::new(),
            lc_waiting: BTreeSet::new(),
            hist: Histogram::new(3).expect("3 significant figures is valid"),
            wait_sum_ns: 0,
            wait_max_ns: 0,
            heap: BinaryHeap::new(),
            seq: 0,
            max_seen: 0,
            released: 0,
            processed: 0,
            diag: Diagnostics::default(),
            by_grace: vec![0; cfg.extra_graces_ns.len()],
            cgroups: Cgroups::new(&cfg),
            segments: Vec::new(),
            cfg,
        }
    }

    /// Feed one event, in any order within `reorder_ns`. A CPU absence is
    /// reported at its end: its start is queued here, `ns` earlier (cut to
    /// what the reorder window still holds).
    pub fn push(&mut self, ev: Event) {
        if let EventKind::Absent { ns } = ev.kind {
            let begin = ev.ts.saturating_sub(ns);
            if begin < self.released {
                self.diag.absences_cut += 1;
            }
            self.enqueue(Event {
                ts: begin.max(self.released).min(ev.ts),
                cpu: ev.cpu,
                kind: EventKind::AbsentBegin,
            });
        }
        self.enqueue(ev);
    }

    fn enqueue(&mut self, mut ev: Event) {
        if ev.ts < self.released {
            self.diag.late_events += 1;
            self.diag.max_lateness_ns = self.diag.max_lateness_ns.max(self.released - ev.ts);
            ev.ts = self.released;
        }
        self.max_seen = self.max_seen.max(ev.ts);
        self.seq += 1;
        self.heap.push(Reverse(Queued {
            ts: ev.ts,
            seq: self.seq,
            ev,
        }));
        while let Some(Reverse(q)) = self.heap.peek() {
            if q.ts.saturating_add(self.cfg.reorder_ns) > self.max_seen {
                break;
            }
            let Reverse(q) = self.heap.pop().expect("peeked");
            self.released = q.ts;
            self.process(q.ev);
        }
    }

    /// Drain the reorder buffer, close the window and summarise.
    pub fn finish(mut self) -> ReplayResult {
        while let Some(Reverse(q)) = self.heap.pop() {
            self.released = q.ts;
            self.process(q.ev);
        }
        let end = self.cfg.window_end;
        for c in 0..self.cpus.len() {
            self.advance_cpu(c, end);
        }
        // Close what is still open at the end of the window.
        for c in 0..self.cpus.len() {
            if let Some(o) = self.cpus[c].occ {
                self.record_segment(c, &o, end, SegmentEnd::Cut);
                if o.pid != 0 {
                    let d = self.clip(o.since, end);
                    self.task(o.pid).run_ns += d;
                }
            }
        }
        let fallback_cpu = self.cfg.online.first().copied().unwrap_or(0);
        let mut open = 0;
        let pids: Vec<Pid> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.state == TState::Waiting)
            .map(|(p, _)| *p)
            .collect();
        for pid in pids {
            let (since, tier, last_cpu) = {
                let t = &self.tasks[&pid];
                (t.since, t.tier, t.last_cpu)
            };
            let d = self.clip(since, end);
            self.task(pid).wait_ns += d;
            if tier == Some(Tier::Lc) && since < end {
                open += 1;
                let c = last_cpu
                    .filter(|&c| (c as usize) < self.cpus.len())
                    .unwrap_or(fallback_cpu);
                if let Some(cs) = self.cpus.get_mut(c as usize) {
                    cs.stats.lc_wait_ns += d;
                }
            }
        }

        let mut per_cpu = Vec::new();
        let mut totals = CpuStats::default();
        for (c, cs) in self.cpus.iter().enumerate() {
            let c = c as u32;
            if self.cfg.online.contains(&c) || cs.stats != CpuStats::default() {
                totals.add(&cs.stats);
                per_cpu.push((c, cs.stats));
            }
        }
        let h = &self.hist;
        let count = h.len();
        let lc_wait = if count == 0 {
            WaitSummary::default()
        } else {
            WaitSummary {
                count,
                mean: self.wait_sum_ns as f64 / count as f64 / 1000.0,
                p50: h.value_at_quantile(0.5) as f64 / 1000.0,
                p99: h.value_at_quantile(0.99) as f64 / 1000.0,
                max: self.wait_max_ns as f64 / 1000.0,
            }
        };
        let mut tasks: Vec<TaskStats> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.run_ns > 0 || t.wait_ns > 0)
            .map(|(&pid, t)| TaskStats {
                pid,
                tier: t.tier,
                run_ns: t.run_ns,
                wait_ns: t.wait_ns,
                inversion_ns: t.inversion_ns,
                wakeup_latency: t.wakeups.as_ref().map(|l| l.summary()).unwrap_or_default(),
            })
            .collect();
        tasks.sort_by(|a, b| {
            b.run_ns
                .cmp(&a.run_ns)
                .then(b.wait_ns.cmp(&a.wait_ns))
                .then(a.pid.cmp(&b.pid))
        });
        ReplayResult {
            per_cpu,
            totals,
            lc_wait,
            lc_waits_open_at_end: open,
            tasks,
            events_processed: self.processed,
            diag: self.diag,
            inversion_by_grace: self.cfg.extra_graces_ns.iter().copied().zip(self.by_grace.iter().copied()).collect(),
            cgroups: self.cgroups.finish(),
            segments: self.segments,
        }
    }

    // ---- internals -------------------------------------------------------

    /// Overlap of [a, b) with the window.
    fn clip(&self, a: u64, b: u64) -> u64 {
        let a = a.max(self.cfg.window_start);
        let b = b.min(self.cfg.window_end);
        b.saturating_sub(a)
    }

    fn in_window(&self, t: u64) -> bool {
        t >= self.cfg.window_start && t <= self.cfg.window_end
    }

    fn task(&mut self, pid: Pid) -> &mut Task {
        self.tasks.entry(pid).or_default()
    }
}
