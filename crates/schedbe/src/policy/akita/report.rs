//! Akita's live stats: per VM (CPU share, budget used, throttling, mode
//! switches it caused, temperature, CPU access latency) and per CPU (mode,
//! switches, time in HI mode), over one interval, as text or JSON lines
//! (served to `schedbe stats` by stats.rs).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use scx_stats_derive::Stats;
use serde::{Deserialize, Serialize};

use super::bpf::intf;
use super::edfvd::{Crit, Server};
use crate::park::ParkCounts;

/// What the daemon knows of an admitted VM.
pub struct VmInfo {
    pub name: String,
    pub crit: Crit,
    pub servers: Vec<u32>,
    /// The CPU of each server, in the same order.
    pub cpus: Vec<u32>,
    pub server: Server,
}

/// The BPF counters at one instant.
pub struct Snapshot {
    pub at: Instant,
    /// CLOCK_MONOTONIC at `at`: the BPF side's clock.
    pub mono_ns: u64,
    pub servers: BTreeMap<u32, intf::akita_server_run>,
    pub cpus: BTreeMap<u32, intf::akita_cpu_run>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Stats)]
pub struct VmRow {
    pub vm: String,
    /// HI or LO
    pub criticality: String,
    /// Its reservation: C_opt/T (LO) or C_pes/T (HI) per vCPU, in CPUs.
    pub reserved_cpus: f64,
    /// CPU time in the interval, in CPUs: within budget, and beyond it (work conservation).
    pub budget_cpus: f64,
    pub slack_cpus: f64,
    pub throttled_ms: f64,
    pub nr_throttled: u64,
    pub nr_periods: u64,
    /// HI: periods in which it needed more than C_opt (each one heats it, and may switch its CPU to HI mode).
    pub overruns: u64,
    /// Hottest vCPU now.
    pub temperature: u32,
    /// CPU access latency (wakeup to running) in the interval.
    pub cal_mean_ms: f64,
    pub cal_n: u64,
    /// Wakeups in the interval that waited longer than the period.
    pub cal_over_period: u64,
    /// Longest since load.
    pub cal_max_ms: f64,
}

/// One vCPU: its CPU access latency against its period (JSON only).
#[derive(Debug, Clone, Serialize, Deserialize, Stats)]
pub struct VcpuRow {
    pub vm: String,
    pub index: u32,
    pub cpu: u32,
    pub period_ms: f64,
    pub cal_mean_ms: f64,
    pub cal_n: u64,
    pub cal_over_period: u64,
    /// Longest since load.
    pub cal_max_ms: f64,
    pub budget_cpus: f64,
    pub slack_cpus: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Stats)]
pub struct CpuRow {
    pub cpu: u32,
    /// HI or LO
    pub mode: String,
    pub mode_switches: u64,
    /// Share of the interval in HI mode.
    pub hi_share: f64,
    pub host_share: f64,
    pub be_share: f64,
    pub guard_slices: u64,
    /// Parking: BE tasks this CPU reported starved (park_report.bpf.h).
    pub starved_reports: u64,
    /// Its local queue sent back when an RT/DL task took it; others' rescued from here.
    pub rt_evacuations: u64,
    pub rt_rescues: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Stats)]
#[stat(top, _schedbe_policy = "akita")]
pub struct Report {
    pub uptime_s: f64,
    pub interval_s: f64,
    pub vms: Vec<VmRow>,
    pub vcpus: Vec<VcpuRow>,
    pub cpus: Vec<CpuRow>,
    /// Parked BE cgroups now, and park/unpark events since load (park.rs).
    pub parking: ParkCounts,
    /// The CPUs' rt_evacuations and rt_rescues, summed.
    pub rt_evacuations: u64,
    pub rt_rescues: u64,
}

fn reserved(s: &Server) -> f64 {
    match *s {
        Server::Hi { c_pes_us, period_us, .. } => c_pes_us as f64 / period_us as f64,
        Server::Lo { c_opt_us, period_us } => c_opt_us as f64 / period_us as f64,
    }
}

