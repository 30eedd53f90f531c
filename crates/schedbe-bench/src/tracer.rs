//! Running `schedbe trace` next to a phase and reading the figures the
//! harness reports from its JSON (totals.inversion_ns, inversion_frac, ...).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::proc::{child_setup, log_pair, Proc};
use crate::sys::monotonic_ns;

/// How to start the tracer: its command line (empty: no tracer) and the
/// SCHED_FIFO priority it runs at (0: none). Built by RunParams::tracer.
pub struct TracerSpec<'a> {
    pub cmd: &'a [String],
    pub rt_prio: u8,
    /// Also write the run segments of this part of the window (seconds
    /// from its start, `START:END`) to `timeline-<tag>.csv` in the run's
    /// directory (`schedbe trace --timeline`).
    pub timeline: Option<&'a str>,
}

/// One `--cgroup` of the tracer's report (a pod, in the Kubernetes
/// experiments).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CgroupFigures {
    /// CPU time of its tasks in the window, all tiers.
    pub cpu_ms: f64,
    /// The most CPUs that ran its tasks at once.
    pub max_cpus: u32,
    pub request_cpus: Option<f64>,
    /// Time it ran on fewer CPUs than its request with a task waiting
    /// while another cgroup ran on more than its own request.
    pub reservation_inversion_ms: Option<f64>,
    pub reservation_inversion_longest_ms: Option<f64>,
    /// Element k: time with exactly k CPUs running its tasks.
    #[serde(default)]
    pub time_at_cpus_ms: Vec<f64>,
    /// Its wakeup latency, woken until switched in (None: no wakeup seen).
    #[serde(default)]
    pub wake_p50_us: Option<f64>,
    #[serde(default)]
    pub wake_p99_us: Option<f64>,
    /// How late its sleep timers fired (None: none seen, or not traced).
    #[serde(default)]
    pub timer_p99_us: Option<f64>,
}

/// One CPU's times in the tracer's window (ns).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CpuTimes {
    pub cpu: u32,
    pub cpu_ns: u64,
    pub other_ns: u64,
}

/// The tracer figures the summary uses. CPU times in ns over all CPUs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TraceFigures {
    pub window_start_ns: u64,
    pub window_end_ns: u64,
    pub duration_ns: u64,
    pub cpu_ns: u64,
    pub lc_ns: u64,
    pub be_ns: u64,
    pub other_ns: u64,
    pub idle_ns: u64,
    pub inversion_ns: u64,
    pub inversion_frac: f64,
    /// Part of the inversion during which the LC task waited on another
    /// CPU's runqueue (older tracers: 0).
    #[serde(default)]
    pub inversion_elsewhere_ns: u64,
    /// (grace period in us, inversion fraction with it): how much of the
    /// inversion comes from short waits.
    #[serde(default)]
    pub inversion_by_grace: Vec<(u64, f64)>,
    pub idle_while_lc_waits_frac: f64,
    pub lc_wait_mean_us: f64,
    pub lc_wait_p99_us: f64,
    pub dropped_events: u64,
    /// BE CPU time as a share of the CPU time LC (and RT "other") left
    /// over: be / (cpu - lc - other). None when nothing was left.
    pub be_share_of_leftover: Option<f64>,
    pub warnings: Vec<String>,
    /// Seconds from launching the tracer to its window opening (set by the runner).
    #[serde(default)]
    pub startup_s: Option<f64>,
    /// Per `--cgroup` given to the tracer, by its key (the path as given).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cgroups: BTreeMap<String, CgroupFigures>,
    /// Per CPU: what a figure over some CPUs only (a node's) needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_cpu: Vec<CpuTimes>,
}

