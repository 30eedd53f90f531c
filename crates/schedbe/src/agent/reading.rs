//! What the agent reads from each sandbox: its CPU usage, its cpu.max and
//! its CPU pressure.

use std::path::Path;

use anyhow::{Context, Result};

use super::files::Files;
use super::psi::{self, Pressure};
use crate::sandbox::discover::Sandbox;

/// What the agent reads from one sandbox.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub usage_us: u64,
    /// cpu.max in CPUs, when limited.
    pub limit_cpus: Option<f64>,
    /// cpu.pressure, when the kernel has PSI for cgroups.
    pub pressure: Option<Pressure>,
}

/// Read a sandbox's cpu.stat (required), cpu.max and cpu.pressure (optional).
pub fn read(files: &mut Files, root: &Path, s: &Sandbox) -> Result<Reading> {
    let dir = root.join(&s.cgroup.rel);
    let stat = dir.join("cpu.stat");
    let usage_us = psi::parse_cpu_stat_usage(&psi::read(files, &stat)?).with_context(|| stat.display().to_string())?;
    let max = dir.join("cpu.max");
    let limit_cpus = match files.read(&max) {
        Ok(t) => schedbe_cgroup::parse_cpu_max(&t)
            .with_context(|| format!("/{}/cpu.max", s.cgroup.rel))?
            .map(|(quota_us, period_us)| quota_us as f64 / period_us as f64),
        Err(_) => None,
    };
    let pf = dir.join("cpu.pressure");
    let pressure = match files.read(&pf) {
        Ok(t) => Some(psi::parse_pressure(&t).with_context(|| pf.display().to_string())?),
        Err(_) => None,
    };
    Ok(Reading { usage_us, limit_cpus, pressure })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::discover::{discover, patterns};
    use crate::testtree::TempTree;

    #[test]
    fn read_a_fake_tree() {
        let t = TempTree::new("reading");
        // "limited" has all three files, "plain" only the required one
        t.write(Path::new("limited/cpu.stat"), "usage_usec 1500\nuser_usec 1000\n");
        t.write(Path::new("limited/cpu.max"), "50000 100000\n");
        t.write(Path::new("limited/cpu.pressure"), "some avg10=1.00 avg60=0.00 avg300=0.00 total=5\n");
        t.write(Path::new("plain/cpu.stat"), "usage_usec 7\n");
        let found = discover(t.root(), &patterns(&["*".to_string()]).unwrap()).unwrap();
        let r = read(&mut Files::new(), t.root(), &found[0]).unwrap();
        assert_eq!((r.usage_us, r.limit_cpus, r.pressure.map(|p| p.some.avg10)), (1500, Some(0.5), Some(1.0)));
        let r = read(&mut Files::new(), t.root(), &found[1]).unwrap();
        assert_eq!((r.usage_us, r.limit_cpus, r.pressure), (7, None, None));
        // A broken cpu.stat names the file.
        t.write(Path::new("plain/cpu.stat"), "usage_usec many\n");
        let e = format!("{:#}", read(&mut Files::new(), t.root(), &found[1]).unwrap_err());
        assert!(e.contains("plain/cpu.stat") && e.contains("not a number"), "{e}");
    }
}
