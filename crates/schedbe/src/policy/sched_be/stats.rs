//! SCHED_BE's live statistics, following the scx_stats conventions (served
//! by stats_server.rs to `schedbe stats` and scx tools, and the same data
//! printed by `schedbe run --stats`).

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Result;
use scx_stats::prelude::*;
use scx_stats_derive::{stat_doc, Stats};
use serde::{Deserialize, Serialize};

pub use crate::cpumax::CgroupBw;

/// Counters over an interval (times in ms, shares in % of all CPUs).
#[stat_doc]
#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(top, _schedbe_policy = "sched-be")]
pub struct Metrics {
    #[stat(desc = "Length of the reporting interval (ms)")]
    pub interval_ms: f64,
    #[stat(desc = "Number of CPUs")]
    pub nr_cpus: u64,
    #[stat(desc = "CPU time of LC tasks (ms)")]
    pub lc_ms: f64,
    #[stat(desc = "CPU time of BE tasks (ms)")]
    pub be_ms: f64,
    #[stat(desc = "LC share of total CPU capacity (%)")]
    pub lc_pct: f64,
    #[stat(desc = "BE share of total CPU capacity (%)")]
    pub be_pct: f64,
    #[stat(desc = "Entry check: LC wakeups that preempted a CPU running BE")]
    pub preempt_be: u64,
    #[stat(desc = "Entry check: mean time from the preempting kick to an LC task running there (us)")]
    pub kick_lat_us: f64,
    #[stat(desc = "Entry check: kicks whose latency was measured")]
    pub kick_lat_n: u64,
    #[stat(desc = "Entry check: sum of measured kick latencies (ms, cumulative)")]
    pub kick_lat_ms_sum: f64,
    #[stat(desc = "Exit check: CPUs that took a waiting LC task instead of continuing BE")]
    pub exit_takes: u64,
    #[stat(desc = "BE tasks that gave their CPU back as they started because LC was queued")]
    pub running_yields: u64,
    #[stat(desc = "Backstop: BE tasks that yielded at a tick because LC was queued")]
    pub tick_yields: u64,
    #[stat(desc = "LC wakeups that preempted an LC task which had run its share (no CPU idle or running BE)")]
    pub lc_preempt: u64,
    #[stat(desc = "Of lc_preempt: those of the CPU the wakeup ran on (no IPI)")]
    #[serde(default)]
    pub lc_preempt_local: u64,
    #[stat(desc = "LC wakeups that found an LC task they may preempt only once it has run its minimum, and timed its preemption to then")]
    #[serde(default)]
    pub lc_preempt_later: u64,
    #[stat(desc = "Reservations: LC wakeups of a cgroup within its claim that preempted a cgroup above its fair share")]
    #[serde(default)]
    pub resv_preempt: u64,
    #[stat(desc = "Reservations: cgroups with an entitlement slot now")]
    #[serde(default)]
    pub resv_groups: u64,
    #[stat(desc = "Idle CPUs woken for a queued task")]
    pub kick_idle: u64,
    #[stat(desc = "LC wakeups placed directly on an idle CPU")]
    pub lc_direct: u64,
    #[stat(desc = "Synchronous LC wakeups sent to an idle CPU instead of sharing the waker's CPU")]
    #[serde(default)]
    pub sync_unstacks: u64,
    #[stat(desc = "LC tasks taken from the shared LC queues")]
    pub lc_dispatches: u64,
    #[stat(desc = "BE tasks taken from the BE queues")]
    pub be_dispatches: u64,
    #[stat(desc = "Starvation guard: BE slices given while LC was runnable")]
    pub guard_slices: u64,
    #[stat(desc = "CPU time the guard slices took from LC (ms)")]
    pub guard_ms: f64,
    #[stat(desc = "Queued BE tasks that had become LC (cpu.idle=0, cgroup move, killed) and were run")]
    pub requeued_lc: u64,
    #[stat(desc = "BE tasks run as LC to reach the freezer trap (parking)")]
    pub freeze_boosts: u64,
    #[stat(desc = "Tasks preempted inside an RCU read-side section, queued at the front (any tier)")]
    #[serde(default)]
    pub rcu_boosts: u64,
    #[stat(desc = "BE tasks reported starved beyond park_after_ms")]
    pub starved_reports: u64,
    #[stat(desc = "Local queues sent back to enqueue because an RT/DL task took the CPU")]
    #[serde(default)]
    pub rt_evacuations: u64,
    #[stat(desc = "Local queues of CPUs held by an RT/DL task, sent back to enqueue from another CPU")]
    #[serde(default)]
    pub rt_rescues: u64,
    #[stat(desc = "BE cgroups parked (frozen) now")]
    pub parked_cgroups: u64,
    #[stat(desc = "Threads in parked cgroups now")]
    pub parked_tasks: u64,
    #[stat(desc = "Cgroups parked")]
    pub park_events: u64,
    #[stat(desc = "Cgroups unparked")]
    pub unpark_events: u64,
    #[stat(desc = "Cgroups matching the BE path patterns")]
    pub be_cgroups: u64,
    #[stat(desc = "Cgroups with a cpu.max limit (enforced by schedbe)")]
    #[serde(default)]
    pub cpu_max_cgroups: u64,
    #[stat(desc = "cpu.max: tasks put in a throttled cgroup's holding queue")]
    #[serde(default)]
    pub bw_holds: u64,
    #[stat(desc = "cpu.max: held tasks released at a period boundary")]
    #[serde(default)]
    pub bw_releases: u64,
    #[stat(desc = "cpu.max concurrency mode: tasks that got a CPU without their cgroups' tokens and gave it back (a backstop; 0 expected)")]
    #[serde(default)]
    pub bw_conc_yields: u64,
    #[stat(desc = "cpu.max: limits (re)started with a full quota")]
    #[serde(default)]
    pub bw_restarts: u64,
    #[stat(desc = "cpu.max: overrun forgiven because paying it would throttle longer than 10 s (ms)")]
    #[serde(default)]
    pub bw_forgiven_ms: f64,
    #[stat(desc = "cpu.max: throttled cgroups released at a period boundary")]
    #[serde(default)]
    pub bw_unthrottles: u64,
    #[stat(desc = "cpu.max: how late the timer fired for those releases, summed (ms)")]
    #[serde(default)]
    pub bw_late_ms: f64,
    #[stat(desc = "cpu.max: per limited cgroup, cumulative counters as in cpu.stat")]
    #[serde(default)]
    pub cgroups: BTreeMap<String, CgroupBw>,
}

