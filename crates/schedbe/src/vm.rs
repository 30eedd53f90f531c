//! `schedbe vm -- CMD`: run CMD in a VM whose kernel has sched_ext
//! (scripts/vm.sh does the work; this finds and runs it).

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Result};

/// scripts/vm.sh: $SCHEDBE_ROOT, else the source tree this binary was built from.
fn script() -> Result<PathBuf> {
    let mut cands = Vec::new();
    if let Ok(r) = std::env::var("SCHEDBE_ROOT") {
        cands.push(PathBuf::from(r).join("scripts/vm.sh"));
    }
    cands.push(PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/vm.sh")));
    match cands.into_iter().find(|p| p.exists()) {
        Some(p) => Ok(p),
        None => bail!("scripts/vm.sh not found; set SCHEDBE_ROOT to the schedbe source tree"),
    }
}

pub fn run(args: &[String]) -> Result<i32> {
    let s = script()?;
    let err = Command::new("bash").arg(&s).args(args).exec();
    bail!("cannot run {}: {err}", s.display())
}
