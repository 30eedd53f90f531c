//! Replay of scheduler events into inversion figures.
//!
//! The BPF side records sched_switch / sched_waking / sched_wakeup /
//! sched_wakeup_new / sched_migrate_task plus a start-up snapshot; this module
//! replays them in timestamp order and keeps:
//!
//! * per CPU: the current occupant (pid, tier, since when);
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

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub type Pid = u32;

/// Scheduling tier of a task, as the tracer classifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Latency-critical: everything that is not BE, other or idle (kernel threads included).
    Lc,
    /// Best-effort: SCHED_IDLE, cpu.idle=1 cgroups, configured BE cgroups.
    Be,
    /// SCHED_FIFO / SCHED_RR / SCHED_DEADLINE: above both tiers.
    Other,
    /// The per-CPU idle task.
    Idle,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Lc => "lc",
            Tier::Be => "be",
            Tier::Other => "other",
            Tier::Idle => "idle",
        }
    }
}

/// Allowed CPUs of a task: bit `i % 64` of word `i / 64` is CPU `i`. CPUs
/// past the recorded words are treated as allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuMask {
    Word(u64),
    Wide(Box<[u64]>),
}

impl CpuMask {
    pub const ALL: CpuMask = CpuMask::Word(u64::MAX);

    pub fn from_words(words: &[u64]) -> Self {
        match words.len() {
            0 => Self::ALL,
            1 => CpuMask::Word(words[0]),
            _ => CpuMask::Wide(words.into()),
        }
    }

    pub fn contains(&self, cpu: u32) -> bool {
        let (w, b) = ((cpu / 64) as usize, cpu % 64);
        match self {
            CpuMask::Word(m) => w > 0 || m & (1u64 << b) != 0,
            CpuMask::Wide(ws) => ws.get(w).is_none_or(|m| m & (1u64 << b) != 0),
        }
    }
}

/// A task becoming runnable: sched_waking, sched_wakeup_new, or found queued by the snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wake {
    pub pid: Pid,
    pub tier: Tier,
    pub mask: CpuMask,
    /// task_cpu() at the event: the runqueue the task is (or will be) on.
    pub task_cpu: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// sched_switch on `Event::cpu`.
    Switch {
        prev: Pid,
        /// prev stays runnable (preempted, yielded).
        prev_runnable: bool,
        /// prev exited.
        prev_dead: bool,
        /// Tier and mask of prev, recorded when it stays runnable.
        prev_tier: Option<Tier>,
        prev_mask: Option<CpuMask>,
        next: Pid,
        next_tier: Tier,
    },
    Waking(Wake),
    /// sched_wakeup: the task is on runqueue `task_cpu` now (tier and mask
    /// come from the preceding sched_waking).
    Wakeup {
        pid: Pid,
        task_cpu: u32,
    },
    WakeupNew(Wake),
    /// sched_migrate_task: the task moves to runqueue `dest`.
    Migrate {
        pid: Pid,
        dest: u32,
        mask: CpuMask,
    },
    /// Snapshot: `pid` was rq->curr of `on_cpu`.
    InitCurr {
        pid: Pid,
        tier: Tier,
        on_cpu: u32,
    },
    /// Snapshot: `pid` was queued but not running (runnable since before tracing started).
    InitRunnable(Wake),
    /// Snapshot complete: CPUs nobody claimed and that have not switched are idle.
    InitDone,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
    /// CPU the event happened on.
    pub cpu: u32,
    pub kind: EventKind,
}

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
    /// Keep per-task figures for exited tasks too (for the per-task table).
    pub keep_exited: bool,
}

