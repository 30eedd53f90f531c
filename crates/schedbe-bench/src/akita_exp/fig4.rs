//! `schedbe-bench akita-diff`: the Akita paper's Fig. 4, differentiated
//! service. On one CPU: two CPU-bound VMs running sysbench (Debian's
//! `sysbench cpu`), of types 2 (25 ms per 100 ms) and 3 (50/100), and two
//! RPC VMs, memcached servers of types 4 (5/50) and 5 (10/100), each under
//! an open-loop client. Sysbench's speed should follow budget/period (type 3
//! faster than type 2) and RPC latency should follow the period (type 4,
//! T = 50 ms, faster than type 5, T = 100 ms).

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::vms::{self, Vm};
use super::{med, Cfg, CommonArgs, Setup};
use crate::proc::Proc;
use crate::stats::LatencySummary;

#[derive(clap::Args, Debug, Clone)]
pub struct DiffArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Seconds the four VMs run together
    #[arg(long, default_value_t = 20.0)]
    pub duration_s: f64,
    /// Requests per second to each RPC VM
    #[arg(long, default_value_t = 40.0)]
    pub rate: f64,
}

#[derive(Serialize)]
struct Row {
    config: Cfg,
    rep: usize,
    /// sysbench events per second: type 2, type 3
    sysbench_eps: [f64; 2],
    /// RPC latency: type 4, type 5
    rpc: [LatencySummary; 2],
}

const PORTS: [u16; 2] = [11314, 11315];

fn sysbench_eps(out: &str) -> Option<f64> {
    out.lines().find_map(|l| l.trim().strip_prefix("events per second:").and_then(|v| v.trim().parse().ok()))
}

fn one_run(s: &Setup, a: &DiffArgs, cfg: Cfg, rep: usize) -> Result<Row> {
    let vmset = vec![Vm::new("sb2", false, 2), Vm::new("sb3", false, 3), Vm::new("rpc4", false, 4), Vm::new("rpc5", false, 5)];
    let dir = s.out.join(format!("{}-{rep}", cfg.name()));
    s.with_config(cfg, &vmset, &dir, || {
        let mut procs: Vec<Proc> = Vec::new();
        for (vm, port) in vmset[2..].iter().zip(PORTS) {
            let mut mc = Command::new("memcached");
            mc.args(["-p", &port.to_string(), "-U", "0", "-l", "127.0.0.1", "-t", "1", "-m", "64", "-u", "root"]);
            procs.push(vms::spawn_in(&vm.name, mc, &vm.cgroup(), &s.vm_cpus, &dir)?);
        }
        for port in PORTS {
            super::wait_port(port, Duration::from_secs(10))?;
        }
        // The sysbench VMs write their reports where we read them.
        let mut sb = Vec::new();
        for vm in &vmset[..2] {
            let mut c = Command::new("sysbench");
            c.args(["cpu", "--threads=1", &format!("--time={}", a.duration_s.round() as u64), "run"]);
            sb.push(vms::spawn_in(&vm.name, c, &vm.cgroup(), &s.vm_cpus, &dir)?);
        }
        let clients: Vec<_> = PORTS
            .iter()
            .map(|port| super::mc_client(s, *port, a.rate, a.duration_s - 2.0, true, &dir, &format!("rpc-{port}")))
            .collect::<Result<_>>()?;
        let mut rpc = Vec::new();
        for c in clients {
            rpc.push(super::mc_result(c)?);
        }
        let mut eps = [0.0; 2];
        for (i, mut p) in sb.into_iter().enumerate() {
            p.wait_timeout(Duration::from_secs_f64(a.duration_s + 30.0))?;
            let log = std::fs::read_to_string(dir.join(format!("{}.log", vmset[i].name))).unwrap_or_default();
            eps[i] = sysbench_eps(&log).with_context(|| format!("no 'events per second' in {}/{}.log", dir.display(), vmset[i].name))?;
        }
        drop(procs);
        let (r4, r5) = (rpc.remove(0).0, rpc.remove(0).0);
        Ok(Row { config: cfg, rep, sysbench_eps: eps, rpc: [r4, r5] })
    })
}

