//! The JSON report of `schedbe trace` and its human-readable summary.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::replay::{CpuStats, Diagnostics, WaitSummary};

/// One CPU's figures in the report.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PerCpu {
    pub cpu: u32,
    #[serde(flatten)]
    pub stats: CpuStats,
}

/// Total inversion had the grace period been `grace_us`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct GraceRow {
    pub grace_us: u64,
    pub inversion_ns: u64,
    pub inversion_frac: f64,
}

/// One task in the per-task table (`--per-task`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct TaskRow {
    pub pid: u32,
    pub comm: String,
    /// "lc", "be", "other" or "unknown" (last classification seen).
    pub tier: String,
    pub run_ns: u64,
    pub wait_ns: u64,
    /// BE CPU time charged to this task as the longest waiting LC task (see
    /// `CpuStats::inversion_ns`).
    #[serde(default)]
    pub inversion_ns: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct TraceDiagnostics {
    #[serde(flatten)]
    pub replay: Diagnostics,
    /// Ring buffer records too short or of an unknown type.
    pub undecodable_records: u64,
    /// BE cgroup rescans that failed during the window.
    pub cgroup_scan_errors: u64,
    /// Walks of the `--cgroup` subtrees (at start, then for unknown ids).
    #[serde(default)]
    pub cgroup_walks: u64,
    /// Those that failed (a requested cgroup removed during the window).
    #[serde(default)]
    pub cgroup_walk_errors: u64,
}

/// CPU time of a cgroup's tasks, in milliseconds, by tier.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct CgroupCpuTime {
    pub lc: f64,
    pub be: f64,
    pub other: f64,
    pub total: f64,
}

/// One `--cgroup` in the report: how many CPUs ran its tasks (its own and
/// its descendants') at the same time during the window.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CgroupReport {
    /// Its directory.
    pub path: PathBuf,
    /// Its cgroup id (the directory's inode number).
    pub id: u64,
    /// The most CPUs that ran its tasks at the same instant (held for a
    /// non-zero time); `time_at_cpus_ms` has `max_cpus + 1` entries.
    pub max_cpus: u32,
    /// CPU time of its tasks in the window, by the tier each had when
    /// switched in.
    pub cpu_time_ms: CgroupCpuTime,
    /// Element `k`: time in the window with exactly `k` CPUs running its
    /// tasks, `k = 0..=max_cpus`; sums to the window length.
    pub time_at_cpus_ms: Vec<f64>,
    /// cgroups in its subtree, itself included, at the last walk.
    pub nr_cgroups: usize,
}

/// The JSON report of `schedbe trace`. Times in nanoseconds unless the name
/// says otherwise; `*_frac` are fractions of `totals.cpu_ns`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct TraceReport {
    /// Length of the measurement window.
    pub duration_ns: u64,
    pub grace_ns: u64,
    /// Online CPUs.
    pub nr_cpus: usize,
    /// Records read from the ring buffer (whole trace, warm-up included).
    pub events: u64,
    /// Records the BPF side could not write (ring buffer full). Non-zero means
    /// the figures are unreliable; `warnings` says so too.
    pub dropped_events: u64,
    pub totals: CpuStats,
    pub inversion_frac: f64,
    pub idle_while_lc_waits_frac: f64,
    /// The total inversion for other grace periods (SENSITIVITY_GRACES_US).
    #[serde(default)]
    pub inversion_by_grace: Vec<GraceRow>,
    pub per_cpu: Vec<PerCpu>,
    /// Completed LC waits (runnable -> switched in) that ended in the window.
    pub lc_wait_us: WaitSummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<TaskRow>>,
    /// Per `--cgroup`, keyed by the path as given (absent without `--cgroup`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cgroups: BTreeMap<String, CgroupReport>,
    /// LC tasks still waiting when the window closed (their time is in lc_wait_ns).
    pub lc_waits_open_at_end: u64,
    /// The window, in CLOCK_MONOTONIC nanoseconds.
    pub window_start_ns: u64,
    pub window_end_ns: u64,
    pub be_cgroup_patterns: Vec<String>,
    /// The cgroup v2 mount the patterns were matched under (null: none).
    pub be_cgroup_root: Option<PathBuf>,
    /// cgroups matching the patterns at the last scan.
    pub be_cgroups_matched: usize,
    pub diagnostics: TraceDiagnostics,
    pub warnings: Vec<String>,
}

impl TraceReport {
    /// One-line human summary.
    pub fn verdict(&self) -> String {
        let t = &self.totals;
        let pct = |x: u64| {
            if t.cpu_ns > 0 {
                100.0 * x as f64 / t.cpu_ns as f64
            } else {
                0.0
            }
        };
        let mut s = format!(
            "schedbe trace: {:.2} s x {} CPUs: inversion {:.4}% of CPU time ({:.3} ms, {:.0}% with the waiter queued on another CPU), \
             idle while LC waits {:.4}% ({:.3} ms); LC waits {} (mean {:.1} us, p99 {:.1} us, max {:.1} us); \
             CPU: LC {:.1}%, BE {:.1}%, other {:.1}%, idle {:.1}%",
            self.duration_ns as f64 / 1e9,
            self.nr_cpus,
            100.0 * self.inversion_frac,
            t.inversion_ns as f64 / 1e6,
            if t.inversion_ns > 0 { 100.0 * t.inversion_elsewhere_ns as f64 / t.inversion_ns as f64 } else { 0.0 },
            100.0 * self.idle_while_lc_waits_frac,
            t.idle_while_lc_waits_ns as f64 / 1e6,
            self.lc_wait_us.count,
            self.lc_wait_us.mean,
            self.lc_wait_us.p99,
            self.lc_wait_us.max,
            pct(t.lc_ns),
            pct(t.be_ns),
            pct(t.other_ns),
            pct(t.idle_ns),
        );
        if self.dropped_events > 0 {
            s.push_str(&format!(
                " [UNRELIABLE: {} events dropped]",
                self.dropped_events
            ));
        }
        s
    }

