//! `schedbe-bench akita-place`: the Akita paper's Figs. 8 and 9, placement.
//! A HI RPC VM (memcached, type 1) under an open-loop client, plus a
//! growing number of CPU-bound LO VMs of type 2 (25 ms per 100 ms), on the
//! VM CPUs (all but CPU 0 by default). Akita places vCPUs first-fit under
//! the EDF-VD test, so the VMs fill the first CPUs and leave the others
//! idle; EEVDF spreads them over every VM CPU it may use. Reported per step:
//! the RPC p99 (against its 100 ms period) and the number of VM CPUs that
//! stayed idle (busy under 5% of the step, from /proc/stat).

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::vms::{self, Vm};
use super::{med, Cfg, CommonArgs, Setup};
use crate::proc::Proc;
use crate::stats::LatencySummary;

#[derive(clap::Args, Debug, Clone)]
pub struct PlaceArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Seconds of each step
    #[arg(long, default_value_t = 6.0)]
    pub step_s: f64,
    /// The most LO VMs (steps 0, 1, ..., this many)
    #[arg(long, default_value_t = 6)]
    pub max_lo: usize,
    /// memcached requests per second to the HI VM
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// The CPUs the VMs may use [default: all but CPU 0]
    #[arg(long, value_delimiter = ',')]
    pub vm_cpus: Vec<usize>,
}

#[derive(Serialize)]
struct Row {
    config: Cfg,
    rep: usize,
    lo_vms: usize,
    rpc: LatencySummary,
    /// Busy share of each VM CPU in the step.
    busy: Vec<(usize, f64)>,
    idle_cpus: usize,
}

const PORT: u16 = 11316;
/// A CPU busy less than this share of a step counts as idle.
const IDLE_BELOW: f64 = 0.05;

fn one_run(s: &Setup, a: &PlaceArgs, cfg: Cfg, rep: usize) -> Result<Vec<Row>> {
    let mut vmset = vec![Vm::new("rpc", true, 1)];
    vmset.extend((1..=a.max_lo).map(|i| Vm::new(&format!("lo{i}"), false, 2)));
    let dir = s.out.join(format!("{}-{rep}", cfg.name()));
    s.with_config(cfg, &vmset, &dir, || {
        let mut procs: Vec<Proc> = Vec::new();
        let mut mc = Command::new("memcached");
        mc.args(["-p", &PORT.to_string(), "-U", "0", "-l", "127.0.0.1", "-t", "1", "-m", "64", "-u", "root"]);
        procs.push(vms::spawn_in("rpc", mc, &vmset[0].cgroup(), &s.vm_cpus, &dir)?);
        super::wait_port(PORT, Duration::from_secs(10))?;
        let mut rows = Vec::new();
        // vmset[0] is the RPC VM; step n adds vmset[n]
        for (n, vm) in vmset.iter().enumerate() {
            if n > 0 {
                let mut d = s.helper("duty");
                d.args(["--burn-ms", "100"]);
                procs.push(vms::spawn_in(&vm.name, d, &vm.cgroup(), &s.vm_cpus, &dir)?);
                std::thread::sleep(Duration::from_secs(1));
            }
            let c0 = crate::sys::cpu_times()?;
            let (rpc, _) = super::mc_result(super::mc_client(s, PORT, a.rate, a.step_s, n == 0, &dir, &format!("rpc-{n}"))?)?;
            let c1 = crate::sys::cpu_times()?;
            let busy: Vec<(usize, f64)> = s
                .vm_cpus
                .iter()
                .map(|&c| {
                    let (b0, t0) = c0.get(c).copied().unwrap_or((0, 0));
                    let (b1, t1) = c1.get(c).copied().unwrap_or((0, 0));
                    (c, (b1 - b0) as f64 / (t1 - t0).max(1) as f64)
                })
                .collect();
            let idle_cpus = busy.iter().filter(|(_, b)| *b < IDLE_BELOW).count();
            rows.push(Row { config: cfg, rep, lo_vms: n, rpc, busy, idle_cpus });
        }
        drop(procs);
        Ok(rows)
    })
}

pub fn run(a: &PlaceArgs) -> Result<()> {
    if !(a.step_s.is_finite() && (2.0..=3600.0).contains(&a.step_s)) {
        bail!("--step-s must be in [2, 3600], got {}", a.step_s);
    }
    if !(1..=32).contains(&a.max_lo) {
        bail!("--max-lo must be in [1, 32], got {}", a.max_lo);
    }
    if !(a.rate.is_finite() && a.rate > 0.0 && a.rate <= 1e5) {
        bail!("--rate must be in (0, 1e5], got {}", a.rate);
    }
    if Command::new("memcached").arg("-h").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        bail!("memcached is not installed (make setup installs Debian's memcached)");
    }
    let mut s = Setup::new(&a.common, "akita-place")?;
    s.vm_cpus = if a.vm_cpus.is_empty() { (1..s.nr_cpus).collect() } else { a.vm_cpus.clone() };
    if s.vm_cpus.iter().any(|&c| c >= s.nr_cpus) || s.vm_cpus.is_empty() || s.other_cpus().is_empty() {
        bail!("--vm-cpus {:?}: need CPUs of this machine (0-{}), leaving one for the client", s.vm_cpus, s.nr_cpus - 1);
    }
    println!("akita-place: VM CPUs {:?}, client on {:?}, 0..{} LO VMs, {} s each, {} repetitions -> {}", s.vm_cpus, s.other_cpus(), a.max_lo, a.step_s, s.reps, s.out.display());
    let mut rows = Vec::new();
    for rep in 0..s.reps {
        for &cfg in &s.configs {
            let rs = one_run(&s, a, cfg, rep).with_context(|| format!("{} repetition {}", cfg.name(), rep + 1))?;
            for r in &rs {
                println!(
                    "  rep {} {:<6} LO VMs {}: RPC p99 {:>7.1} ms, idle VM CPUs {} (busy {})",
                    rep + 1,
                    cfg.name(),
                    r.lo_vms,
                    r.rpc.p99_us / 1e3,
                    r.idle_cpus,
                    r.busy.iter().map(|(c, b)| format!("cpu{c} {b:.2}")).collect::<Vec<_>>().join(" ")
                );
            }
            rows.extend(rs);
        }
    }
    let mut t = String::from("\n| config | LO VMs | idle VM CPUs | RPC p99 (ms) | RPC mean (ms) |\n|---|---|---|---|---|\n");
    for &cfg in &s.configs {
        for n in 0..=a.max_lo {
            let rs: Vec<&Row> = rows.iter().filter(|r| r.config == cfg && r.lo_vms == n).collect();
            let idle: Vec<f64> = rs.iter().map(|r| r.idle_cpus as f64).collect();
            let p99: Vec<f64> = rs.iter().map(|r| r.rpc.p99_us / 1e3).collect();
            let mean: Vec<f64> = rs.iter().map(|r| r.rpc.mean_us / 1e3).collect();
            t += &format!("| {} | {n} | {} | {} | {} |\n", cfg.name(), med(&idle, 0), med(&p99, 1), med(&mean, 2));
        }
    }
    print!("{t}");
    std::fs::write(s.out.join("akita-place.md"), &t)?;
    let json = serde_json::json!({ "experiment": "akita-place", "vm_cpus": s.vm_cpus, "step_s": a.step_s, "rate": a.rate, "rows": rows });
    std::fs::write(s.out.join("akita-place.json"), serde_json::to_string_pretty(&json)?)?;
    s.plot(a.common.no_plot);
    Ok(())
}
