//! The configurations an experiment compares: how LC and BE are placed
//! (cgroups, policies) and whether schedbe is loaded.
//!
//! | name        | LC                         | BE                                   |
//! |-------------|----------------------------|--------------------------------------|
//! | eevdf       | cgroup lc, SCHED_NORMAL    | none                                 |
//! | weights     | cgroup lc, cpu.weight 10000| cgroup be, cpu.weight 1              |
//! | weights-N   | cgroup lc, cpu.weight N    | cgroup be, cpu.weight 1              |
//! | sched-idle  | cgroup lc, SCHED_NORMAL    | same cgroup lc, SCHED_IDLE threads   |
//! | cpu-idle    | cgroup lc                  | cgroup be, cpu.idle 1                |
//! | fifo        | cgroup lc, SCHED_FIFO      | cgroup be, SCHED_NORMAL              |
//! | schedbe     | cgroup lc (schedbe loaded) | cgroup be, cpu.idle 1 (BE to schedbe)|
//! | schedbe-conc | as schedbe, with `--limit-mode concurrency` (cpu.max also caps CPUs at once) | as schedbe |
//! | schedbe-nores | as schedbe, with `--no-reservations` (no cgroup preempts another for its entitlement) | as schedbe |
//! | llf         | cgroup lc (`schedbe run --policy llf`; no sandbox matches, so one least-loaded-first queue) | as schedbe |
//! | scx_bpfland, scx_lavd | cgroup lc (that peer loaded) | cgroup be, cpu.idle 1        |
//!
//! sched-idle keeps BE in LC's cgroup on purpose: in a sibling cgroup the
//! BE group entity would compete with LC's at equal weight, whatever the
//! threads' policy. cgroups live under /sys/fs/cgroup/schedbe-bench/.
//! The peers are other sched_ext schedulers with their default options
//! (crate::peers); what they make of cpu.idle is theirs.

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Context, Result};

use crate::peers;
use crate::scx::Scheduler;
use crate::sys::Policy;

pub const LC_CG: &str = "lc";
pub const BE_CG: &str = "be";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Eevdf,
    /// LC cgroup weight (BE weight 1).
    Weights(u32),
    SchedIdle,
    CpuIdle,
    Fifo,
    Schedbe,
    /// schedbe with `--limit-mode concurrency`
    SchedbeConc,
    /// schedbe with `--no-reservations`
    SchedbeNoResv,
    /// schedbe's least-loaded-first policy (`--policy llf`)
    Llf,
    /// A peer sched_ext scheduler (crate::peers::KNOWN).
    Peer(&'static str),
}

/// A configuration as named on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub name: String,
    pub kind: Kind,
}

/// What the runner does for a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub lc_cgroup: &'static str,
    pub be_cgroup: &'static str,
    pub lc_policy: Policy,
    pub be_policy: Policy,
    /// cpu.weight of LC's / BE's cgroup (None: leave the default, 100)
    pub lc_weight: Option<u32>,
    pub be_weight: Option<u32>,
    pub be_cpu_idle: bool,
    pub has_be: bool,
    /// The sched_ext scheduler loaded for the run (None: the kernel's own, EEVDF).
    pub scheduler: Option<Scheduler>,
    /// Needs the cgroup v2 cpu controller (weights, cpu.idle).
    pub needs_cpu_controller: bool,
    /// Arguments for the scheduler beyond `--schedbe-arg`s.
    pub sched_args: &'static [&'static str],
}

impl Config {
    /// Does the configuration load a sched_ext scheduler (else: EEVDF)?
    pub fn loads_scheduler(&self) -> bool {
        // the scheduler does not depend on LC's SCHED_FIFO priority
        self.plan(1).scheduler.is_some()
    }

    pub fn plan(&self, lc_fifo_prio: u8) -> Plan {
        let base = Plan {
            lc_cgroup: LC_CG,
            be_cgroup: BE_CG,
            lc_policy: Policy::Normal,
            be_policy: Policy::Normal,
            lc_weight: None,
            be_weight: None,
            be_cpu_idle: false,
            has_be: true,
            scheduler: None,
            needs_cpu_controller: false,
            sched_args: &[],
        };
        match self.kind {
            Kind::Eevdf => Plan { has_be: false, ..base },
            Kind::Weights(w) => Plan { lc_weight: Some(w), be_weight: Some(1), needs_cpu_controller: true, ..base },
            Kind::SchedIdle => Plan { be_cgroup: LC_CG, be_policy: Policy::Idle, ..base },
            Kind::CpuIdle => Plan { be_cpu_idle: true, needs_cpu_controller: true, ..base },
            Kind::Fifo => Plan { lc_policy: Policy::Fifo(lc_fifo_prio), ..base },
            Kind::Schedbe => Plan { be_cpu_idle: true, scheduler: Some(Scheduler::Schedbe), needs_cpu_controller: true, ..base },
            Kind::SchedbeConc => Plan {
                be_cpu_idle: true,
                scheduler: Some(Scheduler::Schedbe),
                needs_cpu_controller: true,
                sched_args: &["--limit-mode", "concurrency"],
                ..base
            },
            Kind::SchedbeNoResv => Plan {
                be_cpu_idle: true,
                scheduler: Some(Scheduler::Schedbe),
                needs_cpu_controller: true,
                sched_args: &["--no-reservations"],
                ..base
            },
            Kind::Llf => Plan {
                be_cpu_idle: true,
                scheduler: Some(Scheduler::Schedbe),
                needs_cpu_controller: true,
                sched_args: &["--policy", "llf"],
                ..base
            },
            Kind::Peer(n) => Plan { be_cpu_idle: true, scheduler: Some(Scheduler::Peer(n)), needs_cpu_controller: true, ..base },
        }
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        match self.kind {
            Kind::Eevdf => "EEVDF (kernel default), LC alone, no BE".into(),
            Kind::Weights(w) => format!("cgroup cpu.weight: LC {w}, BE 1"),
            Kind::SchedIdle => "BE threads SCHED_IDLE (same cgroup as LC)".into(),
            Kind::CpuIdle => "BE cgroup cpu.idle=1".into(),
            Kind::Fifo => "LC SCHED_FIFO, BE SCHED_NORMAL".into(),
            Kind::Schedbe => "schedbe loaded; BE cgroup cpu.idle=1 (BE tier)".into(),
            Kind::SchedbeConc => "schedbe loaded, cpu.max read as CPUs at once (--limit-mode concurrency); BE cgroup cpu.idle=1".into(),
            Kind::SchedbeNoResv => "schedbe loaded without reservations (--no-reservations); BE cgroup cpu.idle=1".into(),
            Kind::Llf => "schedbe --policy llf loaded (sandboxes: kubelet pods, none here); BE cgroup cpu.idle=1".into(),
            Kind::Peer(n) => format!("peer sched_ext scheduler {n} loaded (default options); BE cgroup cpu.idle=1"),
        }
    }
}

