//! The LLF policy's live statistics: served over scx_stats (stats_server.rs)
//! to `schedbe stats`, and printed by `schedbe run llf --stats`.

use std::collections::BTreeMap;

use scx_stats::prelude::*;
use scx_stats_derive::{stat_doc, Stats};
use serde::{Deserialize, Serialize};

use super::bpf::intf;
use crate::cpumax::CgroupBw;
use crate::park::ParkCounts;

/// The daemon's state at one instant, counters cumulative since load.
#[derive(Clone)]
pub struct Sample {
    pub uptime_s: f64,
    pub sandboxes: usize,
    /// The most loaded sandboxes now: path -> load in CPUs.
    pub top: BTreeMap<String, f64>,
    pub counters: intf::llf_stats,
    pub parking: ParkCounts,
    pub cgroups: BTreeMap<String, CgroupBw>,
}

/// One interval (counters are differences over it).
#[stat_doc]
#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(top, _schedbe_policy = "llf")]
pub struct LlfStats {
    #[stat(desc = "Time since the policy was loaded (s)")]
    pub uptime_s: f64,
    #[stat(desc = "Sandboxes: cgroups matching the sandbox patterns")]
    pub sandboxes: u64,
    #[stat(desc = "The most loaded sandboxes (at most 5): path -> decaying load in CPUs")]
    pub top: BTreeMap<String, f64>,
    #[stat(desc = "LC tasks taken from the queue, least loaded sandbox first")]
    pub lc_dispatches: u64,
    #[stat(desc = "Wakeups placed straight on an idle CPU")]
    pub direct: u64,
    #[stat(desc = "Tasks of a heavy sandbox run by the floor")]
    pub floor_slices: u64,
    #[stat(desc = "A lighter sandbox's wakeup preempted a heavier one's task")]
    pub preempts: u64,
    #[stat(desc = "BE tasks taken from the BE queue")]
    pub be_dispatches: u64,
    #[stat(desc = "BE tasks run by the starvation guard")]
    pub be_guards: u64,
    #[stat(desc = "A runnable task kept its CPU for another slice (nothing else could run there)")]
    pub kept: u64,
    #[stat(desc = "Parking: starved BE tasks reported")]
    pub starved_reports: u64,
    #[stat(desc = "Queued BE tasks run because they had to (dying, freezing)")]
    pub be_rescues: u64,
    #[stat(desc = "Local queues sent back because an RT/DL task took the CPU")]
    pub rt_evacuations: u64,
    #[stat(desc = "Local queues of CPUs held by an RT/DL task, sent back from another CPU")]
    pub rt_rescues: u64,
    #[stat(desc = "Parked BE cgroups now, and park/unpark events since load")]
    pub parking: ParkCounts,
    #[stat(desc = "cpu.max: per limited cgroup, cumulative counters as in cpu.stat")]
    pub cgroups: BTreeMap<String, CgroupBw>,
}

impl LlfStats {
    /// The interval from `prev` (counters only) to `cur`.
    pub fn between(prev: &intf::llf_stats, cur: &Sample) -> Self {
        let d = |count: fn(&intf::llf_stats) -> u64| count(&cur.counters) - count(prev);
        Self {
            uptime_s: cur.uptime_s,
            sandboxes: cur.sandboxes as u64,
            top: cur.top.clone(),
            lc_dispatches: d(|c| c.lc_dispatches),
            direct: d(|c| c.direct),
            floor_slices: d(|c| c.floor_slices),
            preempts: d(|c| c.preempts),
            be_dispatches: d(|c| c.be_dispatches),
            be_guards: d(|c| c.be_guards),
            kept: d(|c| c.kept),
            starved_reports: d(|c| c.starved_reports),
            be_rescues: d(|c| c.be_rescues),
            rt_evacuations: d(|c| c.rt_evacuations),
            rt_rescues: d(|c| c.rt_rescues),
            parking: cur.parking,
            cgroups: cur.cgroups.clone(),
        }
    }

    /// The text form: one line, the sandboxes most loaded first.
    pub fn format_row(&self) -> String {
        let mut top: Vec<(&String, &f64)> = self.top.iter().collect();
        top.sort_by(|a, b| b.1.total_cmp(a.1));
        let top: Vec<String> = top.iter().map(|(p, l)| format!("{p} {l:.2}")).collect();
        let Self { uptime_s, sandboxes, lc_dispatches, direct, floor_slices, preempts, be_dispatches, be_guards, parking, .. } = self;
        format!(
            "{uptime_s:>7.1} sandboxes {sandboxes} lc {lc_dispatches} direct {direct} floor {floor_slices} preempt {preempts} be {be_dispatches} guard {be_guards} parked {} | top: {}",
            parking.parked_cgroups,
            top.join(", ")
        )
    }
}

pub fn server_data() -> StatsServerData<(), Sample> {
    let metas = vec![CgroupBw::meta(), ParkCounts::meta(), LlfStats::meta()];
    crate::stats_server::deltas(metas, |cur, prev| LlfStats::between(&prev.counters, cur).to_json())
}
