//! The overhead workloads other than the LC server (which is the runner's):
//! what each is, the figures it reports, and running it once.
//!
//! - messaging: `perf bench sched messaging -g G -l L` (hackbench), total time
//! - pipe: `perf bench sched pipe -l N`, operations per second
//! - cyclictest: wakeup latency of SCHED_OTHER timer threads (one per CPU)
//!   under a background load (`stress-ng --cpu NCPUS --cpu-load P`), p99
//!   and max from its histogram. SCHED_OTHER, because sched_ext never
//!   schedules RT tasks: a SCHED_FIFO cyclictest would measure the kernel's
//!   RT class under every configuration.
//! - build: `make -j<cpus>` of a generated C project (crate::overhead::build)

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::parse;
use crate::proc::{child_setup, join_cgroup_on_exec, log_file, Proc};
use crate::tracer::{finish_tracer, start_tracer, tracer_startup_estimate_s, Tracer, TracerSpec, TRACE_MARGIN_NS};
use crate::sys::monotonic_ns;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Workload {
    Messaging,
    Pipe,
    Cyclictest,
    /// The LC server alone at this offered load (fraction of the CPUs).
    Lc(f64),
    Build,
}

/// A figure a workload reports, for the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metric {
    pub key: &'static str,
    pub unit: &'static str,
    pub higher_is_better: bool,
}

const fn m(key: &'static str, unit: &'static str, higher_is_better: bool) -> Metric {
    Metric { key, unit, higher_is_better }
}

/// The names --workloads takes (`lc` stands for every --lc-utils load).
pub const NAMES: &str = "messaging, pipe, cyclictest, lc, build";

impl Workload {
    pub fn name(self) -> String {
        match self {
            Workload::Messaging => "messaging".into(),
            Workload::Pipe => "pipe".into(),
            Workload::Cyclictest => "cyclictest".into(),
            Workload::Lc(u) => format!("lc-{:.0}", u * 100.0),
            Workload::Build => "build".into(),
        }
    }

    /// The figures the summary compares (every run records more).
    pub fn metrics(self) -> &'static [Metric] {
        const MESSAGING: &[Metric] = &[m("time_s", "s", false)];
        const PIPE: &[Metric] = &[m("ops_per_s", "ops/s", true)];
        const CYCLICTEST: &[Metric] = &[m("p99_us", "µs", false), m("max_us", "µs", false)];
        const LC: &[Metric] = &[m("mean_ms", "ms", false), m("p99_ms", "ms", false)];
        const BUILD: &[Metric] = &[m("wall_s", "s", false)];
        match self {
            Workload::Messaging => MESSAGING,
            Workload::Pipe => PIPE,
            Workload::Cyclictest => CYCLICTEST,
            Workload::Lc(_) => LC,
            Workload::Build => BUILD,
        }
    }
}

/// "messaging,lc,build" -> workloads in the canonical order (messaging,
/// pipe, cyclictest, lc at each load, build); no duplicates.
pub fn parse_list(s: &str, lc_utils: &[f64]) -> Result<Vec<Workload>> {
    let mut want: Vec<&str> = Vec::new();
    for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if !NAMES.split(", ").any(|n| n == w) {
            bail!("unknown workload {w:?} (valid: {NAMES})");
        }
        if want.contains(&w) {
            bail!("workload {w:?} listed twice");
        }
        want.push(w);
    }
    if want.is_empty() {
        bail!("no workloads given (valid: {NAMES})");
    }
    let mut out = Vec::new();
    for n in NAMES.split(", ").filter(|n| want.contains(n)) {
        match n {
            "messaging" => out.push(Workload::Messaging),
            "pipe" => out.push(Workload::Pipe),
            "cyclictest" => out.push(Workload::Cyclictest),
            "lc" => out.extend(lc_utils.iter().map(|&u| Workload::Lc(u))),
            _ => out.push(Workload::Build),
        }
    }
    Ok(out)
}

/// Parameters of the non-LC workloads.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Params {
    pub perf: String,
    pub messaging_groups: u32,
    pub messaging_loops: u32,
    pub pipe_loops: u32,
    pub cyclictest: String,
    pub cyclictest_secs: u32,
    pub cyclictest_interval_us: u32,
    pub cyclictest_hist_us: u32,
    pub cyclictest_load_pct: u32,
    pub stress_ng: String,
    /// `--cyclictest-trace`: the tracer next to cyclictest.
    pub cyclictest_trace: Option<CycTrace>,
    pub build_files: usize,
    pub build_cc: String,
    pub build_dir: PathBuf,
    pub ncpus: usize,
    pub timeout_secs: f64,
}