/// Time accounting of one CPU (or all CPUs), in nanoseconds, within the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuStats {
    /// Time this CPU was observed (sum of the four tiers).
    pub cpu_ns: u64,
    pub lc_ns: u64,
    pub be_ns: u64,
    pub idle_ns: u64,
    pub other_ns: u64,
    /// Running BE while an LC task allowed here had waited more than the grace period.
    pub inversion_ns: u64,
    /// The part of `inversion_ns` during which that LC task (the longest
    /// waiting one allowed here) sat on another CPU's runqueue: queued where
    /// something else held it up while this CPU ran BE.
    #[serde(default)]
    pub inversion_elsewhere_ns: u64,
    /// Idle while an LC task allowed here had waited more than the grace period.
    pub idle_while_lc_waits_ns: u64,
    /// Time LC tasks spent waiting; a wait is attributed to the CPU it ended on
    /// (or, if still open at the end, to the task's runqueue CPU).
    pub lc_wait_ns: u64,
    /// Completed LC waits that ended (task switched in) on this CPU in the window.
    pub lc_waits: u64,
}

impl CpuStats {
    pub fn add(&mut self, o: &CpuStats) {
        self.cpu_ns += o.cpu_ns;
        self.lc_ns += o.lc_ns;
        self.be_ns += o.be_ns;
        self.idle_ns += o.idle_ns;
        self.other_ns += o.other_ns;
        self.inversion_ns += o.inversion_ns;
        self.inversion_elsewhere_ns += o.inversion_elsewhere_ns;
        self.idle_while_lc_waits_ns += o.idle_while_lc_waits_ns;
        self.lc_wait_ns += o.lc_wait_ns;
        self.lc_waits += o.lc_waits;
    }
}

/// Distribution of completed LC waits, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitSummary {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStats {
    pub pid: Pid,
    pub tier: Option<Tier>,
    pub run_ns: u64,
    pub wait_ns: u64,
    /// Inversion charged to this task: CPU time other tasks ran BE on a CPU
    /// it was allowed on while it was the longest waiting LC task there.
    pub inversion_ns: u64,
}

/// Signs of trouble in the event stream; all zero on a healthy run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostics {
    /// Events that arrived later than the reorder window allowed (processed at
    /// the current replay time).
    pub late_events: u64,
    /// How far behind the replay the latest of them was, in nanoseconds.
    pub max_lateness_ns: u64,
    /// sched_switch whose prev was not the task the replay had on that CPU,
    /// or whose next was running elsewhere: around the start-up snapshot,
    /// after dropped events, or when the kernel did not report a switch (the
    /// time in between is charged to the last known occupant).
    pub inconsistent_switches: u64,
    /// sched_wakeup for a task that was neither running nor known to be waiting.
    pub wakeups_without_waking: u64,
    /// Events naming a CPU outside the possible range.
    pub bad_cpu_events: u64,
}

#[derive(Clone, Debug)]
pub struct ReplayResult {
    /// (cpu, stats) for every online CPU, and any other CPU that was observed.
    pub per_cpu: Vec<(u32, CpuStats)>,
    pub totals: CpuStats,
    pub lc_wait: WaitSummary,
    /// LC tasks still waiting at the end of the window.
    pub lc_waits_open_at_end: u64,
    /// Tasks with run or wait time in the window, most CPU time first.
    pub tasks: Vec<TaskStats>,
    pub events_processed: u64,
    pub diag: Diagnostics,
    /// (grace period, total inversion with it), for `extra_graces_ns`.
    pub inversion_by_grace: Vec<(u64, u64)>,
}

#[derive(Clone, Copy, Debug)]
struct Occ {
    pid: Pid,
    tier: Tier,
    since: u64,
}