pub const VALID: &str = "eevdf, weights, weights-N (N in 1..=10000), sched-idle, cpu-idle, fifo, schedbe, schedbe-conc, schedbe-nores, llf, scx_bpfland, scx_lavd";

impl FromStr for Config {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        let kind = match s {
            "eevdf" => Kind::Eevdf,
            "weights" => Kind::Weights(10_000),
            "sched-idle" => Kind::SchedIdle,
            "cpu-idle" => Kind::CpuIdle,
            "fifo" => Kind::Fifo,
            "schedbe" => Kind::Schedbe,
            "schedbe-conc" => Kind::SchedbeConc,
            "schedbe-nores" => Kind::SchedbeNoResv,
            "llf" => Kind::Llf,
            _ => match (peers::known(s), s.strip_prefix("weights-")) {
                (Some(peer), _) => Kind::Peer(peer),
                (None, Some(n)) => {
                    let w: u32 = n.parse().with_context(|| format!("configuration {s:?}: bad weight"))?;
                    if !(1..=10_000).contains(&w) {
                        bail!("configuration {s:?}: cgroup v2 cpu.weight must be in 1..=10000");
                    }
                    Kind::Weights(w)
                }
                (None, None) => bail!("unknown configuration {s:?} (valid: {VALID})"),
            },
        };
        Ok(Config { name: s.to_string(), kind })
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// "a,b,c" -> configurations (no duplicates, at least one).
pub fn parse_list(s: &str) -> Result<Vec<Config>> {
    let mut out: Vec<Config> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let c: Config = part.parse()?;
        if out.iter().any(|o| o.name == c.name) {
            bail!("configuration {:?} listed twice", c.name);
        }
        out.push(c);
    }
    if out.is_empty() {
        bail!("no configurations given (valid: {VALID})");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_configs() {
        let v = parse_list("weights, sched-idle,schedbe,weights-10,eevdf,cpu-idle,fifo").unwrap();
        assert_eq!(v.len(), 7);
        assert_eq!(v[0].kind, Kind::Weights(10_000));
        assert_eq!(v[3].kind, Kind::Weights(10));
        assert_eq!(v[3].to_string(), "weights-10");
        for bad in ["", "weights-0", "weights-10001", "weights-x", "cfs", "schedbe,schedbe"] {
            assert!(parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn plans() {
        let p = |s: &str| s.parse::<Config>().unwrap().plan(10);
        assert!(!p("eevdf").has_be);
        let w = p("weights-100");
        assert_eq!((w.lc_weight, w.be_weight), (Some(100), Some(1)));
        let si = p("sched-idle");
        assert_eq!((si.be_cgroup, si.be_policy), (LC_CG, Policy::Idle));
        assert!(!si.needs_cpu_controller);
        assert!(p("cpu-idle").be_cpu_idle);
        assert_eq!(p("fifo").lc_policy, Policy::Fifo(10));
        let s = p("schedbe");
        assert!(s.scheduler == Some(Scheduler::Schedbe) && s.be_cpu_idle && s.has_be);
        let l = p("llf");
        assert_eq!((l.scheduler, l.sched_args), (Some(Scheduler::Schedbe), &["--policy", "llf"][..]));
        let c = p("schedbe-conc");
        assert_eq!((c.scheduler, c.sched_args), (Some(Scheduler::Schedbe), &["--limit-mode", "concurrency"][..]));
        assert!(s.sched_args.is_empty());
        let b = p("scx_bpfland");
        assert_eq!(b.scheduler, Some(Scheduler::Peer("scx_bpfland")));
        assert_eq!(p("eevdf").scheduler, None);
        let loads = |n: &str| n.parse::<Config>().unwrap().loads_scheduler();
        assert!(loads("schedbe") && loads("scx_bpfland") && !loads("eevdf") && !loads("fifo"));
        assert!(parse_list("scx_rusty").unwrap_err().to_string().contains("scx_lavd"));
    }
}
