//! Run segments for the per-CPU timeline (`--timeline`): every interval a
//! task occupied a CPU, cut to the timeline's range.
//!
//! A segment ends when the CPU's occupant is replaced (a switch, or the
//! start-up snapshot) or when the window closes. The idle task's time is
//! not a segment. The tier and requested cgroups are those the occupant had
//! when switched in, as everywhere in the replay.

use serde::{Deserialize, Serialize};

use super::state::Occ;
use super::{CgroupSet, Pid, Replay, Tier};

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
}

#[cfg(test)]
impl Segment {
    /// A segment, for tests.
    pub(crate) fn at(cpu: u32, start: u64, end: u64, pid: Pid, tier: Tier, cgroups: CgroupSet) -> Self {
        Segment {
            cpu,
            start,
            end,
            pid,
            tier,
            cgroups,
        }
    }
}

impl Replay {
    /// CPU `c`'s occupant `occ` leaves it at `end`: keep the part of its
    /// time inside the timeline's range.
    pub(super) fn record_segment(&mut self, c: usize, occ: &Occ, end: u64) {
        let Some((from, to)) = self.cfg.timeline else {
            return;
        };
        if occ.pid == 0 {
            return;
        }
        let start = occ.since.max(from).max(self.cfg.window_start);
        let end = end.min(to).min(self.cfg.window_end);
        if end > start {
            self.segments.push(Segment {
                cpu: c as u32,
                start,
                end,
                pid: occ.pid,
                tier: occ.tier,
                cgroups: occ.cgroups,
            });
        }
    }
}