impl Report {
    pub fn between(vms: &[VmInfo], a: &Snapshot, b: &Snapshot, started: Instant) -> Self {
        let infos = vms;
        let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
        let ns = secs * 1e9;
        let d = |f: fn(&intf::akita_server_run) -> u64, sid: &u32| -> u64 {
            let now = b.servers.get(sid).map_or(0, f);
            let then = a.servers.get(sid).map_or(0, f);
            // a server re-created in between restarts its counters
            if now >= then {
                now - then
            } else {
                now
            }
        };
        let vms = vms
            .iter()
            .map(|v| {
                let sum = |f: fn(&intf::akita_server_run) -> u64| v.servers.iter().map(|s| d(f, s)).sum::<u64>();
                let cal_n = sum(|r| r.cal_n);
                VmRow {
                    vm: v.name.clone(),
                    criticality: v.crit.to_string(),
                    reserved_cpus: reserved(&v.server) * v.servers.len() as f64,
                    budget_cpus: sum(|r| r.active_ns) as f64 / ns,
                    slack_cpus: sum(|r| r.slack_ns) as f64 / ns,
                    throttled_ms: sum(|r| r.throttled_ns) as f64 / 1e6,
                    nr_throttled: sum(|r| r.nr_throttled),
                    nr_periods: sum(|r| r.nr_periods),
                    overruns: sum(|r| r.overruns),
                    temperature: v.servers.iter().filter_map(|s| b.servers.get(s)).map(|r| r.temperature).max().unwrap_or(0),
                    cal_mean_ms: if cal_n > 0 { sum(|r| r.cal_sum_ns) as f64 / cal_n as f64 / 1e6 } else { 0.0 },
                    cal_n,
                    cal_over_period: sum(|r| r.cal_over_period),
                    cal_max_ms: v.servers.iter().filter_map(|s| b.servers.get(s)).map(|r| r.cal_max_ns).max().unwrap_or(0) as f64 / 1e6,
                }
            })
            .collect();
        let period_ms = |s: &Server| match *s {
            Server::Hi { period_us, .. } | Server::Lo { period_us, .. } => period_us as f64 / 1e3,
        };
        let vcpus = infos
            .iter()
            .flat_map(|v| {
                (0u32..).zip(v.servers.iter().zip(&v.cpus)).map(move |(index, (sid, cpu))| (v, index, *sid, *cpu))
            })
            .map(|(v, index, sid, cpu)| {
                let n = d(|r| r.cal_n, &sid);
                VcpuRow {
                    vm: v.name.clone(),
                    index,
                    cpu,
                    period_ms: period_ms(&v.server),
                    cal_mean_ms: if n > 0 { d(|r| r.cal_sum_ns, &sid) as f64 / n as f64 / 1e6 } else { 0.0 },
                    cal_n: n,
                    cal_over_period: d(|r| r.cal_over_period, &sid),
                    cal_max_ms: b.servers.get(&sid).map_or(0, |r| r.cal_max_ns) as f64 / 1e6,
                    budget_cpus: d(|r| r.active_ns, &sid) as f64 / ns,
                    slack_cpus: d(|r| r.slack_ns, &sid) as f64 / ns,
                }
            })
            .collect();
        let cpus: Vec<CpuRow> = b
            .cpus
            .iter()
            .map(|(&cpu, r)| {
                let p = a.cpus.get(&cpu);
                let dd = |f: fn(&intf::akita_cpu_run) -> u64| f(r).saturating_sub(p.map_or(0, f));
                // time in HI mode, the open span included
                let hi = |r: &intf::akita_cpu_run, mono: u64| {
                    r.hi_ns + if r.mode == intf::akita_consts_AKITA_MODE_HI { mono.saturating_sub(r.hi_since) } else { 0 }
                };
                let hi_d = hi(r, b.mono_ns).saturating_sub(p.map_or(0, |p| hi(p, a.mono_ns)));
                CpuRow {
                    cpu,
                    mode: if r.mode == intf::akita_consts_AKITA_MODE_HI { "HI" } else { "LO" }.to_string(),
                    mode_switches: dd(|r| r.mode_switches),
                    hi_share: (hi_d as f64 / ns).min(1.0),
                    host_share: dd(|r| r.host_ns) as f64 / ns,
                    be_share: dd(|r| r.be_ns) as f64 / ns,
                    guard_slices: dd(|r| r.be_guards),
                    starved_reports: dd(|r| r.starved_reports),
                    rt_evacuations: dd(|r| r.rt_evacuations),
                    rt_rescues: dd(|r| r.rt_rescues),
                }
            })
            .collect();
        let rt_evacuations = cpus.iter().map(|c| c.rt_evacuations).sum();
        let rt_rescues = cpus.iter().map(|c| c.rt_rescues).sum();
        Self {
            uptime_s: b.at.duration_since(started).as_secs_f64(),
            interval_s: secs,
            vms,
            vcpus,
            cpus,
            parking: ParkCounts::default(),
            rt_evacuations,
            rt_rescues,
        }
    }

    /// The text form: a table of VMs, then one line for the CPUs.
    pub fn render(&self, header: bool) -> String {
        let mut s = String::new();
        if header {
            let _ = writeln!(
                s,
                "{:>7} {:<16} {:>4} {:>6} {:>6} {:>6} {:>8} {:>5} {:>5} {:>4} {:>8} {:>8} {:>5}",
                "t(s)", "vm", "crit", "resv", "budget", "slack", "thr(ms)", "thr#", "ovr", "temp", "cal(ms)", "calmax", "cal>T"
            );
        }
        for v in &self.vms {
            let _ = writeln!(
                s,
                "{:>7.1} {:<16} {:>4} {:>6.3} {:>6.3} {:>6.3} {:>8.1} {:>5} {:>5} {:>4} {:>8.3} {:>8.2} {:>5}",
                self.uptime_s,
                v.vm,
                v.criticality,
                v.reserved_cpus,
                v.budget_cpus,
                v.slack_cpus,
                v.throttled_ms,
                v.nr_throttled,
                v.overruns,
                v.temperature,
                v.cal_mean_ms,
                v.cal_max_ms,
                v.cal_over_period
            );
        }
        let cpus: Vec<String> = self
            .cpus
            .iter()
            .filter(|c| c.mode == "HI" || c.mode_switches > 0 || c.hi_share > 0.0 || c.host_share > 0.0 || c.be_share > 0.0)
            .map(|c| format!("cpu{} {} sw={} hi={:.2} host={:.2} be={:.2}", c.cpu, c.mode, c.mode_switches, c.hi_share, c.host_share, c.be_share))
            .collect();
        let p = &self.parking;
        let parked = if p.park_events > 0 { format!(" | parked: {} cgroups, {} tasks", p.parked_cgroups, p.parked_tasks) } else { String::new() };
        let _ = writeln!(s, "{:>7.1} cpus: {}{parked}", self.uptime_s, cpus.join(" | "));
        s
    }
}
