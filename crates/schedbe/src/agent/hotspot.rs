//! Overload detection and hotspot naming: paper 003's contention-aware host
//! agent, which "detects when a cluster node is overloaded and scales the
//! resources of hotspot functions". The thresholds are choices (the paper
//! gives none); every one is a field of [`Thresholds`].
//!
//! **Overload** is CPU saturation with waiting, over the last sampling
//! interval, with hysteresis. Two rates, from cumulative counters so that
//! they describe exactly the interval:
//! - the PSI cpu `some` share: the part of the interval in which some task
//!   waited for a CPU (the `total=` µs counter of /proc/pressure/cpu);
//! - the busy share: the part of the CPUs' time not idle (the aggregate
//!   `cpu` line of /proc/stat, idle and iowait against all).
//!
//! The node enters overload after `enter_after` (2) consecutive intervals
//! with PSI some >= `enter_psi` (50%) and busy >= `enter_busy` (0.9), so a
//! 1 s interval detects a step into overload in about 2-3 s. It leaves after
//! `exit_after` (3) consecutive intervals with PSI some < `exit_psi` (25%)
//! or busy < `exit_busy` (0.8). Neither PSI's avg10 (a 10 s average, slow
//! to rise after a step and as slow to forget one) nor the run queue alone
//! decides: under bursty arrivals a node at half load has moments of several
//! runnable tasks per CPU and some PSI, while its CPUs are idle half the
//! time (docs/serverless.md, "The host agent core", holds the figures).
//! Without the `cpu` line (a fake /proc), PSI decides alone.
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

use crate::sandbox::load::decay;

#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// PSI cpu some over the interval, percent.
    pub enter_psi: f64,
    pub exit_psi: f64,
    /// Busy share of the CPUs over the interval, 0..1.
    pub enter_busy: f64,
    pub exit_busy: f64,
    pub enter_after: u32,
    pub exit_after: u32,
    pub target_util: f64,
    pub max_hotspots: usize,
    pub replica_cpus: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            enter_psi: 50.0,
            exit_psi: 25.0,
            enter_busy: 0.9,
            exit_busy: 0.8,
            enter_after: 2,
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
        if !(ok(self.exit_busy, 0.0, 1.0) && ok(self.enter_busy, self.exit_busy, 1.0)) {
            bail!("busy thresholds must satisfy 0 <= exit ({}) <= enter ({}) <= 1", self.exit_busy, self.enter_busy);
        }
        if !ok(self.target_util, 0.05, 1.0) {
            bail!("target utilisation must be in [0.05, 1], got {}", self.target_util);
        }
        if !ok(self.replica_cpus, 0.01, 1e4) || self.max_hotspots == 0 || self.exit_after == 0 || self.enter_after == 0 {
            bail!("replica CPUs must be in [0.01, 10000], and max hotspots, enter-after and exit-after positive");
        }
        Ok(())
    }
}

/// What the node shows at one sample: cumulative counters and the run queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeSignals {
    pub t_ns: u64,
    /// PSI cpu some `total=`, µs.
    pub psi_some_total_us: u64,
    /// (busy, all) CPU time of /proc/stat's `cpu` line, in ticks; None if absent.
    pub cpu_ticks: Option<(u64, u64)>,
    pub runnable: u64,
    pub cpus: u64,
}

/// The rates of the last interval (None at the first sample).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rates {
    /// Percent of the interval in which some task waited for a CPU.
    pub psi_some_pct: Option<f64>,
    /// Share of the CPUs' time that was not idle.
    pub busy: Option<f64>,
}

/// The overload state machine.
#[derive(Debug, Clone)]
pub struct Detector {
    th: Thresholds,
    half_life_s: f64,
    overloaded: bool,
    hot: u32,
    calm: u32,
    runnable: Option<(u64, f64)>,
    prev: Option<NodeSignals>,
    rates: Rates,
}

impl Detector {
    pub fn new(th: Thresholds, half_life_s: f64) -> Result<Self> {
        th.validate()?;
        Ok(Self { th, half_life_s, overloaded: false, hot: 0, calm: 0, runnable: None, prev: None, rates: Rates::default() })
    }

    pub fn thresholds(&self) -> &Thresholds {
        &self.th
    }

    /// Smoothed runnable tasks after the latest step.
    pub fn runnable_avg(&self) -> f64 {
        self.runnable.map_or(0.0, |(_, r)| r)
    }

    /// The latest interval's rates.
    pub fn rates(&self) -> Rates {
        self.rates
    }