/// cyclictest's cgroup under the harness's (crate::cgroup::BASE) with `--cyclictest-trace`.
pub const CYC_CG: &str = "cyclictest";

/// cyclictest's metrics with `--cyclictest-trace`: its own, then the
/// tracer's split of them (the sleep timer's lateness, the wakeup's latency).
pub const CYCLICTEST_TRACED: &[Metric] = &[
    m("p99_us", "µs", false),
    m("max_us", "µs", false),
    m("timer_p99_us", "µs", false),
    m("wake_p50_us", "µs", false),
    m("wake_p99_us", "µs", false),
];

/// The tracer run next to cyclictest: its command (`schedbe trace --cgroup
/// ...`) and the cgroup cyclictest runs in.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CycTrace {
    pub tracer: Vec<String>,
    pub cgroup: PathBuf,
}

/// What one run of a workload measured.
pub struct Measured {
    pub values: BTreeMap<String, f64>,
    pub elapsed_s: f64,
    pub warnings: Vec<String>,
}

/// Start @cmd in its own process group, stdout and stderr to @dir/@tag.out, .err.
fn spawn_cmd(tag: &str, cmd: &mut Command, dir: &Path) -> Result<Proc> {
    cmd.stdin(Stdio::null()).stdout(log_file(dir, &format!("{tag}.out"))?).stderr(log_file(dir, &format!("{tag}.err"))?).process_group(0);
    child_setup(cmd, libc::SIGKILL, None);
    Proc::spawn(tag, cmd)
}

/// Wait for a command of [`spawn_cmd`] within the timeout; its stdout.
fn finish_cmd(mut p: Proc, tag: &str, dir: &Path, timeout_s: f64) -> Result<String> {
    let pgid = p.pid() as i32;
    match p.wait_timeout(Duration::from_secs_f64(timeout_s))? {
        Some(st) if st.success() => {}
        Some(st) => {
            let err = std::fs::read_to_string(dir.join(format!("{tag}.err"))).unwrap_or_default();
            bail!("{tag} failed ({st}): {}", err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(""));
        }
        None => {
            // SAFETY: signals the process group spawn_cmd created.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            p.stop(libc::SIGKILL, Duration::from_secs(5));
            bail!("{tag} did not finish in {timeout_s:.0} s (--timeout-secs); killed");
        }
    }
    let out = dir.join(format!("{tag}.out"));
    std::fs::read_to_string(&out).with_context(|| format!("read {}", out.display()))
}

fn run_cmd(tag: &str, cmd: &mut Command, dir: &Path, timeout_s: f64) -> Result<String> {
    let p = spawn_cmd(tag, cmd, dir)?;
    finish_cmd(p, tag, dir, timeout_s)
}

fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let t = monotonic_ns();
    let v = f()?;
    Ok((v, (monotonic_ns() - t) as f64 / 1e9))
}

pub fn run(w: Workload, p: &Params, dir: &Path) -> Result<Measured> {
    let mut values = BTreeMap::new();
    let mut warnings = Vec::new();
    let elapsed_s = match w {
        Workload::Messaging => {
            let mut c = Command::new(&p.perf);
            c.args(["bench", "sched", "messaging", "-g", &p.messaging_groups.to_string(), "-l", &p.messaging_loops.to_string()]);
            let (out, el) = timed(|| run_cmd("messaging", &mut c, dir, p.timeout_secs))?;
            values.insert("time_s".into(), parse::perf_total_secs(&out)?);
            el
        }
        Workload::Pipe => {
            let mut c = Command::new(&p.perf);
            c.args(["bench", "sched", "pipe", "-l", &p.pipe_loops.to_string()]);
            let (out, el) = timed(|| run_cmd("pipe", &mut c, dir, p.timeout_secs))?;
            let r = parse::perf_pipe(&out)?;
            values.insert("ops_per_s".into(), r.ops_per_s);
            values.insert("usecs_per_op".into(), r.usecs_per_op);
            values.insert("time_s".into(), r.total_s);
            el
        }
        Workload::Cyclictest => cyclictest(p, dir, &mut values, &mut warnings)?,
        Workload::Build => {
            let make = |args: &[String]| {
                let mut c = Command::new("make");
                c.arg("-C").arg(&p.build_dir).arg("-s").args(args);
                c
            };
            run_cmd("build-clean", &mut make(&["clean".into()]), dir, p.timeout_secs)?;
            let args = [format!("-j{}", p.ncpus), format!("CC={}", p.build_cc)];
            let ((), el) = timed(|| run_cmd("build", &mut make(&args), dir, p.timeout_secs).map(drop))?;
            super::build::check(&p.build_dir, p.build_files)?;
            values.insert("wall_s".into(), el);
            el
        }
        Workload::Lc(_) => bail!("the LC workload runs through the runner"),
    };
    Ok(Measured { values, elapsed_s, warnings })
}

