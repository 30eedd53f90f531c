//! Akita (shared/papers/004): mixed-criticality vCPU scheduling. VMs are HI
//! or LO criticality periodic servers (C_opt, C_pes, T); each CPU must pass the EDF-VD test, and vCPUs are placed first-fit.
//!
//! - `config`, `table1`, `cpus`: vms.toml and the paper's Table 1 VM types
//! - `edfvd`: equations 1-6, the per-CPU schedulability test
//! - `placement`: the pCPU picker (section 3.6), incremental admission
//! - `check`: `schedbe akita check`
//!
//! The runtime policy (`schedbe run akita`; src/bpf/akita/):
//! - `servers`: server ids and parameters, planned from the placement
//! - `runtime`: load the BPF policy, keep its maps in step with the VMs' cgroups
//! - `report`, `stats`: per-VM and per-CPU stats, served over scx_stats
//! - `control`: the daemon's root-only socket (`schedbe akita add|remove|list`)
//! - `bpf`: the generated skeleton

mod bpf;
mod check;
pub mod control;
pub mod config;
mod cpus;
mod edfvd;
mod placement;
mod report;
pub mod runtime;
mod servers;
pub mod stats;
mod table1;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

#[derive(Subcommand, Debug)]
pub enum AkitaCmd {
    /// Place a VM file's vCPUs first-fit under the EDF-VD test; exit 2 if a VM is refused
    Check(check::CheckArgs),
    /// Admit the [[vm]] tables of FILE into the running Akita daemon (all or none; root only)
    Add {
        /// [[vm]] tables in vms.toml's syntax (docs/akita.md), without cpus/initial_temperature
        file: PathBuf,
        #[command(flatten)]
        sock: SocketArg,
    },
    /// Remove a VM from the running Akita daemon: its tasks become host tasks (root only)
    Remove {
        name: String,
        #[command(flatten)]
        sock: SocketArg,
    },
    /// List the running Akita daemon's VMs and their CPUs (root only)
    List {
        #[command(flatten)]
        sock: SocketArg,
    },
}

#[derive(Args, Debug)]
pub struct SocketArg {
    /// The daemon's control socket
    #[arg(long, default_value = control::DEFAULT_SOCKET)]
    socket: PathBuf,
}

fn send(sock: &SocketArg, req: control::Request) -> Result<i32> {
    let reply = control::call(&sock.socket, &req)?;
    if !reply.ok {
        bail!("{}", reply.message);
    }
    println!("{}", reply.message);
    Ok(0)
}

pub fn cli_main(cmd: &AkitaCmd) -> Result<i32> {
    match cmd {
        AkitaCmd::Check(a) => check::run(a),
        AkitaCmd::Add { file, sock } => {
            let toml = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
            send(sock, control::Request::Add { toml })
        }
        AkitaCmd::Remove { name, sock } => send(sock, control::Request::Remove { name: name.clone() }),
        AkitaCmd::List { sock } => send(sock, control::Request::List),
    }
}
