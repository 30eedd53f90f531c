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
    /// Its wakeup latency: waits that began with a wakeup, woken until
    /// switched in, ended in the window; quantiles to 2 significant figures.
    #[serde(default)]
    pub wakeup_latency: LatencyUs,
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

/// A latency distribution of a cgroup's tasks, in microseconds (all 0 when
/// `n` is 0): `wakeup_latency` or `timer_latency` of [`CgroupReport`].
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencyUs {
    pub n: u64,
    pub mean_us: f64,
    /// Quantiles to 3 significant figures (never above `max_us`).
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// One period `[start_ns, start_ns + T)` of a cgroup (`--period-ms T`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct PeriodRow {
    /// Its start, CLOCK_MONOTONIC ns (a multiple of T).
    pub start_ns: u64,
    /// CPU time its tasks ran in it.
    pub cpu_ms: f64,
    /// Time its tasks were runnable but not running in it, summed over tasks.
    pub wait_ms: f64,
}

/// A `--cgroup`'s CPU budget (`--budget PATH=C_MS/T_MS`) and how it was
/// kept, in milliseconds. Periods are `[k*T, (k+1)*T)` of CLOCK_MONOTONIC.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct BudgetReport {
    /// C.
    pub budget_ms: f64,
    /// T.
    pub period_ms: f64,
    /// Periods entirely inside the window.
    pub periods: u64,
    /// Those in which its CPU time exceeded C by more than the grace period.
    pub periods_over: u64,
    /// Its most CPU time in one of them.
    pub max_period_ms: f64,
    /// Its CPU time beyond C in them, summed.
    pub over_budget_ms: f64,
    /// Time it ran with its CPU time in the current period at C or more
    /// while another budgeted cgroup, under its own budget, had a task
    /// waiting longer than the grace period; summed over the other cgroups.
    pub over_budget_while_waiting_ms: f64,
    /// The part with each other cgroup (by key) waiting; non-zero entries
    /// only.
    #[serde(default)]
    pub over_budget_while_waiting_by: BTreeMap<String, f64>,
    /// The longest uninterrupted interval of it (against any other cgroup).
    pub longest_ms: f64,
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
    /// Its CPU request (`--cgroup PATH=REQ`), in CPUs; the reservation
    /// figures below are there only with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_cpus: Option<f64>,
    /// Time its tasks ran on fewer CPUs than its request while one of them
    /// waited for a CPU and another `--cgroup` with a request ran on more
    /// CPUs than its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_inversion_ms: Option<f64>,
    /// The longest uninterrupted interval of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_inversion_longest_ms: Option<f64>,
    /// The part of it during which each other cgroup (by key) was above its
    /// request; non-zero entries only. Several can be above at once, so
    /// these can add up to more than the total.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reservation_inversion_by_ms: BTreeMap<String, f64>,
    /// Wakeup latency of its tasks (a wait counts with the cgroup the task
    /// was last seen in, as for the reservation inversion).
    /// Completed waits that began with a wakeup (woken or new, not
    /// preempted), from becoming runnable to being switched in, that ended
    /// in the window.
    #[serde(default)]
    pub wakeup_latency: LatencyUs,
    /// How late its tasks' sleep timers fired (now - soft expiry, at the
    /// timer's callback; CLOCK_MONOTONIC sleeps: nanosleep,
    /// clock_nanosleep, poll/select timeouts), for timers that fired in the
    /// window. This part of a sleeper's latency comes before its wakeup, so
    /// the scheduler has no hand in it (the timer interrupt, or a CPU with
    /// interrupts off, does).
    #[serde(default)]
    pub timer_latency: LatencyUs,
    /// With `--period-ms T`: its CPU and wait time in each period `[k*T,
    /// (k+1)*T)` of CLOCK_MONOTONIC entirely inside the window, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub periods: Option<Vec<PeriodRow>>,
    /// With `--budget PATH=C_MS/T_MS`: its budget and the over-budget
    /// inversion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReport>,
}