    fn interval_rates(prev: &NodeSignals, s: &NodeSignals) -> Rates {
        let dt_us = s.t_ns.saturating_sub(prev.t_ns) as f64 / 1e3;
        let psi = (dt_us > 0.0).then(|| (100.0 * s.psi_some_total_us.saturating_sub(prev.psi_some_total_us) as f64 / dt_us).min(100.0));
        let busy = match (prev.cpu_ticks, s.cpu_ticks) {
            (Some((b0, a0)), Some((b1, a1))) if a1 > a0 => Some((b1.saturating_sub(b0) as f64 / (a1 - a0) as f64).min(1.0)),
            _ => None,
        };
        Rates { psi_some_pct: psi, busy }
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
        let prev = self.prev.replace(*s);
        let Some(prev) = prev else { return self.overloaded };
        self.rates = Self::interval_rates(&prev, s);
        let Some(psi) = self.rates.psi_some_pct else { return self.overloaded };
        let busy = self.rates.busy;
        if !self.overloaded {
            let hot = psi >= self.th.enter_psi && busy.is_none_or(|b| b >= self.th.enter_busy);
            self.hot = if hot { self.hot + 1 } else { 0 };
            if self.hot >= self.th.enter_after {
                self.overloaded = true;
                self.calm = 0;
            }
        } else {
            let calm = psi < self.th.exit_psi || busy.is_some_and(|b| b < self.th.exit_busy);
            self.calm = if calm { self.calm + 1 } else { 0 };
            if self.calm >= self.th.exit_after {
                self.overloaded = false;
                self.hot = 0;
                self.calm = 0;
            }
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

    /// Sample t (seconds) with the PSI some percent and busy share of the
    /// interval before it (cumulative counters built from them).
    struct Feed {
        total_us: u64,
        ticks: (u64, u64),
    }

    impl Feed {
        fn sig(&mut self, t: u64, psi_pct: f64, busy: Option<f64>, runnable: u64) -> NodeSignals {
            self.total_us += (psi_pct * 1e4) as u64;
            self.ticks = (self.ticks.0 + (busy.unwrap_or(0.0) * 400.0) as u64, self.ticks.1 + 400);
            NodeSignals { t_ns: t * S, psi_some_total_us: self.total_us, cpu_ticks: busy.map(|_| self.ticks), runnable, cpus: 4 }
        }
    }

    #[test]
    fn hysteresis() {
        let mut d = Detector::new(Thresholds::default(), 1.0).unwrap();
        let mut f = Feed { total_us: 0, ticks: (0, 0) };
        let b = Some(0.95);
        assert!(!d.step(&f.sig(0, 0.0, b, 4)), "first sample: no rates yet");
        assert!(!d.step(&f.sig(1, 40.0, b, 16)), "PSI 40%: calm, whatever the run queue");
        assert!(!d.step(&f.sig(2, 80.0, Some(0.6), 16)), "waiting, but CPUs idle 40%: calm");
        assert!(!d.step(&f.sig(3, 80.0, b, 4)), "hot 1");
        assert!(d.step(&f.sig(4, 70.0, b, 4)), "hot 2: overloaded");
        assert_eq!(d.rates(), Rates { psi_some_pct: Some(70.0), busy: Some(0.95) });
        assert!(d.step(&f.sig(5, 30.0, b, 4)), "between the thresholds: stays");
        assert!(d.step(&f.sig(6, 10.0, b, 2)), "calm 1");
        assert!(d.step(&f.sig(7, 90.0, Some(0.5), 2)), "calm 2 (CPUs half idle)");
        assert!(!d.step(&f.sig(8, 10.0, b, 2)), "calm 3: leaves");
        assert!(!d.step(&f.sig(9, 90.0, b, 2)), "hot 1 again");
        // Without /proc/stat's cpu line PSI decides alone.
        let mut d = Detector::new(Thresholds::default(), 1.0).unwrap();
        let mut f = Feed { total_us: 0, ticks: (0, 0) };
        assert!(!d.step(&f.sig(0, 0.0, None, 4)));
        assert!(!d.step(&f.sig(1, 60.0, None, 4)));
        assert!(d.step(&f.sig(2, 60.0, None, 12)));
        // The run queue is smoothed for the demand: 4 -> 12 over 1 s of half-life 1 s averages to 8.
        assert!((d.runnable_avg() - 8.0).abs() < 1e-12);
        let bad = Thresholds { enter_psi: 5.0, ..Default::default() };
        assert!(Detector::new(bad, 1.0).is_err());
        assert!(Detector::new(Thresholds { enter_busy: 0.5, ..Default::default() }, 1.0).is_err());
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
