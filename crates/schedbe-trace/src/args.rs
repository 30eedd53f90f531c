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
    /// the most CPUs its tasks and its descendants' ran on at once
    /// (max_cpus), their CPU time, and the time at each number of CPUs.
    /// Repeatable (up to 64). PATH=REQ also gives its CPU request, in CPUs
    /// (2, 1.5) or millicores (1500m), for the reservation inversion: the
    /// time it ran on fewer CPUs than REQ while one of its tasks waited for a
    /// CPU and another cgroup given with a request ran on more than its own
    /// (reservation_inversion_ms, its longest interval, and per other cgroup)
    #[arg(long = "cgroup", value_name = "PATH[=REQ]")]
    pub cgroups: Vec<String>,
    /// Write every run segment in the window to this CSV file: cpu,
    /// start_ns, end_ns (from the window's start), pid, comm, tier (lc, be,
    /// other), cgroup_index and cgroup (the innermost --cgroup the task was
    /// in when switched in; empty if none). Draw it with
    /// scripts/plot-timeline.py
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// With --timeline: only the segments in this part of the window, in
    /// seconds from its start (e.g. 2:2.5); segments are cut at its ends
    #[arg(long, value_name = "START_S:END_S", requires = "timeline")]
    pub timeline_window: Option<String>,
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
            timeline: None,
            timeline_window: None,
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

/// One `--cgroup PATH[=REQ]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupArg {
    /// PATH as given: the cgroup's key in the report.
    pub(crate) path: String,
    /// REQ, in milli-CPUs.
    pub(crate) request_milli: Option<u64>,
}

/// The arguments that need parsing beyond clap's, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Checked {
    pub(crate) cgroups: Vec<CgroupArg>,
    /// `--timeline-window`, in ns from the window's start: [start, end).
    pub(crate) timeline_window: Option<(u64, u64)>,
}

/// The largest CPU request accepted, in CPUs.
const MAX_REQUEST_CPUS: u64 = 1 << 20;

/// Check the command line before anything is loaded; parse what clap leaves
/// as strings.
pub(crate) fn validate(args: &TraceArgs) -> Result<Checked> {
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
    for (flag, file) in [("--output", &args.output), ("--timeline", &args.timeline)] {
        if let Some(f) = file {
            check_parent_dir(flag, f)?;
        }
    }
    let timeline_window = match &args.timeline_window {
        None => None,
        Some(_) if args.timeline.is_none() => bail!("--timeline-window needs --timeline FILE"),
        Some(w) => Some(parse_window(w, args.duration)?),
    };
    let cgroups = args
        .cgroups
        .iter()
        .map(|a| parse_cgroup_arg(a))
        .collect::<Result<_>>()?;
    Ok(Checked {
        cgroups,
        timeline_window,
    })
}

/// The directory a file is to be written in must exist.
fn check_parent_dir(flag: &str, file: &Path) -> Result<()> {
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        bail!(
            "{flag} {}: directory {} does not exist",
            file.display(),
            dir.display()
        );
    }
    Ok(())
}

/// `PATH` or `PATH=REQ` (split at the last `=`).
pub(crate) fn parse_cgroup_arg(arg: &str) -> Result<CgroupArg> {
    let Some((path, req)) = arg.rsplit_once('=') else {
        return Ok(CgroupArg {
            path: arg.to_string(),
            request_milli: None,
        });
    };
    if path.is_empty() {
        bail!("--cgroup {arg}: no cgroup path before '='");
    }
    let milli = parse_cpus(req).with_context(|| {
        format!("--cgroup {arg}: bad CPU request {req:?} (give CPUs as a decimal, e.g. 2 or 1.5, or millicores, e.g. 1500m)")
    })?;
    Ok(CgroupArg {
        path: path.to_string(),
        request_milli: Some(milli),
    })
}

/// A non-empty string of ASCII digits as a number.
fn digits(s: &str) -> Result<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        bail!("{s:?} is not a whole number");
    }
    s.parse().with_context(|| format!("{s} is too large"))
}

/// CPUs as `2`, `1.5`, `0.125` (at most 3 decimals) or `1500m`, in milli-CPUs.
fn parse_cpus(s: &str) -> Result<u64> {
    let milli = match (s.strip_suffix('m'), s.split_once('.')) {
        (Some(m), _) => digits(m)?,
        (None, None) => digits(s)?.saturating_mul(1000),
        (None, Some((int, frac))) => {
            if frac.len() > 3 {
                bail!("at most 3 decimals (a millicore)");
            }
            let scale = 10u64.pow(3 - frac.len() as u32);
            digits(int)?
                .saturating_mul(1000)
                .saturating_add(digits(frac)? * scale)
        }
    };
    if milli > MAX_REQUEST_CPUS * 1000 {
        bail!("more than {MAX_REQUEST_CPUS} CPUs");
    }
    Ok(milli)
}