/// Scheduling policy (field 41 of /proc/PID/task/TID/stat) of every thread
/// of @pid but the main one.
fn thread_policies(pid: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return vec![] };
    rd.filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str() != Some(&pid.to_string()))
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|s| stat_policy(&s))
        .collect()
}

/// The policy field of a stat line (after the comm in parentheses).
pub fn stat_policy(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(38)?.parse().ok()
}

fn cyclictest(p: &Params, dir: &Path, values: &mut BTreeMap<String, f64>, warnings: &mut Vec<String>) -> Result<f64> {
    let mut load = None;
    if p.cyclictest_load_pct > 0 {
        let mut c = Command::new(&p.stress_ng);
        c.args(["--cpu", &p.ncpus.to_string(), "--cpu-load", &p.cyclictest_load_pct.to_string(), "--timeout"])
            .arg(format!("{}s", p.cyclictest_secs as u64 + 60))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file(dir, "stress-ng.log")?)
            // stress-ng refuses to start in a directory it cannot write
            // ("temp-path '.' must be readable and writeable"): the project
            // tree is read-only in the VM
            .current_dir(dir)
            .process_group(0);
        child_setup(&mut c, libc::SIGKILL, None);
        load = Some(Proc::spawn("stress-ng", &mut c)?);
        std::thread::sleep(Duration::from_secs(1));
    }
    // the tracer loads (BPF verification: seconds under emulation) before cyclictest starts
    let tracer = p.cyclictest_trace.as_ref().map(|t| start_cyc_tracer(t, p, dir, warnings)).transpose()?.flatten();
    let hist = dir.join("cyclictest.hist");
    let mut c = Command::new(&p.cyclictest);
    // No -p: with -p 0 and -h, rt-tests 2.4 moved its threads to SCHED_FIFO 3.
    c.args(["-m", "-q", "--policy=other", "-t", &p.ncpus.to_string()])
        .arg(format!("--duration={}", p.cyclictest_secs))
        .arg(format!("--interval={}", p.cyclictest_interval_us))
        .arg(format!("--histogram={}", p.cyclictest_hist_us))
        .arg(format!("--histfile={}", hist.display()));
    if let Some(t) = &p.cyclictest_trace {
        join_cgroup_on_exec(&mut c, &t.cgroup)?;
    }
    let t = monotonic_ns();
    let cpu0 = crate::sys::cpu_times()?;
    let res = spawn_cmd("cyclictest", &mut c, dir).and_then(|pr| {
        // the measurement threads' policy, once they run
        std::thread::sleep(Duration::from_millis(1500));
        let pols = thread_policies(pr.pid());
        finish_cmd(pr, "cyclictest", dir, p.timeout_secs).map(|_| pols)
    });
    let elapsed = (monotonic_ns() - t) as f64 / 1e9;
    let busy = crate::sys::busy_pct(&cpu0, &crate::sys::cpu_times()?);
    if let Some(mut l) = load {
        // a load that died early would make this a measurement without load
        let alive = l.running();
        // SAFETY: signals the process group spawned above.
        unsafe { libc::kill(-(l.pid() as i32), libc::SIGTERM) };
        l.stop(libc::SIGTERM, Duration::from_secs(10));
        if !alive {
            let log = std::fs::read_to_string(dir.join("stress-ng.log")).unwrap_or_default();
            bail!("cyclictest's background load (stress-ng) exited before cyclictest finished: {}", log.trim());
        }
    }
    // all CPUs' busy share during the run, stress-ng's load included: what the latency was measured under
    values.insert("busy_pct".into(), busy);
    let pols = res?;
    if pols.iter().any(|&x| x != 0) {
        bail!("cyclictest threads are not SCHED_OTHER (policies {pols:?}): it would not measure the scheduler under test");
    }
    if pols.is_empty() {
        warnings.push("cyclictest: could not check its threads' policy".into());
    }
    if p.cyclictest_trace.is_some() {
        cyc_trace_figures(tracer, dir, values, warnings);
    }
    let text = std::fs::read_to_string(&hist).with_context(|| format!("read {}", hist.display()))?;
    let r = parse::cyclictest_hist(&text)?;
    match r.p99_us {
        Some(v) => {
            values.insert("p99_us".into(), v);
        }
        None => warnings.push(format!("cyclictest: p99 beyond the histogram's {} µs (--cyclictest-hist-us)", p.cyclictest_hist_us)),
    }
    values.insert("max_us".into(), r.max_us);
    values.insert("avg_us".into(), r.avg_us);
    values.insert("samples".into(), r.samples as f64);
    values.insert("overflows".into(), r.overflows as f64);
    Ok(elapsed)
}

