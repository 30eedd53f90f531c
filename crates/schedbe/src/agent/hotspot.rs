//! Overload detection and hotspot naming: paper 003's contention-aware host
//! agent, which "detects when a cluster node is overloaded and scales the
//! resources of hotspot functions". The thresholds are choices (the paper
//! gives none); every one is a field of [`Thresholds`].
//!
//! **Overload**, with hysteresis. The node enters overload when PSI cpu
//! `some avg10` (the share of the last 10 s in which a task waited for a
//! CPU) reaches `enter_psi` (20%), or when runnable tasks per CPU reach
//! `enter_runnable_per_cpu` (1.5: on average half a task waiting per CPU).
//! It leaves only after `exit_after` (3) consecutive samples below both
//! `exit_psi` (10%) and `exit_runnable_per_cpu` (1.0). Runnable tasks
//! (`procs_running`, an instantaneous count) are smoothed with the load's
//! half-life first, so one sample's spike does not flip the state; PSI's
//! avg10 is smoothed by the kernel already.
//!
//! **Demand and excess**, in CPUs. n CPUs, target utilisation u* (0.8),
//! sandbox loads L_i (load.rs), U = Σ L_i, smoothed runnable tasks R.
//! Usage cannot exceed n, so under overload U hides the queue; a runnable
//! task wants a CPU, so R counts the waiting demand too: D = max(U, R).
//! Excess E = D − u*·n. Hidden demand is assumed to be spread like usage:
//! sandbox i wants d_i = L_i·ρ with ρ = max(1, D/U).
//!
//! **Hotspots**: the sandboxes by load, largest first (ties by path), taken
//! until their demand Σ d_i reaches E, i.e. until moving them off the node
//! would bring it back to u*, at most `max_hotspots` (5). `covered` says
//! whether they suffice (demand outside sandboxes may not be theirs to fix).
//!
//! **Suggestion** per hotspot: the CPUs at which it would itself run at u*,
//! c_i = d_i / u* (rounded up to 0.1 CPU), and the replicas that gives,
//! ceil(c_i / r_i), with r_i its cpu.max limit in CPUs when it has one, else
//! `replica_cpus` (1.0). An orchestrator either raises the limit to c_i, if
//! the node has room, or runs the extra replicas elsewhere.

use anyhow::{bail, Result};
use serde::Serialize;

use super::load::decay;

#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    pub enter_psi: f64,
    pub exit_psi: f64,
    pub enter_runnable_per_cpu: f64,
    pub exit_runnable_per_cpu: f64,
    pub exit_after: u32,
    pub target_util: f64,
    pub max_hotspots: usize,
    pub replica_cpus: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            enter_psi: 20.0,
            exit_psi: 10.0,
            enter_runnable_per_cpu: 1.5,
            exit_runnable_per_cpu: 1.0,
            exit_after: 3,
            target_util: 0.8,
            max_hotspots: 5,
            replica_cpus: 1.0,
        }
    }
}

impl Thresholds {
    pub fn validate(&self) -> Result<()> {
        let ok = |x: f64, lo: f64, hi: f64| x.is_finite() && x >= lo && x <= hi;
        if !(ok(self.exit_psi, 0.0, 100.0) && ok(self.enter_psi, self.exit_psi, 100.0)) {
            bail!("PSI thresholds must satisfy 0 <= exit ({}) <= enter ({}) <= 100", self.exit_psi, self.enter_psi);
        }
        if !(ok(self.exit_runnable_per_cpu, 0.0, 1e3) && ok(self.enter_runnable_per_cpu, self.exit_runnable_per_cpu, 1e3)) {
            bail!(
                "run-queue thresholds must satisfy 0 <= exit ({}) <= enter ({})",
                self.exit_runnable_per_cpu,
                self.enter_runnable_per_cpu
            );
        }
        if !ok(self.target_util, 0.05, 1.0) {
            bail!("target utilisation must be in [0.05, 1], got {}", self.target_util);
        }
        if !ok(self.replica_cpus, 0.01, 1e4) || self.max_hotspots == 0 || self.exit_after == 0 {
            bail!("replica CPUs must be in [0.01, 10000], and max hotspots and exit-after positive");
        }
        Ok(())
    }
}