#[derive(Clone, Debug, Default)]
struct CpuState {
    occ: Option<Occ>,
    /// Accounted up to here.
    seg: u64,
    /// Has a sched_switch been seen here (then the snapshot is stale for it).
    switched: bool,
    stats: CpuStats,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TState {
    Unknown,
    Sleeping,
    Running(u32),
    Waiting,
}

#[derive(Clone, Debug)]
struct Task {
    tier: Option<Tier>,
    state: TState,
    /// Waiting since (valid in TState::Waiting).
    since: u64,
    mask: CpuMask,
    /// A sched_waking seen while the task was on a CPU (see module docs).
    pending: Option<(Tier, CpuMask)>,
    /// Runqueue CPU, as far as the events tell.
    last_cpu: Option<u32>,
    run_ns: u64,
    wait_ns: u64,
    inversion_ns: u64,
}

impl Default for Task {
    fn default() -> Self {
        Task {
            tier: None,
            state: TState::Unknown,
            since: 0,
            mask: CpuMask::ALL,
            pending: None,
            last_cpu: None,
            run_ns: 0,
            wait_ns: 0,
            inversion_ns: 0,
        }
    }
}

/// Orders the reorder buffer by (timestamp, arrival).
struct Queued {
    ts: u64,
    seq: u64,
    ev: Event,
}
impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        (self.ts, self.seq) == (o.ts, o.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.ts, self.seq).cmp(&(o.ts, o.seq))
    }
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
            cfg,
        }
    }

    /// Feed one event, in any order within `reorder_ns`.
    pub fn push(&mut self, mut ev: Event) {
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

    /// The longest waiting LC task allowed on `cpu`: (waiting since, pid).
    fn earliest_lc_waiter(&self, cpu: u32) -> Option<(u64, Pid)> {
        self.lc_waiting
            .iter()
            .find(|(_, pid)| self.tasks.get(pid).is_none_or(|t| t.mask.contains(cpu)))
            .copied()
    }

    /// Account CPU `c` from its last settlement up to `now`.
    fn advance_cpu(&mut self, c: usize, now: u64) {
        let from = self.cpus[c].seg;
        if now <= from {
            return;
        }
        self.cpus[c].seg = now;
        let Some(occ) = self.cpus[c].occ else { return };
        let a = from.max(self.cfg.window_start);
        let b = now.min(self.cfg.window_end);
        if b <= a {
            return;
        }
        let waiter = if matches!(occ.tier, Tier::Be | Tier::Idle) {
            self.earliest_lc_waiter(c as u32)
        } else {
            None
        };
        let grace = self.cfg.grace_ns;
        // Where the waiter is queued: on this CPU (it waits for this CPU to
        // switch) or on another one (something there holds it up).
        let elsewhere = waiter.is_some_and(|(_, pid)| {
            self.tasks.get(&pid).and_then(|t| t.last_cpu) != Some(c as u32)
        });
        if let (Some((since, _)), Tier::Be) = (waiter, occ.tier) {
            for (g, acc) in self.cfg.extra_graces_ns.iter().zip(self.by_grace.iter_mut()) {
                let s = a.max(since.saturating_add(*g));
                *acc += b.saturating_sub(s);
            }
        }
        let st = &mut self.cpus[c].stats;
        let d = b - a;
        st.cpu_ns += d;
        match occ.tier {
            Tier::Lc => st.lc_ns += d,
            Tier::Be => st.be_ns += d,
            Tier::Other => st.other_ns += d,
            Tier::Idle => st.idle_ns += d,
        }
        if let Some((since, pid)) = waiter {
            let s = a.max(since.saturating_add(grace));
            if b > s {
                match occ.tier {
                    Tier::Be => {
                        st.inversion_ns += b - s;
                        if elsewhere {
                            st.inversion_elsewhere_ns += b - s;
                        }
                        self.task(pid).inversion_ns += b - s;
                    }
                    Tier::Idle => st.idle_while_lc_waits_ns += b - s,
                    _ => {}
                }
            }
        }
    }

    /// Settle every CPU whose accounting depends on the waiting LC set.
    fn advance_be_idle(&mut self, now: u64) {
        for c in 0..self.cpus.len() {
            if matches!(
                self.cpus[c].occ,
                Some(Occ {
                    tier: Tier::Be | Tier::Idle,
                    ..
                })
            ) {
                self.advance_cpu(c, now);
            }
        }
    }

    fn start_wait(
        &mut self,
        pid: Pid,
        now: u64,
        since: u64,
        tier: Tier,
        mask: CpuMask,
        cpu: Option<u32>,
    ) {
        if self.task(pid).state == TState::Waiting {
            self.update_waiter(pid, now, Some(tier), Some(mask));
            if let Some(c) = cpu {
                self.set_queue_cpu(pid, c, now);
            }
            return;
        }
        if tier == Tier::Lc {
            self.advance_be_idle(now);
            self.lc_waiting.insert((since, pid));
        }
        let t = self.task(pid);
        t.state = TState::Waiting;
        t.since = since;
        t.tier = Some(tier);
        t.mask = mask;
        if cpu.is_some() {
            t.last_cpu = cpu;
        }
    }

    /// Tier and/or mask of an already waiting task changed.
    fn update_waiter(&mut self, pid: Pid, now: u64, tier: Option<Tier>, mask: Option<CpuMask>) {
        let (since, old_tier, old_mask_differs) = {
            let t = &self.tasks[&pid];
            (t.since, t.tier, mask.as_ref().is_some_and(|m| *m != t.mask))
        };
        let new_tier = tier.or(old_tier);
        let was_lc = old_tier == Some(Tier::Lc);
        let is_lc = new_tier == Some(Tier::Lc);
        if (was_lc || is_lc) && (was_lc != is_lc || old_mask_differs) {
            self.advance_be_idle(now);
        }
        if was_lc && !is_lc {
            self.lc_waiting.remove(&(since, pid));
        } else if !was_lc && is_lc {
            self.lc_waiting.insert((since, pid));
        }
        let t = self.task(pid);
        t.tier = new_tier;
        if let Some(m) = mask {
            t.mask = m;
        }
    }

    /// A waiting task is now queued on `cpu`'s runqueue. Where an LC waiter
    /// is queued splits the inversion of the CPUs running BE, so they are
    /// settled first.
    fn set_queue_cpu(&mut self, pid: Pid, cpu: u32, now: u64) {
        let t = self.task(pid);
        if t.last_cpu == Some(cpu) {
            return;
        }
        if t.state == TState::Waiting && t.tier == Some(Tier::Lc) {
            self.advance_be_idle(now);
        }
        self.task(pid).last_cpu = Some(cpu);
    }

    fn set_tier(&mut self, pid: Pid, tier: Tier, now: u64) {
        if self.task(pid).state == TState::Waiting {
            self.update_waiter(pid, now, Some(tier), None);
        } else {
            self.task(pid).tier = Some(tier);
        }
    }

    /// The waiting task `pid` is switched in on `cpu` at `now`.
    fn end_wait(&mut self, pid: Pid, now: u64, cpu: usize) {
        let (since, tier) = {
            let t = &self.tasks[&pid];
            (t.since, t.tier)
        };
        let d = self.clip(since, now);
        if tier == Some(Tier::Lc) {
            self.advance_be_idle(now);
            self.lc_waiting.remove(&(since, pid));
            self.cpus[cpu].stats.lc_wait_ns += d;
            if self.in_window(now) {
                let w = now.saturating_sub(since);
                self.cpus[cpu].stats.lc_waits += 1;
                // auto-resizing histogram: recording cannot fail for u64 values
                let _ = self.hist.record(w.max(1));
                self.wait_sum_ns += w as u128;
                self.wait_max_ns = self.wait_max_ns.max(w);
            }
        }
        let t = self.task(pid);
        t.wait_ns += d;
        t.state = TState::Sleeping;
    }

    fn process(&mut self, ev: Event) {
        self.processed += 1;
        let now = ev.ts;
        let cpu = ev.cpu as usize;
        match ev.kind {
            EventKind::Switch {
                prev,
                prev_runnable,
                prev_dead,
                prev_tier,
                prev_mask,
                next,
                next_tier,
            } => {
                if cpu >= self.cpus.len() {
                    self.diag.bad_cpu_events += 1;
                    return;
                }
                self.on_switch(
                    now,
                    cpu,
                    prev,
                    prev_runnable,
                    prev_dead,
                    prev_tier,
                    prev_mask,
                    next,
                    next_tier,
                );
            }
            EventKind::Waking(w) => {
                self.set_tier(w.pid, w.tier, now);
                match self.task(w.pid).state {
                    TState::Running(_) => self.task(w.pid).pending = Some((w.tier, w.mask)),
                    TState::Waiting => self.update_waiter(w.pid, now, None, Some(w.mask)),
                    TState::Sleeping | TState::Unknown => {
                        self.start_wait(w.pid, now, now, w.tier, w.mask, Some(w.task_cpu))
                    }
                }
            }
            EventKind::Wakeup { pid, task_cpu } => {
                if pid == 0 {
                    return;
                }
                match self.task(pid).state {
                    // the waking was absorbed: the task never left its CPU
                    TState::Running(_) => self.task(pid).pending = None,
                    TState::Waiting => self.set_queue_cpu(pid, task_cpu, now),
                    TState::Sleeping | TState::Unknown => {
                        // no sched_waking seen (lost, or it happened in a context the
                        // kernel does not trace): waiting from now, last known tier/mask
                        self.diag.wakeups_without_waking += 1;
                        let t = &self.tasks[&pid];
                        let (tier, mask) = (t.tier.unwrap_or(Tier::Lc), t.mask.clone());
                        self.start_wait(pid, now, now, tier, mask, Some(task_cpu))
                    }
                }
            }
            EventKind::WakeupNew(w) => {
                self.set_tier(w.pid, w.tier, now);
                self.start_wait(w.pid, now, now, w.tier, w.mask, Some(w.task_cpu));
            }
            EventKind::Migrate { pid, dest, mask } => {
                if pid == 0 {
                    return;
                }
                match self.tasks.get(&pid).map(|t| t.state) {
                    Some(TState::Waiting) => {
                        self.update_waiter(pid, now, None, Some(mask));
                        self.set_queue_cpu(pid, dest, now);
                    }
                    Some(_) => {
                        let t = self.task(pid);
                        t.mask = mask;
                        t.last_cpu = Some(dest);
                    }
                    None => {}
                }
            }
            EventKind::InitCurr { pid, tier, on_cpu } => {
                let c = on_cpu as usize;
                if c >= self.cpus.len() {
                    self.diag.bad_cpu_events += 1;
                    return;
                }
                if self.cpus[c].switched {
                    return; // a real switch already told us more recently
                }
                self.advance_cpu(c, now);
                self.cpus[c].occ = Some(Occ {
                    pid,
                    tier: if pid == 0 { Tier::Idle } else { tier },
                    since: now,
                });
                if pid != 0 && !self.tasks.contains_key(&pid) {
                    let t = self.task(pid);
                    t.tier = Some(tier);
                    t.state = TState::Running(on_cpu);
                    t.last_cpu = Some(on_cpu);
                }
            }
            EventKind::InitRunnable(w) => {
                // Only tasks no event has told us about yet: they have been
                // runnable since before tracing started.
                if w.pid != 0 && !self.tasks.contains_key(&w.pid) {
                    let since = self.cfg.trace_start.min(now);
                    self.start_wait(w.pid, now, since, w.tier, w.mask, Some(w.task_cpu));
                }
            }
            EventKind::InitDone => {
                for i in 0..self.cfg.online.len() {
                    let c = self.cfg.online[i] as usize;
                    if c < self.cpus.len() && self.cpus[c].occ.is_none() {
                        self.cpus[c].seg = now;
                        self.cpus[c].occ = Some(Occ {
                            pid: 0,
                            tier: Tier::Idle,
                            since: now,
                        });
                    }
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_switch(
        &mut self,
        now: u64,
        c: usize,
        prev: Pid,
        prev_runnable: bool,
        prev_dead: bool,
        prev_tier: Option<Tier>,
        prev_mask: Option<CpuMask>,
        next: Pid,
        next_tier: Tier,
    ) {
        self.advance_cpu(c, now);
        let occ = self.cpus[c].occ.take();
        self.cpus[c].switched = true;
        if let Some(o) = occ {
            if o.pid != prev {
                self.diag.inconsistent_switches += 1;
            }
            if o.pid != 0 {
                let d = self.clip(o.since, now);
                let t = self.task(o.pid);
                t.run_ns += d;
                if t.state == TState::Running(c as u32) {
                    t.state = TState::Sleeping;
                }
            }
        }

        if prev != 0 {
            if let Some(tier) = prev_tier {
                self.set_tier(prev, tier, now);
            }
            let t = self.task(prev);
            t.last_cpu = Some(c as u32);
            let pending = t.pending.take();
            if matches!(t.state, TState::Running(_) | TState::Unknown) {
                t.state = TState::Sleeping;
            }
            let known_tier = t.tier;
            if prev_runnable {
                let tier = prev_tier.or(known_tier).unwrap_or(Tier::Lc);
                let mask = prev_mask.unwrap_or(CpuMask::ALL);
                self.start_wait(prev, now, now, tier, mask, Some(c as u32));
            } else if let Some((tier, mask)) = pending {
                // woken while still switching out: runnable from now on
                self.start_wait(prev, now, now, tier, mask, Some(c as u32));
            } else if prev_dead
                && !self.cfg.keep_exited
                && self
                    .tasks
                    .get(&prev)
                    .is_some_and(|t| t.state != TState::Waiting)
            {
                self.tasks.remove(&prev);
            }
        }

        if next != 0 {
            self.set_tier(next, next_tier, now);
            match self.task(next).state {
                TState::Waiting => self.end_wait(next, now, c),
                TState::Running(other) if other != c as u32 => self.diag.inconsistent_switches += 1,
                _ => {}
            }
            let t = self.task(next);
            t.state = TState::Running(c as u32);
            t.pending = None;
            t.last_cpu = Some(c as u32);
        }
        let tier = if next == 0 { Tier::Idle } else { next_tier };
        self.cpus[c].occ = Some(Occ {
            pid: next,
            tier,
            since: now,
        });
    }
}

#[cfg(test)]
mod tests {
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
            keep_exited: true,
        }
    }

    fn sw(ts: u64, cpu: u32, prev: Pid, next: Pid, next_tier: Tier) -> Event {
        Event {
            ts,
            cpu,
            kind: EventKind::Switch {
                prev,
                prev_runnable: false,
                prev_dead: false,
                prev_tier: None,
                prev_mask: None,
                next,
                next_tier,
            },
        }
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
            kind: EventKind::Switch {
                prev,
                prev_runnable: true,
                prev_dead: false,
                prev_tier: Some(prev_tier),
                prev_mask: Some(CpuMask::Word(mask)),
                next,
                next_tier,
            },
        }
    }

    fn wake(pid: Pid, tier: Tier, mask: u64) -> Wake {
        Wake {
            pid,
            tier,
            mask: CpuMask::Word(mask),
            task_cpu: 0,
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
            kind: EventKind::Switch {
                prev: 5,
                prev_runnable: false,
                prev_dead: true,
                prev_tier: None,
                prev_mask: None,
                next: 0,
                next_tier: Tier::Idle,
            },
        };
        let evs = vec![sw(0, 0, 0, 5, Tier::Lc), dead(MS)];
        let r = run(cfg(1), evs.clone());
        assert_eq!(r.tasks.len(), 1);
        let mut c = cfg(1);
        c.keep_exited = false;
        let r = run(c, evs);
        assert!(r.tasks.is_empty());
        assert_eq!(r.totals.lc_ns, MS, "CPU time is kept either way");
    }
}
