//! Run segments for the per-CPU timeline (`--timeline`): every interval a
//! task occupied a CPU, cut to the timeline's range.
//!
//! A segment ends when the CPU's occupant is replaced (a switch, or the
//! start-up snapshot) or when the window closes. The idle task's time is
//! not a segment. The tier and requested cgroups are those the occupant had
//! when switched in, as everywhere in the replay. How it ended
//! ([`SegmentEnd`]) comes from the switch: whether the task stayed runnable
//! (preempted), blocked or exited, which is what tells a preemption from a
//! sleep when reading who ran next.

use serde::{Deserialize, Serialize};

use super::occ::Occ;
use super::{CgroupSet, Pid, Replay, Tier};

/// How a run segment ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentEnd {
    /// Switched out still runnable: preempted, or it yielded
    /// (sched_switch's `preempt`, or `prev_state` TASK_RUNNING).
    Preempted,
    /// Switched out to sleep (any other `prev_state` but TASK_DEAD).
    Blocked,
    /// Switched out for good (TASK_DEAD).
    Exited,
    /// Cut at the end of the timeline's range or the window: it ran on.
    Cut,
    /// Replaced by the start-up snapshot: not known.
    Unknown,
}

impl SegmentEnd {
    /// The timeline CSV's `ended` field.
    pub fn as_str(self) -> &'static str {
        match self {
            SegmentEnd::Preempted => "preempted",
            SegmentEnd::Blocked => "blocked",
            SegmentEnd::Exited => "exited",
            SegmentEnd::Cut => "cut",
            SegmentEnd::Unknown => "",
        }
    }
}

/// One task's time on one CPU. Times are CLOCK_MONOTONIC ns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub cpu: u32,
    pub start: u64,
    pub end: u64,
    pub pid: Pid,
    pub tier: Tier,
    /// The requested cgroups the task was in (see `cgroup`).
    pub cgroups: CgroupSet,
    /// How it ended.
    pub ended: SegmentEnd,
}

#[cfg(test)]
impl Segment {
    /// A segment, for tests; it ended blocked unless [`Self::ended`] says.
    pub(crate) fn at(cpu: u32, start: u64, end: u64, pid: Pid, tier: Tier, cgroups: CgroupSet) -> Self {
        Segment {
            cpu,
            start,
            end,
            pid,
            tier,
            cgroups,
            ended: SegmentEnd::Blocked,
        }
    }

    /// This segment, ended `how`.
    pub(crate) fn ended(self, how: SegmentEnd) -> Self {
        Segment { ended: how, ..self }
    }
}

impl Replay {
    /// CPU `c`'s occupant `occ` leaves it at `end`, as `how` says: keep the
    /// part of its time inside the timeline's range (cut there: `Cut`).
    pub(super) fn record_segment(&mut self, c: usize, occ: &Occ, end: u64, how: SegmentEnd) {
        let Some((from, to)) = self.cfg.timeline else {
            return;
        };
        if occ.pid == 0 {
            return;
        }
        let start = occ.since.max(from).max(self.cfg.window_start);
        let limit = to.min(self.cfg.window_end);
        let (end, how) = if end > limit { (limit, SegmentEnd::Cut) } else { (end, how) };
        if end > start {
            self.segments.push(Segment {
                cpu: c as u32,
                start,
                end,
                pid: occ.pid,
                tier: occ.tier,
                cgroups: occ.cgroups,
                ended: how,
            });
        }
    }
}