/// What the node shows at one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeSignals {
    pub t_ns: u64,
    pub psi_some_avg10: f64,
    pub runnable: u64,
    pub cpus: u64,
}

/// The overload state machine.
#[derive(Debug, Clone)]
pub struct Detector {
    th: Thresholds,
    half_life_s: f64,
    overloaded: bool,
    calm: u32,
    runnable: Option<(u64, f64)>,
}

impl Detector {
    pub fn new(th: Thresholds, half_life_s: f64) -> Result<Self> {
        th.validate()?;
        Ok(Self { th, half_life_s, overloaded: false, calm: 0, runnable: None })
    }

    pub fn thresholds(&self) -> &Thresholds {
        &self.th
    }

    /// Smoothed runnable tasks after the latest step.
    pub fn runnable_avg(&self) -> f64 {
        self.runnable.map_or(0.0, |(_, r)| r)
    }

    /// Take one sample; returns whether the node is overloaded now.
    pub fn step(&mut self, s: &NodeSignals) -> bool {
        let r = s.runnable as f64;
        let avg = match self.runnable {
            Some((t, prev)) if s.t_ns > t => {
                let d = decay((s.t_ns - t) as f64 * 1e-9, self.half_life_s);
                prev * d + r * (1.0 - d)
            }
            Some((_, prev)) => prev,
            None => r,
        };
        self.runnable = Some((s.t_ns, avg));
        let per_cpu = avg / s.cpus.max(1) as f64;
        if s.psi_some_avg10 >= self.th.enter_psi || per_cpu >= self.th.enter_runnable_per_cpu {
            self.overloaded = true;
            self.calm = 0;
        } else if self.overloaded && s.psi_some_avg10 < self.th.exit_psi && per_cpu < self.th.exit_runnable_per_cpu {
            self.calm += 1;
            if self.calm >= self.th.exit_after {
                self.overloaded = false;
                self.calm = 0;
            }
        } else {
            self.calm = 0;
        }
        self.overloaded
    }
}

