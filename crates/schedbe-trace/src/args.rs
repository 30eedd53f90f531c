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
    /// Include a per-task table in the report: pid, comm, tier, run_ns,
    /// wait_ns, inversion_ns and wakeup_latency (woken until switched in)
    #[arg(long)]
    pub per_task: bool,
    /// Report, for this cgroup v2 cgroup (path relative to the cgroup v2
    /// mount, e.g. kubepods.slice/kubepods-pod1.slice, or absolute under it),
    /// the most CPUs its tasks and its descendants' ran on at once
    /// (max_cpus), their CPU time, the time at each number of CPUs, and
    /// their wakeup latency (wakeup_latency: woken until switched in) and
    /// how late their sleep timers fired (timer_latency: the part of a
    /// sleeper's delay before its wakeup, which no scheduler controls).
    /// Repeatable (up to 64). PATH=REQ also gives its CPU request, in CPUs
    /// (2, 1.5) or millicores (1500m), for the reservation inversion: the
    /// time it ran on fewer CPUs than REQ while one of its tasks waited for a
    /// CPU and another cgroup given with a request ran on more than its own
    /// (reservation_inversion_ms, its longest interval, and per other cgroup)
    #[arg(long = "cgroup", value_name = "PATH[=REQ]")]
    pub cgroups: Vec<String>,
    /// With --cgroup: also report, per cgroup, its CPU time (cpu_ms) and its
    /// tasks' wait time for a CPU (wait_ms) in every period [k*T, (k+1)*T)
    /// of CLOCK_MONOTONIC (the clock bpf_ktime_get_ns reads, not relative
    /// to the window's start) that lies entirely in the window; T in
    /// milliseconds (fractional allowed, rounded to whole ns)
    #[arg(long = "period-ms", value_name = "T")]
    pub period_ms: Option<f64>,
    /// Give the --cgroup PATH a CPU budget of C_MS ms per period of T_MS ms
    /// (periods [k*T, (k+1)*T) of CLOCK_MONOTONIC; 0 < C_MS <= T_MS,
    /// fractional allowed) and report, for it, its CPU time per period
    /// against C and the over-budget inversion: the time it ran with its
    /// CPU time in the current period at C or more while another cgroup
    /// given a budget, still under its own, had a task waiting longer than
    /// --grace-us (the check of Akita's budgets). Repeatable, once per PATH
    #[arg(long = "budget", value_name = "PATH=C_MS/T_MS")]
    pub budgets: Vec<String>,
    /// Write every run segment in the window to this CSV file: cpu,
    /// start_ns, end_ns (from the window's start), pid, comm, tier (lc, be,
    /// other), cgroup_index and cgroup (the innermost --cgroup the task was
    /// in when switched in; empty if none), ended (preempted: left the CPU
    /// still runnable; blocked; exited; cut at the window's end). Draw it
    /// with scripts/plot-timeline.py
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// With --timeline: only the segments in this part of the window, in
    /// seconds from its start (e.g. 2:2.5); segments are cut at its ends
    #[arg(long, value_name = "START_S:END_S", requires = "timeline")]
    pub timeline_window: Option<String>,
    /// Load and attach everything now, but start tracing only at this
    /// CLOCK_MONOTONIC time (ns): the costly start-up (BPF load, under
    /// emulation seconds of CPU) then happens before the window, not in it.
    /// Used by `schedbe-bench`.
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
            period_ms: None,
            budgets: Vec::new(),
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

/// One `--budget PATH=C_MS/T_MS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BudgetArg {
    /// PATH as given: a `--cgroup`'s key.
    pub(crate) path: String,
    /// C, ns.
    pub(crate) budget_ns: u64,
    /// T, ns.
    pub(crate) period_ns: u64,
}

/// The arguments that need parsing beyond clap's, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Checked {
    pub(crate) cgroups: Vec<CgroupArg>,
    /// `--timeline-window`, in ns from the window's start: [start, end).
    pub(crate) timeline_window: Option<(u64, u64)>,
    /// `--period-ms`, in ns.
    pub(crate) period_ns: Option<u64>,
    /// `--budget`s, in the order given (each PATH once, each a `--cgroup`).
    pub(crate) budgets: Vec<BudgetArg>,
}

/// The longest `--budget` period accepted, in ms (a day).
const MAX_BUDGET_PERIOD_MS: f64 = 86_400_000.0;

/// The largest CPU request accepted, in CPUs.
const MAX_REQUEST_CPUS: u64 = 1 << 20;

