//! Akita (shared/papers/004): mixed-criticality vCPU scheduling, the offline
//! part. VMs are HI or LO criticality periodic servers (C_opt, C_pes, T);
//! each CPU must pass the EDF-VD test, and vCPUs are placed first-fit.
//!
//! - `config`, `table1`, `cpus`: vms.toml and the paper's Table 1 VM types
//! - `edfvd`: equations 1-6, the per-CPU schedulability test
//! - `placement`: the pCPU picker (section 3.6), incremental admission
//! - `check`: `schedbe akita check`
//!
//! No BPF here: the runtime policy (modes, temperatures, budgets) comes later
//! and will use `Placement` and `edfvd` as they are.

mod check;
mod config;
mod cpus;
mod edfvd;
mod placement;
mod table1;

#[cfg(test)]
mod tests;

use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum AkitaCmd {
    /// Place a VM file's vCPUs first-fit under the EDF-VD test; exit 2 if a VM is refused
    Check(check::CheckArgs),
}

pub fn cli_main(cmd: &AkitaCmd) -> Result<i32> {
    match cmd {
        AkitaCmd::Check(a) => check::run(a),
    }
}