/// One sandbox's load and limit.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxLoad {
    pub rel: String,
    pub load: f64,
    /// cpu.max quota/period in CPUs, when limited.
    pub limit_cpus: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suggestion {
    /// Estimated demand d_i, CPUs.
    pub demand_cpus: f64,
    /// CPUs at which it would run at the target utilisation.
    pub cpus: f64,
    /// Replicas of r_i CPUs each that provide `cpus`.
    pub replicas: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hotspot {
    #[serde(rename = "cgroup")]
    pub rel: String,
    pub load: f64,
    pub suggestion: Suggestion,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assessment {
    pub overloaded: bool,
    pub demand_cpus: f64,
    pub target_cpus: f64,
    pub excess_cpus: f64,
    pub hotspots: Vec<Hotspot>,
    /// The hotspots' demand reaches the excess.
    pub covered: bool,
}

/// Demand, excess and hotspots for a node of `cpus` CPUs with `runnable_avg`
/// runnable tasks (module header for the formulas). Hotspots are named only
/// when `overloaded` and the excess is positive.
pub fn assess(th: &Thresholds, overloaded: bool, cpus: u64, runnable_avg: f64, sandboxes: &[SandboxLoad]) -> Assessment {
    let usage: f64 = sandboxes.iter().map(|s| s.load.max(0.0)).sum();
    let demand = usage.max(runnable_avg);
    let target = th.target_util * cpus as f64;
    let excess = demand - target;
    let rho = if usage > 0.0 { (demand / usage).max(1.0) } else { 1.0 };
    let mut hotspots = Vec::new();
    let mut got = 0.0;
    if overloaded && excess > 0.0 {
        let mut order: Vec<&SandboxLoad> = sandboxes.iter().filter(|s| s.load > 0.0).collect();
        order.sort_by(|a, b| b.load.total_cmp(&a.load).then_with(|| a.rel.cmp(&b.rel)));
        for s in order.into_iter().take(th.max_hotspots) {
            if got >= excess {
                break;
            }
            let d = s.load * rho;
            got += d;
            let cpus_needed = (d / th.target_util * 10.0).ceil() / 10.0;
            let per = s.limit_cpus.filter(|c| *c > 0.0).unwrap_or(th.replica_cpus);
            let replicas = (cpus_needed / per).ceil().clamp(1.0, u32::MAX as f64) as u32;
            hotspots.push(Hotspot { rel: s.rel.clone(), load: s.load, suggestion: Suggestion { demand_cpus: d, cpus: cpus_needed, replicas } });
        }
    }
    Assessment { overloaded, demand_cpus: demand, target_cpus: target, excess_cpus: excess, covered: got >= excess, hotspots }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn sig(t: u64, psi: f64, runnable: u64) -> NodeSignals {
        NodeSignals { t_ns: t * S, psi_some_avg10: psi, runnable, cpus: 4 }
    }

    #[test]
    fn hysteresis() {
        let mut d = Detector::new(Thresholds::default(), 1.0).unwrap();
        assert!(!d.step(&sig(0, 15.0, 4)), "15% and 1 runnable per CPU: calm");
        assert!(d.step(&sig(1, 25.0, 4)), "PSI over 20%: overloaded");
        assert!(d.step(&sig(2, 15.0, 4)), "between the thresholds: stays");
        assert!(d.step(&sig(3, 5.0, 2)), "calm 1");
        assert!(d.step(&sig(4, 5.0, 2)), "calm 2");
        assert!(!d.step(&sig(5, 5.0, 2)), "calm 3: leaves");
        // Run queue: 4 -> 12 runnable over 1 s of half-life 1 s averages to 8 = 2 per CPU.
        let mut d = Detector::new(Thresholds::default(), 1.0).unwrap();
        assert!(!d.step(&sig(0, 0.0, 4)));
        assert!(d.step(&sig(1, 0.0, 12)));
        assert!((d.runnable_avg() - 8.0).abs() < 1e-12);
        let bad = Thresholds { enter_psi: 5.0, ..Default::default() };
        assert!(Detector::new(bad, 1.0).is_err());
    }

    fn sb(rel: &str, load: f64, limit: Option<f64>) -> SandboxLoad {
        SandboxLoad { rel: rel.into(), load, limit_cpus: limit }
    }

    #[test]
    fn hotspots_hand_checked() {
        let th = Thresholds::default();
        let boxes = [sb("c", 0.5, None), sb("a", 2.0, None), sb("b", 1.0, None), sb("d", 0.5, None)];
        // 4 CPUs, target 3.2; U = 4, R = 6: D = 6, rho = 1.5, E = 2.8.
        let a = assess(&th, true, 4, 6.0, &boxes);
        assert_eq!((a.demand_cpus, a.target_cpus), (6.0, 3.2));
        assert!((a.excess_cpus - 2.8).abs() < 1e-12 && a.covered);
        assert_eq!(a.hotspots.len(), 1);
        // a wants 3.0 CPUs, 3.75 at 80%, so 4 replicas of 1 CPU.
        assert_eq!(a.hotspots[0].rel, "a");
        assert_eq!(a.hotspots[0].suggestion, Suggestion { demand_cpus: 3.0, cpus: 3.8, replicas: 4 });
        // R = 8: D = 8, rho = 2, E = 4.8: a (4.0) is not enough, a + b (6.0) is.
        let a = assess(&th, true, 4, 8.0, &boxes);
        assert_eq!(a.hotspots.iter().map(|h| h.rel.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(a.hotspots[1].suggestion, Suggestion { demand_cpus: 2.0, cpus: 2.5, replicas: 3 });
        // U = 3, R = 6: rho = 2, a wants 4 CPUs, 5 at 80%: 3 replicas of its 2-CPU limit.
        let limited = [sb("a", 2.0, Some(2.0)), sb("b", 1.0, None)];
        let a = assess(&th, true, 4, 6.0, &limited);
        assert_eq!(a.hotspots[0].suggestion, Suggestion { demand_cpus: 4.0, cpus: 5.0, replicas: 3 });
        // Not overloaded, or no excess: no hotspots.
        assert!(assess(&th, false, 4, 8.0, &boxes).hotspots.is_empty());
        assert!(assess(&th, true, 4, 3.0, &[sb("a", 3.0, None)]).hotspots.is_empty());
        // Demand outside the sandboxes: named, but not covered.
        let a = assess(&Thresholds { max_hotspots: 1, ..th }, true, 4, 16.0, &boxes);
        assert!(!a.covered && a.hotspots.len() == 1);
    }
}