    /// One line per `--cgroup`: the most CPUs at once, CPU time by tier, and
    /// the share of the window spent at each number of CPUs.
    pub fn cgroup_lines(&self) -> Vec<String> {
        let window_ms = self.duration_ns as f64 / 1e6;
        self.cgroups
            .iter()
            .map(|(key, c)| {
                let t = &c.cpu_time_ms;
                let at: Vec<String> = c
                    .time_at_cpus_ms
                    .iter()
                    .enumerate()
                    .map(|(k, ms)| {
                        let pct = if window_ms > 0.0 { 100.0 * ms / window_ms } else { 0.0 };
                        format!("{k}: {pct:.1}%")
                    })
                    .collect();
                format!(
                    "cgroup {key}: at most {} CPUs at once; CPU {:.1} ms (LC {:.1}, BE {:.1}, other {:.1}); time at k CPUs: {}",
                    c.max_cpus,
                    t.total,
                    t.lc,
                    t.be,
                    t.other,
                    at.join(", ")
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_json_shape() {
        let r = TraceReport {
            duration_ns: 1,
            grace_ns: 50_000,
            nr_cpus: 1,
            events: 0,
            dropped_events: 0,
            totals: CpuStats::default(),
            inversion_frac: 0.0,
            idle_while_lc_waits_frac: 0.0,
            inversion_by_grace: vec![GraceRow { grace_us: 200, inversion_ns: 0, inversion_frac: 0.0 }],
            per_cpu: vec![PerCpu {
                cpu: 0,
                stats: CpuStats {
                    cpu_ns: 5,
                    ..Default::default()
                },
            }],
            lc_wait_us: WaitSummary::default(),
            tasks: None,
            cgroups: BTreeMap::new(),
            lc_waits_open_at_end: 0,
            window_start_ns: 0,
            window_end_ns: 1,
            be_cgroup_patterns: vec![],
            be_cgroup_root: None,
            be_cgroups_matched: 0,
            diagnostics: TraceDiagnostics::default(),
            warnings: vec![],
        };
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        for k in [
            "duration_ns",
            "grace_ns",
            "nr_cpus",
            "events",
            "dropped_events",
            "totals",
            "inversion_frac",
            "idle_while_lc_waits_frac",
            "inversion_by_grace",
            "per_cpu",
            "lc_wait_us",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        for k in [
            "cpu_ns",
            "lc_ns",
            "be_ns",
            "idle_ns",
            "other_ns",
            "inversion_ns",
            "inversion_elsewhere_ns",
            "idle_while_lc_waits_ns",
            "lc_wait_ns",
            "lc_waits",
        ] {
            assert!(v["totals"].get(k).is_some(), "missing totals.{k}");
            assert!(v["per_cpu"][0].get(k).is_some(), "missing per_cpu.{k}");
        }
        assert_eq!(v["per_cpu"][0]["cpu"], 0);
        assert_eq!(v["per_cpu"][0]["cpu_ns"], 5);
        for k in ["count", "mean", "p50", "p99", "max"] {
            assert!(v["lc_wait_us"].get(k).is_some(), "missing lc_wait_us.{k}");
        }
        assert!(v.get("tasks").is_none(), "tasks only with --per-task");
        assert!(v.get("cgroups").is_none(), "cgroups only with --cgroup");
        // round trip
        let back: TraceReport = serde_json::from_value(v).unwrap();
        assert_eq!(back.per_cpu, r.per_cpu);
        assert!(r.cgroup_lines().is_empty());

        // with --cgroup
        let mut r = r;
        r.duration_ns = 10_000_000;
        r.cgroups.insert(
            "kubepods.slice/pod1".into(),
            CgroupReport {
                path: "/sys/fs/cgroup/kubepods.slice/pod1".into(),
                id: 42,
                max_cpus: 2,
                cpu_time_ms: CgroupCpuTime {
                    lc: 12.0,
                    be: 0.5,
                    other: 0.0,
                    total: 12.5,
                },
                time_at_cpus_ms: vec![1.0, 6.0, 3.0],
                nr_cgroups: 3,
            },
        );
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        let c = &v["cgroups"]["kubepods.slice/pod1"];
        assert_eq!(c["max_cpus"], 2);
        assert_eq!(c["id"], 42);
        assert_eq!(c["cpu_time_ms"]["lc"], 12.0);
        assert_eq!(c["cpu_time_ms"]["total"], 12.5);
        assert_eq!(c["time_at_cpus_ms"], serde_json::json!([1.0, 6.0, 3.0]));
        assert_eq!(v["diagnostics"]["cgroup_walks"], 0);
        let back: TraceReport = serde_json::from_value(v).unwrap();
        assert_eq!(back.cgroups, r.cgroups);
        assert_eq!(
            r.cgroup_lines(),
            vec!["cgroup kubepods.slice/pod1: at most 2 CPUs at once; CPU 12.5 ms (LC 12.0, BE 0.5, other 0.0); \
                  time at k CPUs: 0: 10.0%, 1: 60.0%, 2: 30.0%"]
        );
    }
}
