//! The replay's internal state: what occupies each CPU, what each task is
//! doing, and the reorder buffer's ordering.

use super::latency::Latency;
use super::occ::Occ;
use super::{CgroupSet, CpuMask, CpuStats, Event, Tier};

#[derive(Clone, Debug, Default)]
pub(super) struct CpuState {
    pub(super) occ: Option<Occ>,
    /// Accounted up to here.
    pub(super) seg: u64,
    /// Has a sched_switch been seen here (then the snapshot is stale for it).
    pub(super) switched: bool,
    /// Absent (executing nothing) since then, until its `EventKind::Absent`.
    pub(super) absent_since: Option<u64>,
    pub(super) stats: CpuStats,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TState {
    Unknown,
    Sleeping,
    Running(u32),
    Waiting,
}

#[derive(Clone, Debug)]
pub(super) struct Task {
    pub(super) tier: Option<Tier>,
    pub(super) state: TState,
    /// Waiting since (valid in TState::Waiting).
    pub(super) since: u64,
    /// The current wait began with a wakeup (valid in TState::Waiting).
    pub(super) woken: bool,
    pub(super) mask: CpuMask,
    /// A sched_waking seen while the task was on a CPU (see module docs).
    pub(super) pending: Option<(Tier, CpuMask)>,
    /// Runqueue CPU, as far as the events tell.
    pub(super) last_cpu: Option<u32>,
    /// Requested cgroups it was in when last seen (switched in, woken, found
    /// by the snapshot); while it waits it counts as waiting in these.
    pub(super) cgroups: CgroupSet,
    pub(super) run_ns: u64,
    pub(super) wait_ns: u64,
    pub(super) inversion_ns: u64,
    /// Its wakeup latency in the window (per-task table only).
    pub(super) wakeups: Option<Box<Latency>>,
}

impl Default for Task {
    fn default() -> Self {
        Task {
            tier: None,
            state: TState::Unknown,
            since: 0,
            woken: false,
            mask: CpuMask::ALL,
            pending: None,
            last_cpu: None,
            cgroups: 0,
            run_ns: 0,
            wait_ns: 0,
            inversion_ns: 0,
            wakeups: None,
        }
    }
}

/// Orders the reorder buffer by (timestamp, arrival).
pub(super) struct Queued {
    pub(super) ts: u64,
    pub(super) seq: u64,
    pub(super) ev: Event,
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