fn cgroup_figures(v: &serde_json::Value) -> BTreeMap<String, CgroupFigures> {
    let Some(m) = v.pointer("/cgroups").and_then(|c| c.as_object()) else {
        return BTreeMap::new();
    };
    m.iter()
        .map(|(k, c)| {
            let of = |ptr: &str| c.pointer(ptr).and_then(|x| x.as_f64());
            // a distribution with no sample is no figure
            let quantile = |dist: &str, q: &str| of(&format!("/{dist}/{q}")).filter(|_| of(&format!("/{dist}/n")) > Some(0.0));
            let fig = CgroupFigures {
                cpu_ms: of("/cpu_time_ms/total").unwrap_or(0.0),
                max_cpus: c.get("max_cpus").and_then(|x| x.as_u64()).unwrap_or(0) as u32,
                request_cpus: of("/request_cpus"),
                reservation_inversion_ms: of("/reservation_inversion_ms"),
                reservation_inversion_longest_ms: of("/reservation_inversion_longest_ms"),
                time_at_cpus_ms: c
                    .get("time_at_cpus_ms")
                    .and_then(|a| a.as_array())
                    .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
                    .unwrap_or_default(),
                wake_p50_us: quantile("wakeup_latency", "p50_us"),
                wake_p99_us: quantile("wakeup_latency", "p99_us"),
                timer_p99_us: quantile("timer_latency", "p99_us"),
            };
            (k.clone(), fig)
        })
        .collect()
}

fn per_cpu_times(v: &serde_json::Value) -> Vec<CpuTimes> {
    let Some(a) = v.pointer("/per_cpu").and_then(|c| c.as_array()) else {
        return Vec::new();
    };
    a.iter()
        .filter_map(|c| {
            let n = |k: &str| c.get(k).and_then(|x| x.as_u64());
            Some(CpuTimes { cpu: n("cpu")? as u32, cpu_ns: n("cpu_ns")?, other_ns: n("other_ns")? })
        })
        .collect()
}

fn u(v: &serde_json::Value, ptr: &str) -> Result<u64> {
    v.pointer(ptr).and_then(|x| x.as_u64()).with_context(|| format!("tracer report: missing {ptr}"))
}

fn f(v: &serde_json::Value, ptr: &str) -> Result<f64> {
    v.pointer(ptr).and_then(|x| x.as_f64()).with_context(|| format!("tracer report: missing {ptr}"))
}

/// Parse the tracer's JSON report.
pub fn parse_report(json: &str) -> Result<TraceFigures> {
    let v: serde_json::Value = serde_json::from_str(json).context("tracer report is not JSON")?;
    let cpu_ns = u(&v, "/totals/cpu_ns")?;
    let lc_ns = u(&v, "/totals/lc_ns")?;
    let be_ns = u(&v, "/totals/be_ns")?;
    let other_ns = u(&v, "/totals/other_ns")?;
    let leftover = cpu_ns.saturating_sub(lc_ns).saturating_sub(other_ns);
    Ok(TraceFigures {
        window_start_ns: u(&v, "/window_start_ns")?,
        window_end_ns: u(&v, "/window_end_ns")?,
        duration_ns: u(&v, "/duration_ns")?,
        cpu_ns,
        lc_ns,
        be_ns,
        other_ns,
        idle_ns: u(&v, "/totals/idle_ns")?,
        inversion_ns: u(&v, "/totals/inversion_ns")?,
        inversion_frac: f(&v, "/inversion_frac")?,
        inversion_elsewhere_ns: u(&v, "/totals/inversion_elsewhere_ns").unwrap_or(0),
        inversion_by_grace: v
            .pointer("/inversion_by_grace")
            .and_then(|g| g.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|r| Some((r.get("grace_us")?.as_u64()?, r.get("inversion_frac")?.as_f64()?)))
                    .collect()
            })
            .unwrap_or_default(),
        idle_while_lc_waits_frac: f(&v, "/idle_while_lc_waits_frac").unwrap_or(f64::NAN),
        lc_wait_mean_us: f(&v, "/lc_wait_us/mean").unwrap_or(f64::NAN),
        lc_wait_p99_us: f(&v, "/lc_wait_us/p99").unwrap_or(f64::NAN),
        dropped_events: u(&v, "/dropped_events").unwrap_or(0),
        be_share_of_leftover: if leftover > 0 { Some(be_ns as f64 / leftover as f64) } else { None },
        warnings: v
            .pointer("/warnings")
            .and_then(|w| w.as_array())
            .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
            .unwrap_or_default(),
        startup_s: None,
        cgroups: cgroup_figures(&v),
        per_cpu: per_cpu_times(&v),
    })
}


/// Estimated time from launching the tracer to its window opening (BPF
/// load, snapshot): measured by [`probe_tracer`] and updated after every
/// trace (seconds under software emulation).
pub static TRACER_STARTUP_NS: AtomicU64 = AtomicU64::new(1_000_000_000);
/// Safety margin around the estimate.
pub const TRACE_MARGIN_NS: u64 = 300_000_000;