/// The most periods `--period-ms` may cut the window into (each is a row
/// per `--cgroup` in the report).
const MAX_PERIODS: u64 = 1_000_000;

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
    let cgroups: Vec<CgroupArg> = args
        .cgroups
        .iter()
        .map(|a| parse_cgroup_arg(a))
        .collect::<Result<_>>()?;
    let period_ns = match args.period_ms {
        None => None,
        Some(_) if cgroups.is_empty() => {
            bail!("--period-ms needs --cgroup: the per-period series are per cgroup")
        }
        Some(t) => Some(parse_period(t, args.duration)?),
    };
    let budgets = check_budgets(&args.budgets, &cgroups, args.duration)?;
    Ok(Checked {
        cgroups,
        timeline_window,
        period_ns,
        budgets,
    })
}

/// The `--budget`s: each well formed, on a `--cgroup` PATH (as given), once
/// per PATH, and cutting a window of `duration_s` into at most
/// [`MAX_PERIODS`] periods.
fn check_budgets(args: &[String], cgroups: &[CgroupArg], duration_s: f64) -> Result<Vec<BudgetArg>> {
    let mut budgets: Vec<BudgetArg> = Vec::new();
    for arg in args {
        let b = parse_budget_arg(arg)?;
        if !cgroups.iter().any(|c| c.path == b.path) {
            bail!(
                "--budget {arg}: {} is not given with --cgroup (a budget applies to a --cgroup: add --cgroup {}, the same PATH)",
                b.path,
                b.path
            );
        }
        if budgets.iter().any(|o| o.path == b.path) {
            bail!("--budget {arg}: {} is given a budget twice", b.path);
        }
        if (duration_s * 1e9).round() / b.period_ns as f64 > MAX_PERIODS as f64 {
            bail!(
                "--budget {arg}: its period cuts --duration {duration_s} s into more than {MAX_PERIODS} periods: give a longer period or a shorter duration"
            );
        }
        budgets.push(b);
    }
    Ok(budgets)
}

/// `PATH=C_MS/T_MS` (split at the last `=`), C and T in ns.
pub(crate) fn parse_budget_arg(arg: &str) -> Result<BudgetArg> {
    let form = || format!("--budget {arg}: give PATH=C_MS/T_MS, a budget of C ms of CPU time per period of T ms (e.g. vm1.slice=5/100)");
    let (path, spec) = arg.rsplit_once('=').with_context(form)?;
    if path.is_empty() {
        bail!("--budget {arg}: no cgroup path before '='");
    }
    let (c, t) = spec.split_once('/').with_context(form)?;
    let ms = |what: &str, s: &str| -> Result<f64> {
        s.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .with_context(|| format!("--budget {arg}: the {what} must be a positive number of milliseconds, got {s:?}"))
    };
    let (c, t) = (ms("budget C_MS", c)?, ms("period T_MS", t)?);
    if c > t {
        bail!("--budget {arg}: the budget {c} ms is longer than its period {t} ms");
    }
    if t > MAX_BUDGET_PERIOD_MS {
        bail!("--budget {arg}: the period {t} ms is longer than a day");
    }
    let (budget_ns, period_ns) = ((c * 1e6).round(), (t * 1e6).round());
    if budget_ns < 1.0 {
        bail!("--budget {arg}: the budget {c} ms is shorter than a nanosecond");
    }
    Ok(BudgetArg {
        path: path.to_string(),
        budget_ns: budget_ns as u64,
        period_ns: period_ns as u64,
    })
}

