//! The Kubernetes experiments' figures per configuration, from the tracer's
//! per-pod report (`--cgroup PATH=REQ`): CPUs each pod used, service2's
//! share of the CPU service1 (and the RT harness) left, the most CPUs each
//! pod ran on at once, and service1's reservation inversion.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::kube_exp::PodRun;
use crate::report::{col, fmt_spread};
use crate::runner::RunOutcome;
use crate::stats::Spread;
use crate::tracer::TraceFigures;

/// Over a configuration's repetitions; "before" is the LC-alone phase's
/// trace, "after" service2's.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct PodsAggregate {
    pub config: String,
    /// CPUs (CPU time / window) of each pod
    pub service1_cpus_before: Option<Spread>,
    pub service1_cpus_after: Option<Spread>,
    pub service2_cpus_after: Option<Spread>,
    /// service2's CPU time / (all CPU time - service1's - RT's), in %
    pub service2_share_of_left_pct: Option<Spread>,
    pub service1_max_cpus_after: Option<Spread>,
    pub service2_max_cpus_after: Option<Spread>,
    /// service1 below its request with a thread waiting while service2 ran
    /// above its own (ms per second of window); the LC-alone phase is a control
    pub service1_inversion_ms_per_s_before: Option<Spread>,
    pub service1_inversion_ms_per_s_after: Option<Spread>,
    pub service1_inversion_longest_ms_after: Option<Spread>,
    /// The kernel's cpu.stat: % of service1's periods in which CFS throttled
    /// it (moves under EEVDF only: a sched_ext scheduler enforces cpu.max itself)
    #[serde(default)]
    pub service1_kernel_throttled_pct_before: Option<Spread>,
    #[serde(default)]
    pub service1_kernel_throttled_pct_after: Option<Spread>,
    /// Time each pod ran on more CPUs than ceil(its limit), ms per second
    /// of the window with service2 (concurrency mode's bound)
    #[serde(default)]
    pub service1_over_limit_ms_per_s_after: Option<Spread>,
    #[serde(default)]
    pub service2_over_limit_ms_per_s_after: Option<Spread>,
}

/// Time `key` ran on more than ceil(`limit_milli`) CPUs at once, ms per s.
fn over_limit(t: &TraceFigures, key: &str, limit_milli: Option<u64>) -> Option<f64> {
    let cap = limit_milli?.div_ceil(1000) as usize;
    let at = &t.cgroups.get(key)?.time_at_cpus_ms;
    Some(at.iter().skip(cap + 1).sum::<f64>() / window_s(t)?)
}

fn throttled_pct(c: &crate::kube_exp::CpuStat) -> Option<f64> {
    (c.nr_periods > 0).then(|| 100.0 * c.nr_throttled as f64 / c.nr_periods as f64)
}

fn window_s(t: &TraceFigures) -> Option<f64> {
    (t.duration_ns > 0).then(|| t.duration_ns as f64 / 1e9)
}

fn cpus(t: &TraceFigures, key: &str) -> Option<f64> {
    Some(t.cgroups.get(key)?.cpu_ms / 1e3 / window_s(t)?)
}

/// service2's CPU time over what service1 and the RT harness left, on the
/// node's CPUs only when `--cpus` named them (a client CPU is no CPU
/// service2 could have used).
fn share_of_left(t: &TraceFigures, p: &PodRun) -> Option<f64> {
    let s1 = t.cgroups.get(&p.service1_pod)?.cpu_ms * 1e6;
    let s2 = t.cgroups.get(&p.service2_pod)?.cpu_ms * 1e6;
    let node: Vec<_> = t.per_cpu.iter().filter(|c| p.node_cpu_list.contains(&c.cpu)).collect();
    // no list (every CPU is the node's), or a tracer without per-CPU times
    let (cpu, other) = if node.is_empty() {
        (t.cpu_ns, t.other_ns)
    } else {
        (node.iter().map(|c| c.cpu_ns).sum(), node.iter().map(|c| c.other_ns).sum())
    };
    let left = cpu as f64 - s1 - other as f64;
    (left > 0.0).then(|| 100.0 * s2 / left)
}

fn inversion_per_s(t: &TraceFigures, key: &str) -> Option<f64> {
    Some(t.cgroups.get(key)?.reservation_inversion_ms? / window_s(t)?)
}