pub fn run(a: &DiffArgs) -> Result<()> {
    if !(a.duration_s.is_finite() && (5.0..=3600.0).contains(&a.duration_s)) {
        bail!("--duration-s must be in [5, 3600], got {}", a.duration_s);
    }
    if !(a.rate.is_finite() && a.rate > 0.0 && a.rate <= 1e5) {
        bail!("--rate must be in (0, 1e5], got {}", a.rate);
    }
    for tool in ["memcached", "sysbench"] {
        if Command::new(tool).arg("--help").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
            bail!("{tool} is not installed (make setup installs Debian's {tool})");
        }
    }
    let s = Setup::new(&a.common, "akita-diff")?;
    println!("akita-diff: VMs on CPUs {:?}, {} s, {} req/s per RPC VM, {} repetitions -> {}", s.vm_cpus, a.duration_s, a.rate, s.reps, s.out.display());
    let mut rows = Vec::new();
    for rep in 0..s.reps {
        for &cfg in &s.configs {
            let r = one_run(&s, a, cfg, rep).with_context(|| format!("{} repetition {}", cfg.name(), rep + 1))?;
            println!(
                "  rep {} {:<6} sysbench eps type2 {:.0} type3 {:.0} | RPC mean type4 {:.2} ms type5 {:.2} ms",
                rep + 1,
                cfg.name(),
                r.sysbench_eps[0],
                r.sysbench_eps[1],
                r.rpc[0].mean_us / 1e3,
                r.rpc[1].mean_us / 1e3
            );
            rows.push(r);
        }
    }
    let t = summary(&s, &rows);
    print!("{t}");
    std::fs::write(s.out.join("akita-diff.md"), &t)?;
    let json = serde_json::json!({ "experiment": "akita-diff", "cpus": s.vm_cpus, "duration_s": a.duration_s, "rate": a.rate, "rows": rows });
    std::fs::write(s.out.join("akita-diff.json"), serde_json::to_string_pretty(&json)?)?;
    s.plot(a.common.no_plot);
    Ok(())
}

fn summary(s: &Setup, rows: &[Row]) -> String {
    let mut t = String::from(
        "\n| config | sysbench type 2 (ev/s) | type 3 | type 3 faster, reps | RPC type 4 mean (ms) | type 5 mean | type 4 p99 | type 5 p99 | type 4 faster, reps |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for &cfg in &s.configs {
        let rs: Vec<&Row> = rows.iter().filter(|r| r.config == cfg).collect();
        let f = |g: &dyn Fn(&Row) -> f64| rs.iter().map(|r| g(r)).collect::<Vec<f64>>();
        let sb_order = rs.iter().filter(|r| r.sysbench_eps[1] > r.sysbench_eps[0]).count();
        let rpc_order = rs.iter().filter(|r| r.rpc[0].mean_us < r.rpc[1].mean_us).count();
        t += &format!(
            "| {} | {} | {} | {}/{} | {} | {} | {} | {} | {}/{} |\n",
            cfg.name(),
            med(&f(&|r| r.sysbench_eps[0]), 0),
            med(&f(&|r| r.sysbench_eps[1]), 0),
            sb_order,
            rs.len(),
            med(&f(&|r| r.rpc[0].mean_us / 1e3), 2),
            med(&f(&|r| r.rpc[1].mean_us / 1e3), 2),
            med(&f(&|r| r.rpc[0].p99_us / 1e3), 1),
            med(&f(&|r| r.rpc[1].p99_us / 1e3), 1),
            rpc_order,
            rs.len()
        );
    }
    t
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_sysbench_rate() {
        let out = "CPU speed:\n    events per second:  4713.87\n\nGeneral statistics:\n";
        assert_eq!(super::sysbench_eps(out), Some(4713.87));
        assert_eq!(super::sysbench_eps("nothing"), None);
    }
}
