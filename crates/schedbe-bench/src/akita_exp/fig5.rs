//! `schedbe-bench akita-mc`: the Akita paper's Fig. 5. A memcached server
//! (Debian's) is a HI VM of type 1 (C_opt 5, C_pes 25, T 100 ms) on one
//! CPU; an open-loop Poisson client speaking the memcached protocol runs on
//! the other CPUs. First alone, then next to three LO VMs of type 2 (25 ms
//! per 100 ms): two process groups burning 25% of the CPU each (`bench
//! duty`) and one real QEMU (TCG, a busy boot-sector guest) in libvirt's
//! cgroup layout, whose vCPU thread is always busy. Reported: memcached's
//! p50/p99/p99.9 alone and with the LO VMs, their ratio, and each VM's CPU
//! share (cgroup cpu.stat), per configuration.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::vms::{self, Vm};
use super::{med, Cfg, CommonArgs, Setup};
use crate::proc::Proc;
use crate::stats::LatencySummary;

#[derive(clap::Args, Debug, Clone)]
pub struct McArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Seconds of each phase (memcached alone, then with the LO VMs)
    #[arg(long, default_value_t = 20.0)]
    pub phase_s: f64,
    /// memcached requests per second (GETs of 100-byte values). The default
    /// puts memcached above type 1's C_opt and within its C_pes next to the
    /// LO VMs (HI mode), so the CPU is fully busy, as in the paper; why 500/s:
    /// docs/results-akita.md
    #[arg(long, default_value_t = 500.0)]
    pub rate: f64,
    /// Make the third LO VM a process group like the others instead of a real QEMU
    #[arg(long)]
    pub no_qemu: bool,
}

#[derive(Serialize)]
struct Row {
    config: Cfg,
    rep: usize,
    alone: LatencySummary,
    with_lo: LatencySummary,
    /// CPU share of each VM during the second phase (of one CPU)
    shares: Vec<(String, f64)>,
    errors: u64,
}

const PORT: u16 = 11311;

fn vm_set(qemu: bool) -> Vec<Vm> {
    let mut lo3 = Vm::new("lo3", false, 2);
    lo3.qemu = qemu;
    vec![Vm::new("mc", true, 1), Vm::new("lo1", false, 2), Vm::new("lo2", false, 2), lo3]
}

fn one_run(s: &Setup, a: &McArgs, cfg: Cfg, rep: usize) -> Result<Row> {
    let vmset = vm_set(!a.no_qemu);
    let dir = s.out.join(format!("{}-{rep}", cfg.name()));
    s.with_config(cfg, &vmset, &dir, || {
        let mut procs: Vec<Proc> = Vec::new();
        let mut mc = Command::new("memcached");
        mc.args(["-p", &PORT.to_string(), "-U", "0", "-l", "127.0.0.1", "-t", "1", "-m", "64", "-c", "256", "-u", "root"]);
        procs.push(vms::spawn_in("memcached", mc, &vmset[0].cgroup(), &s.vm_cpus, &dir)?);
        super::wait_port(PORT, Duration::from_secs(10))?;
        let (alone, e1) = super::mc_result(super::mc_client(s, PORT, a.rate, a.phase_s, true, &dir, "alone")?)?;
        for vm in &vmset[1..] {
            if vm.qemu {
                procs.push(vms::spawn_qemu(vm, &s.vm_cpus, &dir)?);
            } else {
                let mut d = s.helper("duty");
                d.args(["--period-ms", "100", "--burn-ms", "25"]);
                procs.push(vms::spawn_in(&vm.name, d, &vm.cgroup(), &s.vm_cpus, &dir)?);
            }
        }
        std::thread::sleep(Duration::from_secs(1));
        let u0: Vec<u64> = vmset.iter().map(|v| vms::usage_usec(&v.cgroup())).collect();
        let t0 = Instant::now();
        let (with_lo, e2) = super::mc_result(super::mc_client(s, PORT, a.rate, a.phase_s, false, &dir, "with-lo")?)?;
        let dt = t0.elapsed().as_secs_f64();
        let shares = vmset.iter().zip(u0).map(|(v, u)| (v.name.clone(), (vms::usage_usec(&v.cgroup()) - u) as f64 / 1e6 / dt)).collect();
        drop(procs);
        Ok(Row { config: cfg, rep, alone, with_lo, shares, errors: e1 + e2 })
    })
}

