//! The replay's input: scheduler events as decoded from the ring buffer.

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
    /// cgroup v2 id of the task (0: not recorded; only with `--cgroup`).
    pub cgroup: u64,
}

/// sched_switch: what the replay needs of one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    pub prev: Pid,
    /// prev stays runnable (preempted, yielded).
    pub prev_runnable: bool,
    /// prev exited.
    pub prev_dead: bool,
    /// Tier and mask of prev, recorded when it stays runnable.
    pub prev_tier: Option<Tier>,
    pub prev_mask: Option<CpuMask>,
    pub next: Pid,
    pub next_tier: Tier,
    /// cgroup v2 id of next (0: not recorded; only with `--cgroup`).
    pub next_cgroup: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// sched_switch on `Event::cpu`.
    Switch(Switch),
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
        /// cgroup v2 id of pid (0: not recorded; only with `--cgroup`).
        cgroup: u64,
    },
    /// Snapshot: `pid` was queued but not running (runnable since before tracing started).
    InitRunnable(Wake),
    /// Snapshot complete: CPUs nobody claimed and that have not switched are idle.
    InitDone,
    /// `pid`'s sleep timer fired `late_ns` after its (soft) expiry; `cgroup`
    /// is pid's cgroup v2 id (only traced with `--cgroup`).
    Timer {
        pid: Pid,
        late_ns: u64,
        cgroup: u64,
    },
    /// `Event::cpu` executed nothing for the `ns` before this event (its
    /// tick came late on a busy CPU: the host did not run the vCPU, or
    /// interrupts were off); no switch happened on it meanwhile.
    /// [`super::Replay::push`] queues the [`EventKind::AbsentBegin`] too.
    Absent { ns: u64 },
    /// The start of an absence, `ns` before its [`EventKind::Absent`].
    AbsentBegin,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
    /// CPU the event happened on.
    pub cpu: u32,
    pub kind: EventKind,
}

impl Event {
    /// The cgroup id this event carries, if any: that of a task starting to
    /// run (switched in, or found running by the snapshot) or becoming
    /// runnable (woken, new, or found queued by the snapshot), or whose
    /// sleep timer fired.
    pub fn cgroup(&self) -> Option<u64> {
        match &self.kind {
            EventKind::Switch(Switch { next_cgroup, .. }) => Some(*next_cgroup),
            EventKind::InitCurr { cgroup, .. } | EventKind::Timer { cgroup, .. } => Some(*cgroup),
            EventKind::Waking(w) | EventKind::WakeupNew(w) | EventKind::InitRunnable(w) => {
                Some(w.cgroup)
            }
            EventKind::Wakeup { .. }
            | EventKind::Migrate { .. }
            | EventKind::InitDone
            | EventKind::Absent { .. }
            | EventKind::AbsentBegin => None,
        }
        .filter(|&id| id != 0)
    }
}