impl Metrics {
    pub const HEADER: &'static str =
        "   lc%    be%  preempt_be kick_us exit_takes run_yld tick_yld  kick_idle  lc_direct guard guard_ms parked(cg/thr) park unpark be_cg cpu.max thr_cg  holds";

    pub fn format_row<W: Write>(&self, w: &mut W) -> Result<()> {
        writeln!(
            w,
            "{:>6.1} {:>6.1} {:>11} {:>7.0} {:>10} {:>7} {:>8} {:>10} {:>10} {:>5} {:>8.1} {:>14} {:>4} {:>6} {:>5} {:>7} {:>6} {:>6}",
            self.lc_pct,
            self.be_pct,
            self.preempt_be,
            self.kick_lat_us,
            self.exit_takes,
            self.running_yields,
            self.tick_yields,
            self.kick_idle,
            self.lc_direct,
            self.guard_slices,
            self.guard_ms,
            format!("{}/{}", self.parked_cgroups, self.parked_tasks),
            self.park_events,
            self.unpark_events,
            self.be_cgroups,
            self.cpu_max_cgroups,
            self.cgroups.values().filter(|c| c.throttled != 0).count(),
            self.bw_holds
        )?;
        Ok(())
    }
}

impl Metrics {
    /// The run loop produces cumulative metrics (interval_ms = uptime);
    /// consumers report the difference between two of them.
    pub fn delta(&self, prev: &Self) -> Self {
        let interval_ms = (self.interval_ms - prev.interval_ms).max(1e-9);
        let cap = interval_ms * self.nr_cpus.max(1) as f64;
        let lc_ms = self.lc_ms - prev.lc_ms;
        let be_ms = self.be_ms - prev.be_ms;
        Self {
            interval_ms,
            nr_cpus: self.nr_cpus,
            lc_ms,
            be_ms,
            lc_pct: 100.0 * lc_ms / cap,
            be_pct: 100.0 * be_ms / cap,
            preempt_be: self.preempt_be - prev.preempt_be,
            kick_lat_n: self.kick_lat_n - prev.kick_lat_n,
            kick_lat_ms_sum: self.kick_lat_ms_sum - prev.kick_lat_ms_sum,
            kick_lat_us: if self.kick_lat_n > prev.kick_lat_n {
                1e3 * (self.kick_lat_ms_sum - prev.kick_lat_ms_sum) / (self.kick_lat_n - prev.kick_lat_n) as f64
            } else {
                0.0
            },
            exit_takes: self.exit_takes - prev.exit_takes,
            tick_yields: self.tick_yields - prev.tick_yields,
            running_yields: self.running_yields - prev.running_yields,
            lc_preempt: self.lc_preempt - prev.lc_preempt,
            lc_preempt_local: self.lc_preempt_local - prev.lc_preempt_local,
            lc_preempt_later: self.lc_preempt_later - prev.lc_preempt_later,
            resv_preempt: self.resv_preempt - prev.resv_preempt,
            resv_groups: self.resv_groups,
            bw_conc_yields: self.bw_conc_yields - prev.bw_conc_yields,
            kick_idle: self.kick_idle - prev.kick_idle,
            lc_direct: self.lc_direct - prev.lc_direct,
            sync_unstacks: self.sync_unstacks - prev.sync_unstacks,
            lc_dispatches: self.lc_dispatches - prev.lc_dispatches,
            be_dispatches: self.be_dispatches - prev.be_dispatches,
            guard_slices: self.guard_slices - prev.guard_slices,
            guard_ms: self.guard_ms - prev.guard_ms,
            requeued_lc: self.requeued_lc - prev.requeued_lc,
            freeze_boosts: self.freeze_boosts - prev.freeze_boosts,
            rcu_boosts: self.rcu_boosts - prev.rcu_boosts,
            starved_reports: self.starved_reports - prev.starved_reports,
            rt_evacuations: self.rt_evacuations - prev.rt_evacuations,
            rt_rescues: self.rt_rescues - prev.rt_rescues,
            parked_cgroups: self.parked_cgroups,
            parked_tasks: self.parked_tasks,
            park_events: self.park_events - prev.park_events,
            unpark_events: self.unpark_events - prev.unpark_events,
            be_cgroups: self.be_cgroups,
            cpu_max_cgroups: self.cpu_max_cgroups,
            bw_holds: self.bw_holds - prev.bw_holds,
            bw_releases: self.bw_releases - prev.bw_releases,
            bw_restarts: self.bw_restarts - prev.bw_restarts,
            bw_forgiven_ms: self.bw_forgiven_ms - prev.bw_forgiven_ms,
            bw_unthrottles: self.bw_unthrottles - prev.bw_unthrottles,
            bw_late_ms: self.bw_late_ms - prev.bw_late_ms,
            cgroups: self.cgroups.clone(),
        }
    }
}

pub fn server_data() -> StatsServerData<(), Metrics> {
    crate::stats_server::deltas(vec![CgroupBw::meta(), Metrics::meta()], |cur, prev| cur.delta(prev).to_json())
}