/// One row per configuration, in the order given.
pub fn aggregate(configs: &[(String, String)], runs: &[RunOutcome], p: &PodRun) -> Vec<PodsAggregate> {
    configs
        .iter()
        .map(|(name, _)| {
            let ok: Vec<&RunOutcome> = runs.iter().filter(|r| &r.config == name && r.ok).collect();
            let (s1, s2) = (p.service1_pod.as_str(), p.service2_pod.as_str());
            PodsAggregate {
                config: name.clone(),
                service1_cpus_before: col(&ok, |r| cpus(r.trace_lc.as_ref()?, s1)),
                service1_cpus_after: col(&ok, |r| cpus(r.trace_be.as_ref()?, s1)),
                service2_cpus_after: col(&ok, |r| cpus(r.trace_be.as_ref()?, s2)),
                service2_share_of_left_pct: col(&ok, |r| share_of_left(r.trace_be.as_ref()?, p)),
                service1_max_cpus_after: col(&ok, |r| Some(r.trace_be.as_ref()?.cgroups.get(s1)?.max_cpus as f64)),
                service2_max_cpus_after: col(&ok, |r| Some(r.trace_be.as_ref()?.cgroups.get(s2)?.max_cpus as f64)),
                service1_inversion_ms_per_s_before: col(&ok, |r| inversion_per_s(r.trace_lc.as_ref()?, s1)),
                service1_inversion_ms_per_s_after: col(&ok, |r| inversion_per_s(r.trace_be.as_ref()?, s1)),
                service1_inversion_longest_ms_after: col(&ok, |r| r.trace_be.as_ref()?.cgroups.get(s1)?.reservation_inversion_longest_ms),
                service1_kernel_throttled_pct_before: col(&ok, |r| throttled_pct(&r.pods_cpu_stat.as_ref()?.service1_before)),
                service1_kernel_throttled_pct_after: col(&ok, |r| throttled_pct(&r.pods_cpu_stat.as_ref()?.service1_after)),
                service1_over_limit_ms_per_s_after: col(&ok, |r| over_limit(r.trace_be.as_ref()?, s1, Some(p.service1_milli))),
                service2_over_limit_ms_per_s_after: col(&ok, |r| over_limit(r.trace_be.as_ref()?, s2, p.service2_limit_milli)),
            }
        })
        .collect()
}

