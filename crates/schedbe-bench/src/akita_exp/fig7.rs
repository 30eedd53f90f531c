//! `schedbe-bench akita-share`: the Akita paper's Fig. 7, "HI CPU shares
//! stay intact". A HI VM of type 6 (C_opt 10, C_pes 50, T 100 ms) next to
//! three CPU-bound LO VMs of type 2 (25/100), all on one CPU. The HI VM's
//! demand (`schedbe-bench duty`, per 100 ms) steps through --demands: it should get
//! its demand up to C_pes/T = 0.5, and the LO VMs should share the rest
//! equally. Shares from cgroup cpu.stat, per phase.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::vms::{self, Vm};
use super::{med, Cfg, CommonArgs, Setup};
use crate::proc::Proc;

#[derive(clap::Args, Debug, Clone)]
pub struct ShareArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Seconds of each demand step
    #[arg(long, default_value_t = 6.0)]
    pub phase_s: f64,
    /// The HI VM's demands, in percent of the CPU, comma-separated
    #[arg(long, default_value = "25,50,75")]
    pub demands: String,
}

#[derive(Serialize)]
struct Row {
    config: Cfg,
    rep: usize,
    demand_pct: f64,
    hi: f64,
    lo: Vec<f64>,
}

fn parse_demands(s: &str) -> Result<Vec<f64>> {
    let mut v = Vec::new();
    for d in s.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let x: f64 = d.parse().with_context(|| format!("--demands: {d:?} is not a number"))?;
        if !(x.is_finite() && x > 0.0 && x <= 100.0) {
            bail!("--demands: {x} is not in (0, 100]");
        }
        v.push(x);
    }
    if v.is_empty() {
        bail!("--demands is empty");
    }
    Ok(v)
}

fn one_run(s: &Setup, a: &ShareArgs, demands: &[f64], cfg: Cfg, rep: usize) -> Result<Vec<Row>> {
    let vmset = vec![Vm::new("hi", true, 6), Vm::new("lo1", false, 2), Vm::new("lo2", false, 2), Vm::new("lo3", false, 2)];
    let dir = s.out.join(format!("{}-{rep}", cfg.name()));
    s.with_config(cfg, &vmset, &dir, || {
        let mut procs: Vec<Proc> = Vec::new();
        for vm in &vmset[1..] {
            let mut d = s.helper("duty");
            d.args(["--burn-ms", "100"]);
            procs.push(vms::spawn_in(&vm.name, d, &vm.cgroup(), &s.vm_cpus, &dir)?);
        }
        let mut rows = Vec::new();
        for &demand in demands {
            let mut d = s.helper("duty");
            d.args(["--period-ms", "100", "--burn-ms", &demand.to_string()]);
            let mut hi = vms::spawn_in("hi", d, &vmset[0].cgroup(), &s.vm_cpus, &dir)?;
            std::thread::sleep(Duration::from_secs(1));
            let u0: Vec<u64> = vmset.iter().map(|v| vms::usage_usec(&v.cgroup())).collect();
            let t0 = Instant::now();
            std::thread::sleep(Duration::from_secs_f64(a.phase_s));
            let dt = t0.elapsed().as_secs_f64();
            let sh: Vec<f64> = vmset.iter().zip(u0).map(|(v, u)| (vms::usage_usec(&v.cgroup()) - u) as f64 / 1e6 / dt).collect();
            hi.stop(libc::SIGKILL, Duration::from_secs(5));
            rows.push(Row { config: cfg, rep, demand_pct: demand, hi: sh[0], lo: sh[1..].to_vec() });
        }
        drop(procs);
        Ok(rows)
    })
}

pub fn run(a: &ShareArgs) -> Result<()> {
    if !(a.phase_s.is_finite() && (1.0..=3600.0).contains(&a.phase_s)) {
        bail!("--phase-s must be in [1, 3600], got {}", a.phase_s);
    }
    let demands = parse_demands(&a.demands)?;
    let s = Setup::new(&a.common, "akita-share")?;
    println!("akita-share: VMs on CPUs {:?}, HI demands {:?} %, {} s each, {} repetitions -> {}", s.vm_cpus, demands, a.phase_s, s.reps, s.out.display());
    let mut rows = Vec::new();
    for rep in 0..s.reps {
        for &cfg in &s.configs {
            let rs = one_run(&s, a, &demands, cfg, rep).with_context(|| format!("{} repetition {}", cfg.name(), rep + 1))?;
            for r in &rs {
                println!("  rep {} {:<6} demand {:>3.0}%: HI {:.3}, LO {:?}", rep + 1, cfg.name(), r.demand_pct, r.hi, r.lo.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>());
            }
            rows.extend(rs);
        }
    }
    let mut t = String::from("\n| config | HI demand | HI share | LO shares (each) | LO max/min |\n|---|---|---|---|---|\n");
    for &cfg in &s.configs {
        for &d in &demands {
            let rs: Vec<&Row> = rows.iter().filter(|r| r.config == cfg && r.demand_pct == d).collect();
            let hi: Vec<f64> = rs.iter().map(|r| r.hi).collect();
            let lo: Vec<f64> = rs.iter().flat_map(|r| r.lo.iter().copied()).collect();
            let ratio: Vec<f64> = rs
                .iter()
                .map(|r| r.lo.iter().cloned().fold(f64::MIN, f64::max) / r.lo.iter().cloned().fold(f64::MAX, f64::min))
                .collect();
            t += &format!("| {} | {:.0}% | {} | {} | {} |\n", cfg.name(), d, med(&hi, 3), med(&lo, 3), med(&ratio, 3));
        }
    }
    print!("{t}");
    std::fs::write(s.out.join("akita-share.md"), &t)?;
    let json = serde_json::json!({ "experiment": "akita-share", "cpus": s.vm_cpus, "phase_s": a.phase_s, "rows": rows });
    std::fs::write(s.out.join("akita-share.json"), serde_json::to_string_pretty(&json)?)?;
    s.plot(a.common.no_plot);
    Ok(())
}
