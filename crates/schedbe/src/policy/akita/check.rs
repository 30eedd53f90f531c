//! `schedbe akita check vms.toml [--json]`: place the file's VMs as Akita's
//! pCPU picker would, offline, and say per CPU what runs there and what the
//! EDF-VD test says; exit 2 when a VM is refused.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use super::config::{AkitaConfig, Vcpus, VmSpec};
use super::cpus;
use super::edfvd::{Crit, Test};
use super::placement::{num, AdmitError, Candidate, Placement, VmRequest};

/// Exit status when the file is valid but a VM is refused (1 is any error).
pub const EXIT_REFUSED: i32 = 2;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The VM file (format: docs/akita.md)
    pub file: PathBuf,
    /// Print the report as one JSON object
    #[arg(long)]
    pub json: bool,
}

/// What `check` found; the same for the text and the JSON output.
#[derive(Debug, Serialize)]
pub struct Report {
    /// CPUs available to VMs.
    pub cpus: Vec<u32>,
    pub initial_temperature: u32,
    /// CPUs with vCPUs, ascending.
    pub used: Vec<CpuReport>,
    pub idle_cpus: Vec<u32>,
    /// Admitted VMs, in admission order.
    pub admitted: Vec<String>,
    pub refused: Vec<RefusedVm>,
    /// VMs with vcpus = "threads": admitted per thread at runtime, not here.
    pub deferred: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct CpuReport {
    pub cpu: u32,
    pub vcpus: Vec<VcpuRef>,
    #[serde(flatten)]
    pub test: Test,
}

#[derive(Debug, Serialize)]
pub struct VcpuRef {
    pub vm: String,
    pub index: u32,
    pub criticality: Crit,
    pub pinned: bool,
}

#[derive(Debug, Serialize)]
pub struct RefusedVm {
    pub vm: String,
    /// The whole reason, numbers included.
    pub message: String,
    /// The CPUs tried for the vCPU that fit nowhere, with the test's numbers.
    pub tried: Vec<Candidate>,
}

pub fn run(a: &CheckArgs) -> Result<i32> {
    let cfg = AkitaConfig::load(&a.file)?;
    let report = build(&cfg);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).context("cannot encode the report")?);
    } else {
        print!("{}", render(&report, &a.file.display().to_string()));
    }
    if report.refused.is_empty() {
        return Ok(0);
    }
    // The text report has the reasons already; with --json, stderr gets them
    // so that a person running a script sees why.
    if a.json {
        for r in &report.refused {
            eprintln!("schedbe: {}", r.message);
        }
    }
    let names: Vec<&str> = report.refused.iter().map(|r| r.vm.as_str()).collect();
    let total = report.admitted.len() + report.refused.len();
    eprintln!("schedbe: {} of {total} VMs refused: {}", names.len(), names.join(", "));
    Ok(EXIT_REFUSED)
}

/// Admit the VMs in file order (the paper's arrival order) and describe the result.
pub fn build(cfg: &AkitaConfig) -> Report {
    let mut placement = Placement::new(&cfg.cpus);
    let (mut admitted, mut refused, mut deferred) = (Vec::new(), Vec::new(), Vec::new());
    for vm in &cfg.vms {
        let Vcpus::Count(n) = vm.vcpus else {
            deferred.push(vm.name.clone());
            continue;
        };
        match placement.add_vm(&request(vm, n)) {
            Ok(_) => admitted.push(vm.name.clone()),
            Err(e) => refused.push(refused_vm(&vm.name, e)),
        }
    }
    let used = placement.slots().iter().filter(|s| !s.vcpus.is_empty());
    let used = used
        .map(|s| CpuReport {
            cpu: s.cpu,
            vcpus: s
                .vcpus
                .iter()
                .map(|v| VcpuRef { vm: v.vm.clone(), index: v.index, criticality: v.server.crit(), pinned: v.pinned })
                .collect(),
            test: s.test(),
        })
        .collect();
    Report {
        cpus: cfg.cpus.clone(),
        initial_temperature: cfg.initial_temperature,
        used,
        idle_cpus: placement.idle_cpus(),
        admitted,
        refused,
        deferred,
    }
}

fn request(vm: &VmSpec, vcpus: u32) -> VmRequest<'_> {
    VmRequest { name: &vm.name, server: vm.server, vcpus, cpus: vm.cpus.as_deref() }
}

fn refused_vm(name: &str, e: AdmitError) -> RefusedVm {
    let message = e.to_string();
    let tried = match e {
        AdmitError::Refused(r) => r.tried,
        AdmitError::Duplicate(_) | AdmitError::UnknownCpus { .. } => Vec::new(),
    };
    RefusedVm { vm: name.to_string(), message, tried }
}

/// The text report.
pub fn render(r: &Report, file: &str) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{file}: CPUs {} for VMs, initial temperature {}", cpus::format(&r.cpus), r.initial_temperature);
    let _ = writeln!(out, "cpu  {:<7} {:<7} {:<7} {:<7} {:<14} vCPUs", "U1(1)", "U2(1)", "U2(2)", "x", "x*U1(1)+U2(2)");
    for c in &r.used {
        let u = &c.test.util;
        let _ = writeln!(
            out,
            "{:>3}  {:.4}  {:.4}  {:.4}  {:<7} {:<14} {}",
            c.cpu,
            u.u1_1,
            u.u2_1,
            u.u2_2,
            num(c.test.x),
            num(c.test.value),
            vcpu_list(&c.vcpus)
        );
    }
    let idle = if r.idle_cpus.is_empty() { "none".to_string() } else { cpus::format(&r.idle_cpus) };
    let _ = writeln!(out, "idle CPUs: {idle}");
    let total = r.admitted.len() + r.refused.len();
    let _ = writeln!(out, "admitted: {} of {total} VMs ({})", r.admitted.len(), r.admitted.join(", "));
    for d in &r.deferred {
        let _ = writeln!(out, "not checked: vm {d:?} has vcpus = \"threads\"; the daemon admits one vCPU per thread as they appear");
    }
    for f in &r.refused {
        let _ = writeln!(out, "{}", f.message);
    }
    out
}

fn vcpu_list(vcpus: &[VcpuRef]) -> String {
    let one = |v: &VcpuRef| {
        let pin = if v.pinned { ", pinned" } else { "" };
        format!("{}/{} ({}{pin})", v.vm, v.index, v.criticality)
    };
    vcpus.iter().map(one).collect::<Vec<_>>().join(", ")
}