pub fn run(a: &McArgs) -> Result<()> {
    if !(a.phase_s.is_finite() && (1.0..=3600.0).contains(&a.phase_s)) {
        bail!("--phase-s must be in [1, 3600], got {}", a.phase_s);
    }
    if !(a.rate.is_finite() && a.rate > 0.0 && a.rate <= 1e6) {
        bail!("--rate must be in (0, 1e6], got {}", a.rate);
    }
    if Command::new("memcached").arg("-h").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        bail!("memcached is not installed (make setup installs Debian's memcached)");
    }
    if !a.no_qemu && Command::new("qemu-system-x86_64").arg("--version").stdout(Stdio::null()).status().is_err() {
        bail!("qemu-system-x86_64 is not installed (make setup installs it); --no-qemu runs without it");
    }
    let s = Setup::new(&a.common, "akita-mc")?;
    println!("akita-mc: VMs on CPUs {:?}, client on CPUs {:?}, {} req/s, {} s per phase, {} repetitions -> {}", s.vm_cpus, s.other_cpus(), a.rate, a.phase_s, s.reps, s.out.display());
    let mut rows = Vec::new();
    for rep in 0..s.reps {
        for &cfg in &s.configs {
            let r = one_run(&s, a, cfg, rep).with_context(|| format!("{} repetition {}", cfg.name(), rep + 1))?;
            println!(
                "  rep {} {:<6} alone p99.9 {:>8.0} us | with LO p99.9 {:>8.0} us | shares {}",
                rep + 1,
                cfg.name(),
                r.alone.p999_us,
                r.with_lo.p999_us,
                r.shares.iter().map(|(n, v)| format!("{n} {v:.2}")).collect::<Vec<_>>().join(", ")
            );
            rows.push(r);
        }
    }
    let table = summary(&s, &rows);
    print!("{table}");
    std::fs::write(s.out.join("akita-mc.md"), &table)?;
    let json = serde_json::json!({ "experiment": "akita-mc", "cpus": s.vm_cpus, "rate": a.rate, "phase_s": a.phase_s, "qemu": !a.no_qemu, "rows": rows });
    std::fs::write(s.out.join("akita-mc.json"), serde_json::to_string_pretty(&json)?)?;
    s.plot(a.common.no_plot);
    Ok(())
}

fn summary(s: &Setup, rows: &[Row]) -> String {
    let mut t = String::from(
        "\n| config | alone p50 (us) | alone p99 | alone p99.9 | with LO p50 | with LO p99 | with LO p99.9 | p99.9 with/alone | memcached share | LO shares |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for &cfg in &s.configs {
        let rs: Vec<&Row> = rows.iter().filter(|r| r.config == cfg).collect();
        let f = |g: fn(&Row) -> f64| rs.iter().map(|r| g(r)).collect::<Vec<f64>>();
        let lo: Vec<String> = ["lo1", "lo2", "lo3"]
            .iter()
            .map(|n| med(&rs.iter().filter_map(|r| r.shares.iter().find(|s| s.0 == *n).map(|s| s.1)).collect::<Vec<_>>(), 2))
            .collect();
        t += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            cfg.name(),
            med(&f(|r| r.alone.p50_us), 0),
            med(&f(|r| r.alone.p99_us), 0),
            med(&f(|r| r.alone.p999_us), 0),
            med(&f(|r| r.with_lo.p50_us), 0),
            med(&f(|r| r.with_lo.p99_us), 0),
            med(&f(|r| r.with_lo.p999_us), 0),
            med(&f(|r| r.with_lo.p999_us / r.alone.p999_us), 3),
            med(&f(|r| r.shares.first().map_or(f64::NAN, |s| s.1)), 3),
            lo.join(" / ")
        );
    }
    t
}
