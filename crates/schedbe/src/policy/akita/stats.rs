//! Akita's live statistics (report.rs's per-VM, per-vCPU and per-CPU rows)
//! served over scx_stats (stats_server.rs) to `schedbe stats`, and printed
//! by `schedbe run akita --stats`.

use std::time::Instant;

use scx_stats::prelude::*;

use super::report::{CpuRow, Snapshot, VcpuRow, VmInfo, VmRow};
pub use super::report::Report;
use crate::park::ParkCounts;

/// The daemon's state at one instant, counters cumulative since load.
pub struct Sample {
    pub vms: Vec<VmInfo>,
    pub snap: Snapshot,
    pub parking: ParkCounts,
    pub started: Instant,
}

/// The interval from `prev` to `cur`, for the VMs admitted at `cur`.
pub fn report(prev: &Sample, cur: &Sample) -> Report {
    let mut r = Report::between(&cur.vms, &prev.snap, &cur.snap, cur.started);
    r.parking = cur.parking;
    r
}

pub fn server_data() -> StatsServerData<(), Sample> {
    let metas = vec![VmRow::meta(), VcpuRow::meta(), CpuRow::meta(), ParkCounts::meta(), Report::meta()];
    crate::stats_server::deltas(metas, |cur, prev| report(prev, cur).to_json())
}