/// Start the tracer on cyclictest's (fresh) cgroup, its window covering
/// cyclictest's run, and wait until it is about to open.
fn start_cyc_tracer(t: &CycTrace, p: &Params, dir: &Path, warnings: &mut Vec<String>) -> Result<Option<Tracer>> {
    if t.cgroup.exists() {
        std::fs::remove_dir(&t.cgroup).with_context(|| format!("remove {} (a process left in it?)", t.cgroup.display()))?;
    }
    std::fs::create_dir(&t.cgroup).with_context(|| format!("mkdir {}", t.cgroup.display()))?;
    let spec = TracerSpec { cmd: &t.tracer, rt_prio: 0, timeline: None };
    let from = monotonic_ns() + (tracer_startup_estimate_s() * 1e9) as u64 + TRACE_MARGIN_NS;
    // cyclictest's run plus its start-up; start_tracer keeps a margin before the end
    let to = from + (p.cyclictest_secs as u64 + 1) * 1_000_000_000 + TRACE_MARGIN_NS;
    let tr = start_tracer(&spec, dir, "cyclictest", from, to, warnings);
    if tr.is_some() {
        std::thread::sleep(Duration::from_nanos(from.saturating_sub(monotonic_ns())));
    }
    Ok(tr)
}

/// The tracer's figures for cyclictest's cgroup into `values`.
fn cyc_trace_figures(tr: Option<Tracer>, dir: &Path, values: &mut BTreeMap<String, f64>, warnings: &mut Vec<String>) {
    let key = format!("{}/{CYC_CG}", crate::cgroup::BASE);
    let Some(c) = finish_tracer(tr, "cyclictest", dir, warnings).and_then(|f| f.cgroups.get(&key).cloned()) else {
        warnings.push("cyclictest: no tracer figures".into());
        return;
    };
    for (k, v) in [("timer_p99_us", c.timer_p99_us), ("wake_p50_us", c.wake_p50_us), ("wake_p99_us", c.wake_p99_us)] {
        match v {
            Some(v) => {
                values.insert(k.into(), v);
            }
            None => warnings.push(format!("cyclictest: the tracer gave no {k}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_lists() {
        let v = parse_list("build, lc,messaging", &[0.6, 0.85]).unwrap();
        assert_eq!(v, vec![Workload::Messaging, Workload::Lc(0.6), Workload::Lc(0.85), Workload::Build]);
        assert_eq!(v[2].name(), "lc-85");
        for bad in ["", "hackbench", "pipe,pipe", "lc-60"] {
            assert!(parse_list(bad, &[0.6]).is_err(), "{bad}");
        }
        assert!(parse_list("nope", &[]).unwrap_err().to_string().contains("cyclictest"));
        assert!(Workload::Pipe.metrics()[0].higher_is_better);
    }

    #[test]
    fn policy_from_stat() {
        // /proc/self/stat of `cat` (SCHED_OTHER: policy 0, field 41)
        let s = "14647 (cat) R 14644 14644 21552 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 2797301 3133440 389 18446744073709551615 93827861553152 93827861573033 140723102022944 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 93827861589040 93827861590656 93828408963072 140723102030515 140723102030535 140723102030535 140723102031851 0";
        assert_eq!(stat_policy(s), Some(0));
        let fifo = s.replace("17 0 0 0 0 0 0", "17 0 3 1 0 0 0");
        assert_eq!(stat_policy(&fifo), Some(1));
        assert_eq!(stat_policy("12 (a) b) R 1"), None);
    }
}
