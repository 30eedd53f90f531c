//! The command line of `schedbe trace` and its validation.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use schedbe_cgroup::BeRules;

#[derive(clap::Args, Debug, Clone)]
pub struct TraceArgs {
    /// Window length in seconds (fractional allowed)
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Grace period in microseconds
    #[arg(long, default_value_t = 50)]
    pub grace_us: u64,
    /// Extra BE cgroup path patterns (globs relative to /sys/fs/cgroup); defaults (kubelet BestEffort) are always included unless --no-default-be-cgroups
    #[arg(long = "be-cgroup")]
    pub be_cgroups: Vec<String>,
    /// Do not treat the kubelet BestEffort cgroups as BE
    #[arg(long)]
    pub no_default_be_cgroups: bool,
    /// Write the JSON report here instead of stdout
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Include a per-task table (pid, comm, tier, run_ns, wait_ns) in the report
    #[arg(long)]
    pub per_task: bool,
    /// Report, for this cgroup v2 cgroup (path relative to the cgroup v2
    /// mount, e.g. kubepods.slice/kubepods-pod1.slice, or absolute under it),
    /// the most CPUs its tasks and its descendants' ran on at once, their CPU
    /// time, and the time at each number of CPUs. Repeatable (up to 64)
    #[arg(long = "cgroup", value_name = "PATH")]
    pub cgroups: Vec<String>,
    /// Load and attach everything now, but start tracing only at this
    /// CLOCK_MONOTONIC time (ns): the costly start-up (BPF load, under
    /// emulation seconds of CPU) then happens before the window, not in it.
    /// Used by `schedbe bench`.
    #[arg(long, hide = true)]
    pub start_at_ns: Option<u64>,
}

impl Default for TraceArgs {
    fn default() -> Self {
        TraceArgs {
            duration: 10.0,
            grace_us: 50,
            be_cgroups: Vec::new(),
            no_default_be_cgroups: false,
            output: None,
            per_task: false,
            cgroups: Vec::new(),
            start_at_ns: None,
        }
    }
}

pub(crate) fn be_rules(args: &TraceArgs) -> Result<BeRules> {
    let mut pats: Vec<String> = Vec::new();
    if !args.no_default_be_cgroups {
        pats.extend(
            schedbe_cgroup::DEFAULT_BE_PATTERNS
                .iter()
                .map(|s| s.to_string()),
        );
    }
    pats.extend(args.be_cgroups.iter().cloned());
    BeRules::new(&pats).context("invalid --be-cgroup pattern")
}

pub(crate) fn validate(args: &TraceArgs) -> Result<()> {
    if !(args.duration.is_finite() && args.duration > 0.0 && args.duration <= 86_400.0) {
        bail!(
            "--duration must be a positive number of seconds (at most 86400), got {}",
            args.duration
        );
    }
    if args.duration * 1e9 < 1.0 {
        bail!("--duration {} is shorter than a nanosecond", args.duration);
    }
    if args.grace_us > 10_000_000 {
        bail!(
            "--grace-us must be at most 10000000 (10 s), got {}",
            args.grace_us
        );
    }
    if let Some(out) = &args.output {
        let dir = out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !dir.is_dir() {
            bail!(
                "--output {}: directory {} does not exist",
                out.display(),
                dir.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run;

    #[test]
    fn bad_args_are_rejected_before_anything_runs() {
        let mut a = TraceArgs {
            duration: f64::NAN,
            ..Default::default()
        };
        assert!(run(&a).unwrap_err().to_string().contains("--duration"));
        a.duration = -1.0;
        assert!(run(&a).is_err());
        a.duration = 1.0;
        a.grace_us = u64::MAX;
        assert!(run(&a).unwrap_err().to_string().contains("--grace-us"));
        a.grace_us = 50;
        a.output = Some("/nonexistent-dir/x.json".into());
        assert!(run(&a).unwrap_err().to_string().contains("does not exist"));
        a.output = None;
        // whether or not cgroup v2 is mounted here, a missing --cgroup is an error
        a.cgroups = vec!["schedbe-trace-test-no-such.slice/x".into()];
        let e = format!("{:#}", run(&a).unwrap_err());
        assert!(e.contains("--cgroup"), "{e}");
    }
}
