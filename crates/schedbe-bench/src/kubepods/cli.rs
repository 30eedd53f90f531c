//! `schedbe-bench pods apply|delete`: options, and the table printed.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::plan::{plan, Level, LevelKind, Plan};
use super::spec::{Driver, MilliCpu, Spec, WeightConversion};
use super::tree::{apply, delete, Applied, Removed};
use super::DEFAULT_ROOT;

/// `schedbe-bench pods ...`
#[derive(clap::Args, Debug, Clone)]
pub struct PodsArgs {
    #[command(subcommand)]
    pub cmd: PodsCmd,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum PodsCmd {
    /// Create the spec's kubepods tree and write kubelet's and the runtime's
    /// values; prints each cgroup with its cpu.weight and cpu.max
    Apply(PodsOpts),
    /// Remove the spec's tree again (children first; container processes are killed)
    Delete(PodsOpts),
}

#[derive(clap::Args, Debug, Clone)]
pub struct PodsOpts {
    /// The pod spec (TOML, see docs/examples/pods.toml)
    pub spec: PathBuf,
    /// Cgroup driver whose names to emulate [default: the spec's `driver`, else systemd]
    #[arg(long, value_enum)]
    pub driver: Option<Driver>,
    /// cgroup v2 directory to build kubepods under; it must exist and offer the
    /// cpu controller. On a real node use a test subtree, not the host's root
    #[arg(long, default_value = DEFAULT_ROOT)]
    pub root: PathBuf,
    /// The runtime's shares -> cpu.weight conversion for containers
    /// [default: the spec's `weight_conversion`, else linear]
    #[arg(long, value_enum)]
    pub weight_conversion: Option<WeightConversion>,
    /// Node allocatable CPU for kubepods' weight ("4", "3500m")
    /// [default: the spec's `allocatable_cpu`, else the online CPUs]
    #[arg(long)]
    pub allocatable_cpu: Option<MilliCpu>,
}

fn online_cpus() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as u64
    } else {
        1
    }
}

/// Load, validate and plan from the command line's options.
pub fn plan_from_opts(o: &PodsOpts) -> Result<Plan> {
    let spec = Spec::load(&o.spec)?;
    let driver = o.driver.or(spec.driver).unwrap_or(Driver::Systemd);
    let conversion = o.weight_conversion.or(spec.weight_conversion).unwrap_or(WeightConversion::Linear);
    let alloc = o.allocatable_cpu.or(spec.allocatable_cpu).map_or(online_cpus() * 1000, |m| m.0);
    if alloc == 0 {
        bail!("--allocatable-cpu must be more than 0");
    }
    plan(&spec, driver, conversion, alloc).with_context(|| format!("pod spec {}", o.spec.display()))
}

fn level_name(l: &Level) -> String {
    match l.kind {
        LevelKind::Kubepods => "kubepods".into(),
        LevelKind::Qos => l.qos.map_or("qos".into(), |q| q.to_string().to_lowercase()),
        LevelKind::Pod => "pod".into(),
        LevelKind::Container => "container".into(),
    }
}

/// The table `apply` and `delete` print: one row per cgroup.
pub fn render_table(root: &Path, rows: &[(Level, String)]) -> String {
    let head = ["LEVEL", "POD", "CONTAINER", "QOS", "SHARES", "CPU.WEIGHT", "CPU.MAX", "STATUS", "CGROUP"];
    let mut cells: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for (l, status) in rows {
        cells.push(vec![
            level_name(l),
            l.pod.clone().unwrap_or_else(|| "-".into()),
            l.container.clone().unwrap_or_else(|| "-".into()),
            l.qos.map_or("-".into(), |q| q.to_string()),
            l.shares.to_string(),
            l.weight.to_string(),
            l.max.to_string(),
            status.clone(),
            root.join(&l.rel).display().to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..head.len()).map(|i| cells.iter().map(|r| r[i].len()).max().unwrap_or(0)).collect();
    let mut s = String::new();
    for r in &cells {
        let line: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        s.push_str(line.join("  ").trim_end());
        s.push('\n');
    }
    s
}

/// Entry point for `schedbe-bench pods`.
pub fn cli(a: &PodsArgs) -> Result<()> {
    match &a.cmd {
        PodsCmd::Apply(o) => {
            let plan = plan_from_opts(o)?;
            let done = apply(&o.root, &plan)?;
            println!(
                "kubepods tree applied: driver {}, container weights {}, allocatable {}m",
                plan.driver.name(),
                plan.conversion.describe(),
                plan.allocatable_milli
            );
            let rows: Vec<(Level, String)> = done
                .levels
                .into_iter()
                .map(|(l, s)| {
                    let s = match s {
                        Applied::Created => "created",
                        Applied::Updated => "updated",
                        Applied::Existing => "existing (not written)",
                    };
                    (l, s.to_string())
                })
                .collect();
            print!("{}", render_table(&o.root, &rows));
            Ok(())
        }
        PodsCmd::Delete(o) => {
            let plan = plan_from_opts(o)?;
            let done = delete(&o.root, &plan)?;
            println!("kubepods tree deleted: driver {}", plan.driver.name());
            let rows: Vec<(Level, String)> = done
                .into_iter()
                .map(|(l, r)| {
                    let s = match r {
                        Removed::Removed => "removed",
                        Removed::AlreadyGone => "already gone",
                        Removed::KeptExisting => "kept (existed before apply)",
                        Removed::KeptInUse => "kept (other cgroups in it)",
                    };
                    (l, s.to_string())
                })
                .collect();
            print!("{}", render_table(&o.root, &rows));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubepods::fixtures::EXAMPLE;

    #[test]
    fn kubepods_table() {
        let s = Spec::parse(EXAMPLE).unwrap();
        let p = plan(&s, Driver::Cgroupfs, WeightConversion::Linear, 4000).unwrap();
        let rows: Vec<(Level, String)> = p.levels.iter().map(|l| (l.clone(), "created".to_string())).collect();
        let t = render_table(Path::new("/r"), &rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 8);
        assert!(lines[0].starts_with("LEVEL"));
        assert!(lines[1].contains("157") && lines[1].ends_with("/r/kubepods"), "{}", lines[1]);
        assert!(lines[4].contains("service1") && lines[4].contains("200000 100000"), "{}", lines[4]);
    }
}