/// `--period-ms T` as ns, for a window of `duration_s` seconds.
fn parse_period(ms: f64, duration_s: f64) -> Result<u64> {
    if !(ms.is_finite() && ms > 0.0) {
        bail!("--period-ms must be a positive number of milliseconds, got {ms}");
    }
    let ns = (ms * 1e6).round();
    if ns < 1.0 {
        bail!("--period-ms {ms} is shorter than a nanosecond");
    }
    let duration_ns = (duration_s * 1e9).round();
    if ns > duration_ns {
        bail!("--period-ms {ms} is longer than --duration {duration_s} s: no whole period fits in the window");
    }
    if duration_ns / ns > MAX_PERIODS as f64 {
        bail!(
            "--period-ms {ms} cuts --duration {duration_s} s into more than {MAX_PERIODS} periods: give a longer period or a shorter duration"
        );
    }
    Ok(ns as u64)
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
        // so does a --budget for a path not given with --cgroup
        a.cgroups = vec!["kubepods.slice/pod1.slice".into()];
        a.budgets = vec!["kubepods.slice/pod2.slice=5/100".into()];
        let e = format!("{:#}", run(&a).unwrap_err());
        assert!(e.contains("--budget kubepods.slice/pod2.slice=5/100: kubepods.slice/pod2.slice is not given with --cgroup"), "{e}");
        a.budgets.clear();
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
        assert_eq!(c.period_ns, None);
    }

    #[test]
    fn period() {
        assert_eq!(parse_period(10.0, 10.0).unwrap(), 10_000_000);
        assert_eq!(parse_period(0.5, 10.0).unwrap(), 500_000);
        assert_eq!(parse_period(0.0015, 1.0).unwrap(), 1_500, "fractional ms");
        assert_eq!(parse_period(1000.0, 1.0).unwrap(), 1_000_000_000, "the whole window");
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let e = format!("{:#}", parse_period(bad, 10.0).unwrap_err());
            assert!(e.contains("--period-ms must be a positive number of milliseconds"), "{bad}: {e}");
        }
        let e = format!("{:#}", parse_period(1e-7, 10.0).unwrap_err());
        assert!(e.contains("shorter than a nanosecond"), "{e}");
        let e = format!("{:#}", parse_period(1500.0, 1.0).unwrap_err());
        assert!(e.contains("longer than --duration 1 s"), "{e}");
        let e = format!("{:#}", parse_period(0.001, 10.0).unwrap_err());
        assert!(e.contains("more than 1000000 periods"), "{e}");
        let mut a = TraceArgs {
            period_ms: Some(10.0),
            ..Default::default()
        };
        let e = format!("{:#}", validate(&a).unwrap_err());
        assert!(e.contains("--period-ms needs --cgroup"), "{e}");
        a.cgroups = vec!["a=1".into()];
        assert_eq!(validate(&a).unwrap().period_ns, Some(10_000_000));
        a.period_ms = Some(0.0);
        let e = format!("{:#}", validate(&a).unwrap_err());
        assert!(e.contains("--period-ms must be a positive number"), "{e}");
    }

    #[test]
    fn budgets() {
        let b = parse_budget_arg("k/vm1.slice=5/100").unwrap();
        assert_eq!(
            b,
            BudgetArg {
                path: "k/vm1.slice".into(),
                budget_ns: 5_000_000,
                period_ns: 100_000_000
            }
        );
        let b = parse_budget_arg("a=b=0.5/2.25").unwrap();
        assert_eq!((b.path.as_str(), b.budget_ns, b.period_ns), ("a=b", 500_000, 2_250_000), "split at the last =");
        assert_eq!(parse_budget_arg("p=10/10").unwrap().budget_ns, 10_000_000, "C = T");
        for bad in ["p", "p=5", "p=5:100", "p/5/100"] {
            let e = format!("{:#}", parse_budget_arg(bad).unwrap_err());
            assert!(e.contains(&format!("--budget {bad}: give PATH=C_MS/T_MS")), "{bad}: {e}");
        }
        let e = format!("{:#}", parse_budget_arg("=5/100").unwrap_err());
        assert!(e.contains("no cgroup path"), "{e}");
        for bad in ["p=0/100", "p=-1/100", "p=x/100", "p=/100", "p=nan/100", "p=inf/100", "p= 5/100"] {
            let e = format!("{:#}", parse_budget_arg(bad).unwrap_err());
            assert!(e.contains("the budget C_MS must be a positive number of milliseconds"), "{bad}: {e}");
        }
        for bad in ["p=5/0", "p=5/-100", "p=5/", "p=5/100/2", "p=5/inf"] {
            let e = format!("{:#}", parse_budget_arg(bad).unwrap_err());
            assert!(e.contains("the period T_MS must be a positive number of milliseconds"), "{bad}: {e}");
        }
        let e = format!("{:#}", parse_budget_arg("p=20/10").unwrap_err());
        assert!(e.contains("--budget p=20/10: the budget 20 ms is longer than its period 10 ms"), "{e}");
        let e = format!("{:#}", parse_budget_arg("p=1e-7/10").unwrap_err());
        assert!(e.contains("shorter than a nanosecond"), "{e}");
        let e = format!("{:#}", parse_budget_arg("p=1/1e9").unwrap_err());
        assert!(e.contains("longer than a day"), "{e}");

        let mut a = TraceArgs {
            cgroups: vec!["vm1=2".into(), "vm2".into()],
            budgets: vec!["vm1=5/100".into(), "vm2=2.5/10".into()],
            ..Default::default()
        };
        let c = validate(&a).unwrap();
        assert_eq!(c.budgets.iter().map(|b| b.path.as_str()).collect::<Vec<_>>(), ["vm1", "vm2"]);
        assert_eq!(c.budgets[1].period_ns, 10_000_000);
        a.budgets = vec!["vm3=5/100".into()];
        let e = format!("{:#}", validate(&a).unwrap_err());
        assert!(e.contains("--budget vm3=5/100: vm3 is not given with --cgroup"), "{e}");
        a.budgets = vec!["vm1=5/100".into(), "vm1=5/100".into()];
        let e = format!("{:#}", validate(&a).unwrap_err());
        assert!(e.contains("vm1 is given a budget twice"), "{e}");
        a.budgets = vec!["vm1=0.001/0.001".into()];
        let e = format!("{:#}", validate(&a).unwrap_err());
        assert!(e.contains("more than 1000000 periods"), "{e}");
        a.budgets = vec!["vm1=500/20000".into()];
        assert!(validate(&a).is_ok(), "a period longer than the window is allowed");
    }
}