pub fn tracer_startup_estimate_s() -> f64 {
    TRACER_STARTUP_NS.load(Ordering::Relaxed) as f64 / 1e9
}

fn note_tracer_startup(observed_ns: u64) {
    let old = TRACER_STARTUP_NS.load(Ordering::Relaxed);
    // follow increases at once, decreases slowly
    TRACER_STARTUP_NS.store(observed_ns.max(old / 4 * 3), Ordering::Relaxed);
}

fn tracer_command(p: &TracerSpec, dir: &Path, tag: &str, secs: f64, out: &Path, start_at_ns: Option<u64>) -> Option<Command> {
    let (prog, args) = p.cmd.split_first()?;
    let mut c = Command::new(prog);
    c.args(args)
        .arg("--duration")
        .arg(format!("{secs:.3}"))
        .arg("--output")
        .arg(out)
        .arg("--be-cgroup")
        .arg(format!("{}/{}", crate::cgroup::BASE, crate::configs::BE_CG))
        .stdin(Stdio::null());
    if let Some(at) = start_at_ns {
        c.arg("--start-at-ns").arg(at.to_string());
    }
    if let (Some(w), Some(_)) = (p.timeline, start_at_ns) {
        c.arg("--timeline").arg(dir.join(format!("timeline-{tag}.csv"))).arg("--timeline-window").arg(w);
    }
    if let Ok((o, e)) = log_pair(dir, &format!("trace-{tag}.log")) {
        c.stdout(o).stderr(e);
    }
    child_setup(&mut c, libc::SIGKILL, if p.rt_prio > 0 { Some(p.rt_prio) } else { None });
    Some(c)
}

/// Run the tracer once for `secs` to learn how long it takes to start here.
/// Returns the start-up time in seconds.
pub fn probe_tracer(p: &TracerSpec, dir: &Path) -> Result<f64> {
    std::fs::create_dir_all(dir)?;
    let out = dir.join("trace-probe.json");
    let mut c = tracer_command(p, dir, "probe", 0.5, &out, None).context("no tracer command")?;
    let t_launch = monotonic_ns();
    let mut pr = Proc::spawn("tracer (probe)", &mut c)?;
    let st = pr.wait_timeout(Duration::from_secs(120))?.context("tracer probe did not finish in 120 s")?;
    if !st.success() {
        let log = std::fs::read_to_string(dir.join("trace-probe.log")).unwrap_or_default();
        bail!("tracer probe failed ({st}): {}", log.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(""));
    }
    let t = parse_report(&std::fs::read_to_string(&out).with_context(|| format!("read {}", out.display()))?)?;
    let startup = t.window_start_ns.saturating_sub(t_launch);
    TRACER_STARTUP_NS.store(startup, Ordering::Relaxed);
    Ok(startup as f64 / 1e9)
}

/// A tracer in flight: process, report path, launch time, requested start.
pub type Tracer = (Proc, PathBuf, u64, u64);

/// Launch the tracer now, loaded and attached but tracing only from
/// `from_ns` to about `to_ns`: its start-up (BPF load and verification,
/// seconds of CPU under emulation, at RT priority) then happens before the
/// experiment's windows instead of disturbing them.
pub fn start_tracer(p: &TracerSpec, dir: &Path, tag: &str, from_ns: u64, to_ns: u64, warnings: &mut Vec<String>) -> Option<Tracer> {
    let now = monotonic_ns();
    let opens = from_ns.max(now + TRACER_STARTUP_NS.load(Ordering::Relaxed));
    let win = to_ns.saturating_sub(TRACE_MARGIN_NS).saturating_sub(opens);
    if win < 500_000_000 {
        warnings.push(format!("trace {tag}: phase too short to trace (lengthen the phase)"));
        return None;
    }
    let out = dir.join(format!("trace-{tag}.json"));
    let Some(mut c) = tracer_command(p, dir, tag, win as f64 / 1e9, &out, Some(opens)) else {
        warnings.push("no tracer command".into());
        return None;
    };
    match Proc::spawn(&format!("tracer ({tag})"), &mut c) {
        Ok(pr) => Some((pr, out, now, opens)),
        Err(e) => {
            warnings.push(format!("trace {tag}: {e:#}"));
            None
        }
    }
}