/// `START_S:END_S` (seconds from the window's start) as [start, end) ns.
fn parse_window(w: &str, duration_s: f64) -> Result<(u64, u64)> {
    let bad = || format!("--timeline-window {w}: give START_S:END_S, seconds from the window's start with START_S < END_S (e.g. 2:2.5)");
    let (a, b) = w.split_once(':').with_context(bad)?;
    let a: f64 = a.trim().parse().with_context(bad)?;
    let b: f64 = b.trim().parse().with_context(bad)?;
    if !(a.is_finite() && b.is_finite() && a >= 0.0 && a < b) {
        bail!(bad());
    }
    if a >= duration_s {
        bail!("--timeline-window {w}: starts after the window ends (--duration {duration_s})");
    }
    Ok(((a * 1e9).round() as u64, (b.min(duration_s) * 1e9).round() as u64))
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
        // a malformed request fails before the path is even looked at
        a.cgroups = vec!["kubepods.slice/pod1.slice=x".into()];
        let e = format!("{:#}", run(&a).unwrap_err());
        assert!(e.contains("--cgroup kubepods.slice/pod1.slice=x: bad CPU request"), "{e}");
        a.cgroups.clear();
        a.timeline = Some("/nonexistent-dir/t.csv".into());
        let e = format!("{:#}", run(&a).unwrap_err());
        assert!(e.contains("--timeline") && e.contains("does not exist"), "{e}");
        a.timeline = None;
        a.timeline_window = Some("1:2".into());
        let e = format!("{:#}", run(&a).unwrap_err());
        assert!(e.contains("needs --timeline"), "{e}");
    }

    fn req(arg: &str) -> Result<Option<u64>> {
        parse_cgroup_arg(arg).map(|c| c.request_milli)
    }

    #[test]
    fn cgroup_requests() {
        let c = parse_cgroup_arg("kubepods.slice/pod1.slice").unwrap();
        assert_eq!(c.path, "kubepods.slice/pod1.slice");
        assert_eq!(c.request_milli, None);
        let c = parse_cgroup_arg("/kubepods.slice/pod1.slice=2").unwrap();
        assert_eq!(c.path, "/kubepods.slice/pod1.slice", "the key leaves =REQ out");
        assert_eq!(c.request_milli, Some(2000));
        assert_eq!(req("p=1.5").unwrap(), Some(1500));
        assert_eq!(req("p=0.25").unwrap(), Some(250));
        assert_eq!(req("p=0.125").unwrap(), Some(125));
        assert_eq!(req("p=1500m").unwrap(), Some(1500));
        assert_eq!(req("p=0").unwrap(), Some(0));
        assert_eq!(req("a=b=2").unwrap(), Some(2000), "split at the last =");
        assert_eq!(parse_cgroup_arg("a=b=2").unwrap().path, "a=b");
        for bad in [
            "p=", "p=x", "p=-1", "p=+1", "p=1.", "p=.5", "p=1.2345", "p=1e3", "p=1,5", "p= 2",
            "p=nan", "p=inf", "p=m", "p=1.5m", "p=99999999999999999999999", "p=2000000",
        ] {
            let e = format!("{:#}", req(bad).unwrap_err());
            assert!(e.contains(&format!("--cgroup {bad}: bad CPU request")), "{bad}: {e}");
        }
        let e = format!("{:#}", req("=2").unwrap_err());
        assert!(e.contains("no cgroup path"), "{e}");
    }

    #[test]
    fn timeline_window() {
        assert_eq!(parse_window("2:2.5", 10.0).unwrap(), (2_000_000_000, 2_500_000_000));
        assert_eq!(parse_window("0:20", 10.0).unwrap(), (0, 10_000_000_000), "cut at the window's end");
        for bad in ["", "2", "2:", "a:b", "3:2", "2:2", "-1:2", "1:inf", "nan:1"] {
            let e = format!("{:#}", parse_window(bad, 10.0).unwrap_err());
            assert!(e.contains("START_S:END_S"), "{bad}: {e}");
        }
        let e = format!("{:#}", parse_window("10:11", 10.0).unwrap_err());
        assert!(e.contains("after the window ends"), "{e}");
        let a = TraceArgs {
            timeline: Some("t.csv".into()),
            timeline_window: Some("0.5:1".into()),
            cgroups: vec!["a=1".into(), "b".into()],
            ..Default::default()
        };
        let c = validate(&a).unwrap();
        assert_eq!(c.timeline_window, Some((500_000_000, 1_000_000_000)));
        assert_eq!(c.cgroups.len(), 2);
    }
}