/// Where `--timeline` wrote the run segments.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct TimelineReport {
    pub path: PathBuf,
    /// Rows written (run segments).
    pub segments: usize,
    /// The part of the window it covers, in seconds from the window's start.
    pub start_s: f64,
    pub end_s: f64,
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
    /// `--period-ms`, in ns (absent without it): the period of the
    /// `cgroups.*.periods` series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ns: Option<u64>,
    /// The tick CPU absence was judged by (`CpuStats::absent_ns`; null: not
    /// traced, `warnings` says why).
    #[serde(default)]
    pub absence_tick_ns: Option<u64>,
    /// Per `--cgroup`, keyed by the path as given (absent without `--cgroup`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cgroups: BTreeMap<String, CgroupReport>,
    /// The `--timeline` file (absent without `--timeline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<TimelineReport>,
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
        if t.absences > 0 {
            s.push_str(&format!(
                "; CPUs absent {:.1} ms in {} intervals",
                t.absent_ns as f64 / 1e6,
                t.absences
            ));
        }
        if self.dropped_events > 0 {
            s.push_str(&format!(
                " [UNRELIABLE: {} events dropped]",
                self.dropped_events
            ));
        }
        s
    }

    /// One line per `--cgroup`: the most CPUs at once, CPU time by tier, the
    /// share of the window spent at each number of CPUs, with a request the
    /// reservation inversion, the wakeup latency, with `--period-ms` how
    /// many periods and the most CPU time in one, and with a budget the
    /// periods over it and its over-budget inversion.
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
                let mut line = format!(
                    "cgroup {key}: at most {} CPUs at once; CPU {:.1} ms (LC {:.1}, BE {:.1}, other {:.1}); time at k CPUs: {}",
                    c.max_cpus,
                    t.total,
                    t.lc,
                    t.be,
                    t.other,
                    at.join(", ")
                );
                if let (Some(req), Some(inv)) = (c.request_cpus, c.reservation_inversion_ms) {
                    line.push_str(&format!(
                        "; request {req} CPUs: reservation inversion {inv:.3} ms (longest {:.3} ms)",
                        c.reservation_inversion_longest_ms.unwrap_or(0.0)
                    ));
                    if !c.reservation_inversion_by_ms.is_empty() {
                        let by: Vec<String> = c
                            .reservation_inversion_by_ms
                            .iter()
                            .map(|(b, ms)| format!("{b} {ms:.3} ms"))
                            .collect();
                        line.push_str(&format!(", while above their requests: {}", by.join(", ")));
                    }
                }
                let w = &c.wakeup_latency;
                line.push_str(&format!(
                    "; wakeup latency: {} waits (mean {:.1} us, p99 {:.1} us, max {:.1} us)",
                    w.n, w.mean_us, w.p99_us, w.max_us
                ));
                let t = &c.timer_latency;
                if t.n > 0 {
                    line.push_str(&format!(
                        "; sleep timers fired late: {} (mean {:.1} us, p99 {:.1} us, max {:.1} us)",
                        t.n, t.mean_us, t.p99_us, t.max_us
                    ));
                }
                if let Some(p) = &c.periods {
                    let max = p.iter().map(|r| r.cpu_ms).fold(0.0, f64::max);
                    let of = self
                        .period_ns
                        .map(|ns| format!(" of {} ms", ns as f64 / 1e6))
                        .unwrap_or_default();
                    line.push_str(&format!(
                        "; {} periods{of}: CPU at most {max:.3} ms per period",
                        p.len()
                    ));
                }
                if let Some(b) = &c.budget {
                    line.push_str(&format!(
                        "; budget {}/{} ms: {}/{} periods over, over budget while another waited {:.3} ms (longest {:.3} ms)",
                        b.budget_ms, b.period_ms, b.periods_over, b.periods, b.over_budget_while_waiting_ms, b.longest_ms
                    ));
                }
                line
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of a `duration_ns` window with nothing in it.
    fn empty_report(duration_ns: u64) -> TraceReport {
        TraceReport {
            duration_ns,
            grace_ns: 50_000,
            nr_cpus: 1,
            events: 0,
            dropped_events: 0,
            totals: CpuStats::default(),
            inversion_frac: 0.0,
            idle_while_lc_waits_frac: 0.0,
            inversion_by_grace: vec![],
            per_cpu: vec![],
            lc_wait_us: WaitSummary::default(),
            tasks: None,
            period_ns: None,
            absence_tick_ns: None,
            cgroups: BTreeMap::new(),
            timeline: None,
            lc_waits_open_at_end: 0,
            window_start_ns: 0,
            window_end_ns: duration_ns,
            be_cgroup_patterns: vec![],
            be_cgroup_root: None,
            be_cgroups_matched: 0,
            diagnostics: TraceDiagnostics::default(),
            warnings: vec![],
        }
    }

    #[test]
    fn report_json_shape() {
        let r = TraceReport {
            inversion_by_grace: vec![GraceRow { grace_us: 200, inversion_ns: 0, inversion_frac: 0.0 }],
            per_cpu: vec![PerCpu {
                cpu: 0,
                stats: CpuStats {
                    cpu_ns: 5,
                    ..Default::default()
                },
            }],
            ..empty_report(1)
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
                request_cpus: None,
                reservation_inversion_ms: None,
                reservation_inversion_longest_ms: None,
                reservation_inversion_by_ms: BTreeMap::new(),
                wakeup_latency: LatencyUs {
                    n: 3,
                    mean_us: 20.0,
                    p50_us: 15.0,
                    p99_us: 40.0,
                    max_us: 40.0,
                },
                timer_latency: LatencyUs {
                    n: 5,
                    mean_us: 150.0,
                    p50_us: 100.0,
                    p99_us: 900.0,
                    max_us: 900.0,
                },
                periods: None,
                budget: None,
            },
        );
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        let c = &v["cgroups"]["kubepods.slice/pod1"];
        assert_eq!(c["max_cpus"], 2);
        assert_eq!(c["id"], 42);
        assert_eq!(c["cpu_time_ms"]["lc"], 12.0);
        assert_eq!(c["cpu_time_ms"]["total"], 12.5);
        assert_eq!(c["time_at_cpus_ms"], serde_json::json!([1.0, 6.0, 3.0]));
        assert!(c.get("request_cpus").is_none() && c.get("reservation_inversion_ms").is_none());
        assert_eq!(
            c["wakeup_latency"],
            serde_json::json!({"n": 3, "mean_us": 20.0, "p50_us": 15.0, "p99_us": 40.0, "max_us": 40.0})
        );
        assert_eq!(c["timer_latency"]["p99_us"], 900.0);
        assert!(c.get("periods").is_none(), "periods only with --period-ms");
        assert!(c.get("budget").is_none(), "budget only with --budget");
        assert!(v.get("period_ns").is_none(), "period_ns only with --period-ms");
        assert!(v.get("timeline").is_none(), "timeline only with --timeline");
        assert_eq!(v["diagnostics"]["cgroup_walks"], 0);
        let back: TraceReport = serde_json::from_value(v).unwrap();
        assert_eq!(back.cgroups, r.cgroups);
        assert_eq!(
            r.cgroup_lines(),
            vec!["cgroup kubepods.slice/pod1: at most 2 CPUs at once; CPU 12.5 ms (LC 12.0, BE 0.5, other 0.0); \
                  time at k CPUs: 0: 10.0%, 1: 60.0%, 2: 30.0%; \
                  wakeup latency: 3 waits (mean 20.0 us, p99 40.0 us, max 40.0 us); \
                  sleep timers fired late: 5 (mean 150.0 us, p99 900.0 us, max 900.0 us)"]
        );
    }

    #[test]
    fn reservation_and_timeline_in_the_report() {
        let pod = |req: Option<f64>, inv: Option<f64>, by: &[(&str, f64)]| CgroupReport {
            path: "/sys/fs/cgroup/k/p".into(),
            id: 1,
            max_cpus: 1,
            cpu_time_ms: CgroupCpuTime::default(),
            time_at_cpus_ms: vec![5.0, 5.0],
            nr_cgroups: 1,
            request_cpus: req,
            reservation_inversion_ms: inv,
            reservation_inversion_longest_ms: inv.map(|x| x / 2.0),
            reservation_inversion_by_ms: by.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            wakeup_latency: LatencyUs::default(),
            timer_latency: LatencyUs::default(),
            periods: None,
            budget: None,
        };
        let mut cgroups = BTreeMap::new();
        cgroups.insert("a".to_string(), pod(Some(1.5), Some(2.0), &[("b", 2.0)]));
        cgroups.insert("b".to_string(), pod(Some(2.0), Some(0.0), &[]));
        cgroups.insert("c".to_string(), pod(None, None, &[]));
        let r = TraceReport {
            cgroups,
            timeline: Some(TimelineReport {
                path: "t.csv".into(),
                segments: 12,
                start_s: 0.0,
                end_s: 0.01,
            }),
            ..empty_report(10_000_000)
        };
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        let a = &v["cgroups"]["a"];
        assert_eq!(a["request_cpus"], 1.5);
        assert_eq!(a["reservation_inversion_ms"], 2.0);
        assert_eq!(a["reservation_inversion_longest_ms"], 1.0);
        assert_eq!(a["reservation_inversion_by_ms"], serde_json::json!({"b": 2.0}));
        assert_eq!(v["cgroups"]["b"]["reservation_inversion_ms"], 0.0);
        assert!(v["cgroups"]["b"].get("reservation_inversion_by_ms").is_none());
        assert!(v["cgroups"]["c"].get("reservation_inversion_ms").is_none());
        assert_eq!(v["timeline"]["segments"], 12);
        let back: TraceReport = serde_json::from_value(v).unwrap();
        assert_eq!(back.cgroups, r.cgroups);
        assert_eq!(back.timeline, r.timeline);
        let lines = r.cgroup_lines();
        assert!(
            lines[0].contains(
                "; request 1.5 CPUs: reservation inversion 2.000 ms (longest 1.000 ms), while above their requests: b 2.000 ms; wakeup"
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].ends_with("; request 2 CPUs: reservation inversion 0.000 ms (longest 0.000 ms); \
                                wakeup latency: 0 waits (mean 0.0 us, p99 0.0 us, max 0.0 us)"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].ends_with("time at k CPUs: 0: 50.0%, 1: 50.0%; wakeup latency: 0 waits (mean 0.0 us, p99 0.0 us, max 0.0 us)"),
            "no request: {}",
            lines[2]
        );
    }

    #[test]
    fn periods_in_the_report() {
        let row = |start_ns, cpu_ms, wait_ms| PeriodRow { start_ns, cpu_ms, wait_ms };
        let mut cgroups = BTreeMap::new();
        cgroups.insert(
            "vm1".to_string(),
            CgroupReport {
                path: "/sys/fs/cgroup/vm1".into(),
                id: 7,
                max_cpus: 2,
                cpu_time_ms: CgroupCpuTime::default(),
                time_at_cpus_ms: vec![4.0, 3.0, 3.0],
                nr_cgroups: 1,
                request_cpus: None,
                reservation_inversion_ms: None,
                reservation_inversion_longest_ms: None,
                reservation_inversion_by_ms: BTreeMap::new(),
                wakeup_latency: LatencyUs {
                    n: 1,
                    mean_us: 3000.0,
                    p50_us: 3000.0,
                    p99_us: 3000.0,
                    max_us: 3000.0,
                },
                timer_latency: LatencyUs::default(),
                periods: Some(vec![row(10_000_000, 4.5, 0.0), row(15_000_000, 7.25, 1.5)]),
                budget: None,
            },
        );
        let r = TraceReport {
            cgroups,
            period_ns: Some(5_000_000),
            ..empty_report(10_000_000)
        };
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["period_ns"], 5_000_000);
        assert_eq!(
            v["cgroups"]["vm1"]["periods"],
            serde_json::json!([
                {"start_ns": 10_000_000u64, "cpu_ms": 4.5, "wait_ms": 0.0},
                {"start_ns": 15_000_000u64, "cpu_ms": 7.25, "wait_ms": 1.5},
            ])
        );
        assert_eq!(v["cgroups"]["vm1"]["wakeup_latency"]["p99_us"], 3000.0);
        let back: TraceReport = serde_json::from_value(v).unwrap();
        assert_eq!(back.cgroups, r.cgroups);
        assert_eq!(back.period_ns, Some(5_000_000));
        let lines = r.cgroup_lines();
        assert_eq!(lines.len(), 1, "one line per cgroup");
        assert!(
            lines[0].ends_with(
                "; wakeup latency: 1 waits (mean 3000.0 us, p99 3000.0 us, max 3000.0 us); \
                 2 periods of 5 ms: CPU at most 7.250 ms per period"
            ),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn budget_in_the_report() {
        let vm = |budget| CgroupReport {
            path: "/sys/fs/cgroup/vm1".into(),
            id: 7,
            max_cpus: 1,
            cpu_time_ms: CgroupCpuTime::default(),
            time_at_cpus_ms: vec![5.0, 5.0],
            nr_cgroups: 1,
            request_cpus: None,
            reservation_inversion_ms: None,
            reservation_inversion_longest_ms: None,
            reservation_inversion_by_ms: BTreeMap::new(),
            wakeup_latency: LatencyUs::default(),
            timer_latency: LatencyUs::default(),
            periods: None,
            budget,
        };
        let mut cgroups = BTreeMap::new();
        cgroups.insert(
            "vm1".to_string(),
            vm(Some(BudgetReport {
                budget_ms: 5.0,
                period_ms: 100.0,
                periods: 10,
                periods_over: 2,
                max_period_ms: 8.0,
                over_budget_ms: 4.5,
                over_budget_while_waiting_ms: 3.25,
                over_budget_while_waiting_by: BTreeMap::from([("vm2".to_string(), 3.25)]),
                longest_ms: 2.0,
            })),
        );
        cgroups.insert(
            "vm2".to_string(),
            vm(Some(BudgetReport {
                budget_ms: 2.5,
                period_ms: 10.0,
                ..Default::default()
            })),
        );
        cgroups.insert("vm3".to_string(), vm(None));
        let r = TraceReport {
            cgroups,
            ..empty_report(10_000_000)
        };
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v["cgroups"]["vm1"]["budget"],
            serde_json::json!({
                "budget_ms": 5.0, "period_ms": 100.0, "periods": 10, "periods_over": 2,
                "max_period_ms": 8.0, "over_budget_ms": 4.5,
                "over_budget_while_waiting_ms": 3.25,
                "over_budget_while_waiting_by": {"vm2": 3.25},
                "longest_ms": 2.0,
            })
        );
        assert_eq!(v["cgroups"]["vm2"]["budget"]["over_budget_while_waiting_by"], serde_json::json!({}));
        assert!(v["cgroups"]["vm3"].get("budget").is_none(), "no --budget");
        let back: TraceReport = serde_json::from_value(v).unwrap();
        assert_eq!(back.cgroups, r.cgroups);
        let lines = r.cgroup_lines();
        assert!(
            lines[0].ends_with(
                "; budget 5/100 ms: 2/10 periods over, over budget while another waited 3.250 ms (longest 2.000 ms)"
            ),
            "{}",
            lines[0]
        );
        assert!(lines[1].ends_with("; budget 2.5/10 ms: 0/0 periods over, over budget while another waited 0.000 ms (longest 0.000 ms)"), "{}", lines[1]);
        assert!(lines[2].ends_with("max 0.0 us)"), "{}", lines[2]);
    }
}