pub fn finish_tracer(t: Option<Tracer>, tag: &str, dir: &Path, warnings: &mut Vec<String>) -> Option<TraceFigures> {
    let (mut pr, out, launched, wanted) = t?;
    let st = match pr.wait_timeout(Duration::from_secs(60)) {
        Ok(Some(st)) => st,
        _ => {
            pr.stop(libc::SIGKILL, Duration::from_secs(1));
            warnings.push(format!("trace {tag}: tracer did not finish; killed"));
            return None;
        }
    };
    if !st.success() {
        let log = std::fs::read_to_string(dir.join(format!("trace-{tag}.log"))).unwrap_or_default();
        let last = log.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
        warnings.push(format!("trace {tag}: tracer failed ({st}): {last}"));
        return None;
    }
    match std::fs::read_to_string(&out).map_err(anyhow::Error::from).and_then(|s| parse_report(&s)) {
        Ok(mut t) => {
            // Late: the start-up took longer than the lead it was given.
            let late = t.window_start_ns.saturating_sub(wanted);
            if late > 200_000_000 {
                note_tracer_startup(t.window_start_ns.saturating_sub(launched));
                warnings.push(format!("trace {tag}: window opened {:.2} s late (slow tracer start-up)", late as f64 / 1e9));
            }
            t.startup_s = Some(t.window_start_ns.saturating_sub(launched) as f64 / 1e9);
            for w in &t.warnings {
                warnings.push(format!("trace {tag}: {w}"));
            }
            Some(t)
        }
        Err(e) => {
            warnings.push(format!("trace {tag}: {e:#}"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_report() {
        let js = r#"{"duration_ns":3000000000,"totals":{"cpu_ns":6000,"lc_ns":3000,"be_ns":2000,
            "idle_ns":900,"other_ns":100,"inversion_ns":60,"idle_while_lc_waits_ns":1,"lc_wait_ns":5,"lc_waits":2},
            "inversion_frac":0.01,"inversion_by_grace":[{"grace_us":0,"inversion_ns":90,"inversion_frac":0.015},{"grace_us":200,"inversion_ns":6,"inversion_frac":0.001}],"idle_while_lc_waits_frac":0.002,"lc_wait_us":{"count":2,"mean":3.5,"p50":3,"p99":4,"max":4},
            "window_start_ns":10,"window_end_ns":3000000010,"dropped_events":0,"warnings":["w"]}"#;
        let t = parse_report(js).unwrap();
        assert_eq!(t.inversion_ns, 60);
        assert_eq!(t.inversion_frac, 0.01);
        assert_eq!(t.inversion_by_grace, vec![(0, 0.015), (200, 0.001)]);
        assert_eq!(t.inversion_elsewhere_ns, 0, "absent in older reports");
        assert!((t.be_share_of_leftover.unwrap() - 2000.0 / 2900.0).abs() < 1e-12);
        assert_eq!(t.warnings, vec!["w".to_string()]);
        assert!(t.cgroups.is_empty());
        assert!(parse_report("{}").is_err());
        assert!(parse_report("nope").is_err());
    }

    #[test]
    fn parses_cgroup_figures() {
        let js = r#"{"duration_ns":1,"totals":{"cpu_ns":1,"lc_ns":0,"be_ns":0,"idle_ns":0,"other_ns":0,"inversion_ns":0},
            "inversion_frac":0.0,"window_start_ns":0,"window_end_ns":1,
            "cgroups":{"k/a":{"path":"/x","id":1,"max_cpus":2,"cpu_time_ms":{"lc":1.5,"be":0.0,"other":0.0,"total":1.5},
              "time_at_cpus_ms":[1,2,3],"nr_cgroups":1,"request_cpus":1.0,"reservation_inversion_ms":4.0,"reservation_inversion_longest_ms":2.0},
              "k/b":{"path":"/y","id":2,"max_cpus":1,"cpu_time_ms":{"lc":3.0,"be":0.0,"other":0.0,"total":3.0},"time_at_cpus_ms":[1,2],"nr_cgroups":1}}}"#;
        let t = parse_report(js).unwrap();
        let a = &t.cgroups["k/a"];
        assert_eq!((a.cpu_ms, a.max_cpus, a.request_cpus, a.reservation_inversion_ms), (1.5, 2, Some(1.0), Some(4.0)));
        let b = &t.cgroups["k/b"];
        assert_eq!((b.cpu_ms, b.max_cpus, b.request_cpus, b.reservation_inversion_ms), (3.0, 1, None, None));
    }
}