/// The markdown section of the summary.
pub fn markdown(m: &mut String, p: &PodRun, rows: &[PodsAggregate]) {
    let cpus = |milli: u64| format!("{}", milli as f64 / 1000.0);
    let _ = writeln!(
        m,
        "\n## Pods\n\nNode: {} CPUs. service1: Guaranteed, request = limit = {} CPUs. service2: {}, request {} CPUs, {}. From the tracer (`--cgroup POD=REQUEST`): \"before\" is service1 alone, \"after\" is with service2; share of left = service2's CPU time / (the node's CPU time − service1's − the RT harness's there); reservation inversion = time service1 ran on fewer CPUs than its request with a thread waiting while service2 ran on more than its own, per second of window.\n",
        p.node_cpus,
        cpus(p.service1_milli),
        if p.service2_limit_milli.is_some() { "Guaranteed" } else { "Burstable" },
        cpus(p.service2_request_milli),
        p.service2_limit_milli.map_or("no limit".to_string(), |l| format!("limit {} CPUs", cpus(l)))
    );
    let _ = writeln!(m, "| config | service1 CPUs before | after | service2 CPUs | service2 % of left | service1 max CPUs at once | service2 max CPUs at once | service1 reservation inversion ms/s before | after | longest (ms) | service1 periods throttled by CFS % before | after | service1 / service2 above ceil(limit) CPUs, ms/s |");
    let _ = writeln!(m, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for a in rows {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            a.config,
            fmt_spread(&a.service1_cpus_before, 2),
            fmt_spread(&a.service1_cpus_after, 2),
            fmt_spread(&a.service2_cpus_after, 2),
            fmt_spread(&a.service2_share_of_left_pct, 1),
            fmt_spread(&a.service1_max_cpus_after, 0),
            fmt_spread(&a.service2_max_cpus_after, 0),
            fmt_spread(&a.service1_inversion_ms_per_s_before, 1),
            fmt_spread(&a.service1_inversion_ms_per_s_after, 1),
            fmt_spread(&a.service1_inversion_longest_ms_after, 1),
            fmt_spread(&a.service1_kernel_throttled_pct_before, 1),
            fmt_spread(&a.service1_kernel_throttled_pct_after, 1),
            format!("{} / {}", fmt_spread(&a.service1_over_limit_ms_per_s_after, 1), fmt_spread(&a.service2_over_limit_ms_per_s_after, 1)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracer::{CgroupFigures, CpuTimes};

    fn pods() -> PodRun {
        PodRun {
            node_cpus: 2,
            node_cpu_list: Vec::new(),
            service1_milli: 1000,
            service2_request_milli: 500,
            service2_limit_milli: None,
            service1_container: "/c1".into(),
            service2_container: "/c2".into(),
            service1_pod: "s1".into(),
            service2_pod: "s2".into(),
            timeline_window: "1:1.5".into(),
        }
    }

    fn trace(s1_ms: f64, s2_ms: f64, inv: f64) -> TraceFigures {
        let mut t = TraceFigures { duration_ns: 2_000_000_000, cpu_ns: 4_000_000_000, other_ns: 200_000_000, ..Default::default() };
        t.cgroups.insert("s1".into(), CgroupFigures { cpu_ms: s1_ms, max_cpus: 2, request_cpus: Some(1.0), reservation_inversion_ms: Some(inv), time_at_cpus_ms: vec![1000.0, 600.0, 400.0], ..Default::default() });
        t.cgroups.insert("s2".into(), CgroupFigures { cpu_ms: s2_ms, max_cpus: 2, request_cpus: Some(0.5), reservation_inversion_ms: Some(0.0), ..Default::default() });
        t
    }

    /// The client on a CPU of its own: only the node's CPUs count. By hand:
    /// 2 s on CPUs 0-1 = 4000 ms, RT 100 ms there, service1 1000 ms leave
    /// 2900 ms, of which service2 took 2610: 90%. Over all 3 CPUs (6000 ms,
    /// RT 1300 ms) it would have been 2610 / 3700 = 70.5%.
    #[test]
    fn share_of_left_counts_the_node_cpus_only() {
        let mut t = trace(1000.0, 2610.0, 0.0);
        t.cpu_ns = 6_000_000_000;
        t.other_ns = 1_300_000_000;
        t.per_cpu = (0..3).map(|cpu| CpuTimes { cpu, cpu_ns: 2_000_000_000, other_ns: [50, 50, 1200][cpu as usize] * 1_000_000 }).collect();
        let mut p = pods();
        assert!((share_of_left(&t, &p).unwrap() - 100.0 * 2610.0 / 3700.0).abs() < 1e-9);
        p.node_cpu_list = vec![0, 1];
        assert!((share_of_left(&t, &p).unwrap() - 90.0).abs() < 1e-9);
    }

    /// By hand: 2 s on 2 CPUs = 4000 ms; service1 1000 ms, RT 200 ms leave
    /// 2800 ms, of which service2 took 2660: 95%.
    #[test]
    fn figures_by_hand() {
        let runs: Vec<RunOutcome> = (0..3)
            .map(|rep| RunOutcome {
                config: "x".into(),
                rep,
                ok: true,
                trace_lc: Some(trace(900.0, 0.0, 0.0)),
                trace_be: Some(trace(1000.0, 2660.0, 30.0 * (rep + 1) as f64)),
                ..Default::default()
            })
            .collect();
        let a = &aggregate(&[("x".into(), String::new())], &runs, &pods())[0];
        let med = |s: &Option<Spread>| s.as_ref().unwrap().median;
        assert!((med(&a.service2_share_of_left_pct) - 95.0).abs() < 1e-9);
        assert!((med(&a.service1_cpus_before) - 0.45).abs() < 1e-12);
        assert!((med(&a.service2_cpus_after) - 1.33).abs() < 1e-12);
        assert_eq!(med(&a.service1_inversion_ms_per_s_after), 30.0);
        assert_eq!(a.service1_inversion_ms_per_s_after.as_ref().unwrap().max, 45.0);
        assert_eq!(med(&a.service2_max_cpus_after), 2.0);
        // service1's limit is 1 CPU: 400 ms of 2 s at 2 CPUs = 200 ms/s; service2 has no limit.
        assert_eq!(med(&a.service1_over_limit_ms_per_s_after), 200.0);
        assert!(a.service2_over_limit_ms_per_s_after.is_none());
        let mut m = String::new();
        markdown(&mut m, &pods(), &[a.clone()]);
        assert!(m.contains("Burstable, request 0.5 CPUs, no limit") && m.contains("| x | 0.45 [0.45–0.45] |"), "{m}");
    }
}
