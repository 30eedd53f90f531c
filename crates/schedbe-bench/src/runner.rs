//! One run: one configuration, one repetition. Starts the helpers (re-exec
//! of this binary: `bench lc-server`, `bench client`, `bench be-worker`),
//! `schedbe run` and `schedbe trace` on the experiment's timeline, stops
//! them, and turns their records into figures.
//!
//! Timeline (t0 = the client's first intended send):
//!   [t0, t0+lc_alone)               LC alone   ("before": from t0+warmup)
//!   [t0+lc_alone, +be_secs)         LC + BE    ("after": from BE start+settle)
//!   then the client stops sending, waits for outstanding answers (drain),
//!   and BE keeps running `tail` seconds more (overload).
//! The tracer covers most of each phase (`--trace both`) so that tracing
//! overhead is the same before and after.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::be::{read_times, BeSummary};
use crate::cgroup::Cgroups;
use crate::client::{read_records, ClientSummary, Record};
use crate::configs::{Config, Plan};
use crate::load::ServiceDist;
use crate::stats::{ratio, window_index, LatencyHist, LatencySummary};
use crate::proc::{child_setup, log_file, log_pair, Proc};
use crate::scx::{self, sched_ext_state, SchedCmd};
use crate::sys::{self, monotonic_ns, sleep_until_ns};
use crate::tracer::{finish_tracer, start_tracer, TraceFigures, TracerSpec, TRACER_STARTUP_NS, TRACE_MARGIN_NS};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceMode {
    Off,
    Be,
    Both,
}

impl std::str::FromStr for TraceMode {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "off" => Ok(TraceMode::Off),
            "be" => Ok(TraceMode::Be),
            "both" => Ok(TraceMode::Both),
            _ => bail!("--trace {s:?}: expected off, be or both"),
        }
    }
}

/// Everything a run needs that is the same for all runs of an experiment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunParams {
    pub experiment: String,
    pub util: f64,
    pub service: ServiceDist,
    pub conns: usize,
    pub lc_alone_secs: f64,
    pub be_secs: f64,
    pub tail_secs: f64,
    pub warmup_secs: f64,
    pub settle_secs: f64,
    pub with_be: bool,
    pub be_threads: usize,
    pub be_src: String,
    pub be_dst: String,
    pub be_simd: String,
    pub trace: TraceMode,
    /// CPUs of LC and BE (None: all).
    pub cpus: Option<Vec<usize>>,
    pub ncpus: usize,
    pub client_cpus: Option<String>,
    pub client_rt_prio: u8,
    pub lc_fifo_prio: u8,
    pub tracer_rt_prio: u8,
    pub transport: String,
    /// The server's `--burn`: cpu-time or iterations.
    #[serde(default = "default_burn")]
    pub burn: String,
    /// The client repeats the first this-many seconds of arrivals (0: off).
    #[serde(default)]
    pub repeat_arrivals_secs: f64,
    pub iters_per_us: f64,
    pub drain_timeout_secs: f64,
    pub window_secs: f64,
    pub progress_secs: f64,
    pub base_seed: u64,
    #[serde(skip)]
    pub exe: PathBuf,
    #[serde(skip)]
    pub exe_prefix: Vec<String>,
    pub schedbe_bin: Option<PathBuf>,
    pub schedbe_args: Vec<String>,
    pub tracer_cmd: Vec<String>,
    /// Where the peer schedulers' binaries are (None: crate::peers::find's default).
    #[serde(default)]
    pub peers_dir: Option<PathBuf>,
    /// The Kubernetes experiments: LC is service1 and "BE" service2 (a
    /// CPU-bound SCHED_OTHER load) in their pods' container cgroups, which
    /// the experiment built; nothing is written to them per configuration.
    #[serde(default)]
    pub pods: Option<crate::kube_exp::PodRun>,
    /// Count the scheduler's BPF programs over the LC-alone phase
    /// (kernel.bpf_stats_enabled, which the caller turned on).
    #[serde(default)]
    pub bpf_stats: bool,
}

impl RunParams {
    /// How this run starts the tracer.
    pub fn tracer(&self) -> TracerSpec<'_> {
        TracerSpec { cmd: &self.tracer_cmd, rt_prio: self.tracer_rt_prio, timeline: self.pods.as_ref().map(|p| p.timeline_window.as_str()) }
    }
}

fn default_burn() -> String {
    "iterations".into()
}

/// One time window of a run (by intended send time for LC, completion
/// time for BE).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Window {
    /// Window start, seconds since t0.
    pub t_s: f64,
    pub phase: String,
    pub lc: LatencySummary,
    pub be_iters: u64,
    pub lag_max_us: f64,
}

/// Where the mean latency of a window goes, from each request's timestamps
/// (ms, means over the window's answered requests). The parts add up to the
/// mean latency: client send lag + wait for the worker to start it (earlier
/// requests of its connection, the worker's wakeup, waiting for a CPU) +
/// CPU time of the burn + time the worker was preempted while serving +
/// reply delivery (the client's wakeup and read).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct LatencyParts {
    pub n: u64,
    pub send_lag_ms: f64,
    pub to_start_ms: f64,
    pub cpu_ms: f64,
    pub preempted_ms: f64,
    pub reply_ms: f64,
}

impl LatencyParts {
    /// Means over @records (answered ones only; server clocks are the
    /// client's: one machine, CLOCK_MONOTONIC).
    pub fn of<'a>(records: impl IntoIterator<Item = &'a Record>) -> LatencyParts {
        let (mut n, mut s) = (0u64, [0f64; 5]);
        for r in records.into_iter().filter(|r| r.recv_ns > 0 && r.end_ns >= r.start_ns) {
            let wall = r.end_ns - r.start_ns;
            let parts = [
                r.lag_ns(),
                r.start_ns.saturating_sub(r.send_ns),
                r.cpu_ns.min(wall),
                wall.saturating_sub(r.cpu_ns),
                r.recv_ns.saturating_sub(r.end_ns),
            ];
            n += 1;
            for (acc, v) in s.iter_mut().zip(parts) {
                *acc += v as f64;
            }
        }
        let m = |x: f64| if n > 0 { x / n as f64 / 1e6 } else { 0.0 };
        LatencyParts { n, send_lag_ms: m(s[0]), to_start_ms: m(s[1]), cpu_ms: m(s[2]), preempted_ms: m(s[3]), reply_ms: m(s[4]) }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct RunOutcome {
    pub config: String,
    pub rep: usize,
    pub seed: u64,
    pub ok: bool,
    pub error: Option<String>,
    /// Directory of this run's raw files, relative to the experiment's output.
    pub raw_dir: String,
    pub t0_ns: u64,
    pub be_start_ns: Option<u64>,
    pub send_end_ns: u64,
    pub before: LatencySummary,
    pub after: LatencySummary,
    #[serde(default)]
    pub parts_before: LatencyParts,
    #[serde(default)]
    pub parts_after: LatencyParts,
    /// From t0+warmup to the end of sending (both phases).
    pub overall: LatencySummary,
    pub mean_ratio: Option<f64>,
    pub p99_ratio: Option<f64>,
    /// BE iterations per second in the "after" window.
    pub be_iters_per_s: Option<f64>,
    /// Offered LC CPU demand in the "before" window (service demands of the
    /// requests sent then) / (window * CPUs).
    pub achieved_util_before: Option<f64>,
    /// Service demand the server finished in the "before" window (requests
    /// whose server-side end falls in it, whenever they were sent) / (window
    /// * CPUs): the server's capacity when it was saturated then (`bench
    /// overhead --lc-capacity` measures it so).
    #[serde(default)]
    pub served_util_before: Option<f64>,
    /// Median of (thread CPU time of a burn / requested service) before BE:
    /// above 1 when the environment makes the loop slower than calibrated
    /// (e.g. context-switch costs under emulation).
    pub burn_cpu_ratio: Option<f64>,
    /// A short spin calibration just before this run, divided by the
    /// experiment's calibration: below 1 when the machine (e.g. a VM's host)
    /// got slower since.
    pub speed_vs_calibration: Option<f64>,
    pub trace_lc: Option<TraceFigures>,
    pub trace_be: Option<TraceFigures>,
    pub client: Option<ClientSummary>,
    pub be: Option<BeSummary>,
    pub sched_ext_state: Option<String>,
    pub windows: Vec<Window>,
    /// The Kubernetes experiments: the kernel's cpu.stat of each pod per phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_cpu_stat: Option<crate::kube_exp::PodsCpuStat>,
    /// The scheduler's BPF programs over the LC-alone phase's measured
    /// window (RunParams::bpf_stats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bpf_lc_phase: Option<crate::bpf_stats::BpfCost>,
    pub warnings: Vec<String>,
    #[serde(skip)]
    pub records: Vec<Record>,
}

fn secs_ns(s: f64) -> u64 {
    (s.max(0.0) * 1e9) as u64
}

fn start_be(p: &RunParams, plan: &Plan, be_cg: Option<&Path>, dir: &Path) -> Result<Proc> {
    let mut c = crate::proc::helper(&p.exe, &p.exe_prefix, "be-worker");
    c.arg("--threads")
        .arg(p.be_threads.to_string())
        .arg("--policy")
        .arg(plan.be_policy.to_string())
        .arg("--src")
        .arg(&p.be_src)
        .arg("--dst")
        .arg(&p.be_dst)
        .arg("--simd")
        .arg(&p.be_simd)
        .arg("--duration")
        .arg(format!("{}", p.be_secs + p.tail_secs + p.drain_timeout_secs + 120.0))
        .arg("--out")
        .arg(dir.join("be-iterations.csv"))
        .arg("--summary")
        .arg(dir.join("be.json"));
    if let Some(cg) = be_cg {
        c.arg("--cgroup").arg(cg);
    }
    if let Some(cpus) = &p.cpus {
        c.arg("--cpus").arg(sys::format_cpu_list(cpus));
    }
    c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log_file(dir, "be.log")?);
    child_setup(&mut c, libc::SIGKILL, None);
    Proc::spawn("be-worker", &mut c)
}

/// A run starts only when the spin loop runs at least this fraction of its
/// calibrated speed (else it waits), and is repeated when the speed is below
/// it after the run.
pub const QUIET_SPEED: f64 = 0.9;

/// The spin loop's speed now, relative to the calibration.
pub fn speed_now(p: &RunParams) -> f64 {
    crate::spin::calibrate(5, 20.0).iters_per_us / p.iters_per_us
}

/// Wait (up to `max`) until the spin loop runs at `min` of its calibrated
/// speed; returns the last speed measured.
pub fn wait_for_speed(p: &RunParams, min: f64, max: Duration) -> f64 {
    let deadline = monotonic_ns() + max.as_nanos() as u64;
    let mut said = false;
    loop {
        let s = speed_now(p);
        if s >= min || monotonic_ns() >= deadline {
            return s;
        }
        if !said {
            eprintln!("bench: the machine is busy (spin loop at {:.0}% of its calibrated speed); waiting up to {:.0} s", 100.0 * s, max.as_secs_f64());
            said = true;
        }
        std::thread::sleep(Duration::from_secs(3));
    }
}

/// Run one configuration once. Errors that make the run meaningless are
/// returned in `RunOutcome::error` (the experiment goes on with the others).
pub fn run_one(p: &RunParams, cfg: &Config, rep: usize, run_idx: usize, cgroups: Option<&Cgroups>, out_dir: &Path) -> RunOutcome {
    let raw_rel = format!("raw/{}-r{}", cfg.name, rep + 1);
    let dir = out_dir.join(&raw_rel);
    let mut o = RunOutcome { config: cfg.name.clone(), rep, seed: p.base_seed + rep as u64, raw_dir: raw_rel, ..Default::default() };
    if let Err(e) = std::fs::create_dir_all(&dir).with_context(|| format!("mkdir {}", dir.display())).and_then(|_| run_inner(p, cfg, run_idx, cgroups, &dir, &mut o)) {
        o.ok = false;
        o.error = Some(format!("{e:#}"));
        return o;
    }
    o.ok = true;
    o
}

fn run_inner(p: &RunParams, cfg: &Config, run_idx: usize, cgroups: Option<&Cgroups>, dir: &Path, o: &mut RunOutcome) -> Result<()> {
    let mut plan: Plan = cfg.plan(p.lc_fifo_prio);
    if p.pods.is_some() {
        // service2 runs under every configuration, as the pods' load.
        (plan.has_be, plan.be_policy) = (true, crate::sys::Policy::Normal);
    }
    let has_be = plan.has_be && p.with_be;
    let tag = format!("[{} r{}]", cfg.name, o.rep + 1);
    let say = |msg: &str| eprintln!("bench: {tag} {msg}");

    // Has the machine's speed drifted since the calibration? (Same thread,
    // same policy as the calibration: this orchestrator.) Wait a while for
    // a busy host (e.g. a build next to the VM) to calm down.
    let speed = wait_for_speed(p, QUIET_SPEED, Duration::from_secs(180));
    o.speed_vs_calibration = Some(speed);
    if !(0.8..=1.25).contains(&speed) {
        o.warnings.push(format!(
            "spin loop runs at {:.0}% of its calibrated speed just before this run: the machine (or the VM's host) is busier or idler than at calibration",
            100.0 * speed
        ));
    }

    // cgroups
    let (lc_cg, be_cg) = match (cgroups, &p.pods) {
        (_, Some(pods)) => (Some(pods.service1_container.clone()), Some(pods.service2_container.clone())),
        (Some(cg), None) => {
            if plan.needs_cpu_controller && !cg.cpu_controller {
                bail!("configuration {} needs the cgroup v2 cpu controller, which is not available", cfg.name);
            }
            let lc = cg.fresh(plan.lc_cgroup)?;
            let be = if plan.be_cgroup != plan.lc_cgroup { cg.fresh(plan.be_cgroup)? } else { lc.clone() };
            if let Some(w) = plan.lc_weight {
                cg.set(plan.lc_cgroup, "cpu.weight", &w.to_string())?;
            }
            if has_be || plan.be_cgroup != plan.lc_cgroup {
                if let Some(w) = plan.be_weight {
                    cg.set(plan.be_cgroup, "cpu.weight", &w.to_string())?;
                }
                if plan.be_cpu_idle {
                    cg.set(plan.be_cgroup, "cpu.idle", "1")?;
                }
            }
            (Some(lc), Some(be))
        }
        (None, None) => {
            if plan.needs_cpu_controller {
                bail!("configuration {} needs cgroup v2 (weights / cpu.idle); not available here", cfg.name);
            }
            (None, None)
        }
    };

    // the sched_ext scheduler, if any
    let state0 = sched_ext_state();
    let mut sched = None;
    if let Some(s) = plan.scheduler {
        let args: Vec<String> = p.schedbe_args.iter().cloned().chain(plan.sched_args.iter().map(|a| a.to_string())).collect();
        let cmd = SchedCmd::new(s, p.schedbe_bin.as_deref(), &args, p.peers_dir.as_deref()).with_context(|| format!("configuration {}", cfg.name))?;
        say(&format!("starting {}", s.name()));
        sched = Some(scx::load(&cmd, dir, scx::LOAD_TIMEOUT).with_context(|| format!("configuration {}", cfg.name))?);
    } else if matches!(state0.as_deref(), Some(s) if s != "disabled") {
        o.warnings.push(format!("a sched_ext scheduler is {:?} during configuration {} (which loads none)", state0, cfg.name));
    }
    o.sched_ext_state = sched_ext_state();

    // server
    let ep = match p.transport.as_str() {
        "tcp" => format!("tcp:127.0.0.1:{}", 20_000 + (std::process::id() as usize * 7 + run_idx) % 40_000),
        _ => format!("unix:@schedbe-bench-{}-{run_idx}", std::process::id()),
    };
    let mut c = crate::proc::helper(&p.exe, &p.exe_prefix, "lc-server");
    c.arg("--listen").arg(&ep).arg("--iters-per-us").arg(format!("{}", p.iters_per_us)).arg("--policy").arg(plan.lc_policy.to_string()).arg("--burn").arg(&p.burn);
    if let Some(cg) = &lc_cg {
        c.arg("--cgroup").arg(cg);
    }
    if let Some(cpus) = &p.cpus {
        c.arg("--cpus").arg(sys::format_cpu_list(cpus));
    }
    let (so, se) = log_pair(dir, "server.log")?;
    c.stdin(Stdio::null()).stdout(so).stderr(se);
    child_setup(&mut c, libc::SIGKILL, None);
    let mut server = Proc::spawn("lc-server", &mut c)?;

    // client; the tracers load before t0 (see start_tracer)
    let lead = if p.trace == TraceMode::Off { 1_000_000_000 } else { 1_000_000_000 + TRACER_STARTUP_NS.load(Ordering::Relaxed) + TRACE_MARGIN_NS };
    let t0 = monotonic_ns() + lead;
    let be_start = t0 + secs_ns(p.lc_alone_secs);
    let send_end = be_start + secs_ns(p.be_secs);
    o.t0_ns = t0;
    o.send_end_ns = send_end;
    let mut c = crate::proc::helper(&p.exe, &p.exe_prefix, "client");
    c.arg("--connect")
        .arg(&ep)
        .arg("--conns")
        .arg(p.conns.to_string())
        .arg("--util")
        .arg(p.util.to_string())
        .arg("--server-cpus")
        .arg(p.ncpus.to_string())
        .arg("--service")
        .arg(p.service.to_string())
        .arg("--duration")
        .arg(format!("{}", p.lc_alone_secs + p.be_secs))
        .arg("--start-at-ns")
        .arg(t0.to_string())
        .arg("--seed")
        .arg(o.seed.to_string())
        .arg("--repeat-every-secs")
        .arg(p.repeat_arrivals_secs.to_string())
        .arg("--records")
        .arg(dir.join("requests.csv"))
        .arg("--summary")
        .arg(dir.join("client.json"))
        .arg("--rt-prio")
        .arg(p.client_rt_prio.to_string())
        .arg("--drain-timeout")
        .arg(p.drain_timeout_secs.to_string())
        .arg("--progress-secs")
        .arg(p.progress_secs.to_string())
        .arg("--label")
        .arg(format!("bench: {tag} client"))
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Some(cc) = &p.client_cpus {
        c.arg("--cpus").arg(cc);
    }
    child_setup(&mut c, libc::SIGKILL, None);
    let mut client = Proc::spawn("client", &mut c)?;
    let pods_at = |when: u64| {
        sleep_until_ns(when);
        p.pods.as_ref().and_then(crate::kube_exp::snapshot)
    };

    say(&format!(
        "{}: {} alone {:.0} s, then {} {:.0} s (util {:.2}, {} conns, service {})",
        if p.pods.is_some() { cfg.name.clone() } else { cfg.describe() },
        if p.pods.is_some() { "service1" } else { "LC" },
        p.lc_alone_secs,
        match (has_be, p.pods.is_some()) {
            (_, true) => "service1 + service2",
            (true, false) => "LC + BE",
            (false, false) => "LC (no BE)",
        },
        p.be_secs,
        p.util,
        p.conns,
        p.service
    ));

    // Tracers: launched now, tracing from the start of each measurement window.
    let lc_from = t0 + secs_ns(p.warmup_secs);
    let be_from = be_start + secs_ns(p.settle_secs);
    let tr_lc = if p.trace == TraceMode::Both { start_tracer(&p.tracer(), dir, "lc", lc_from, be_start, &mut o.warnings) } else { None };
    let tr_be = if p.trace != TraceMode::Off { start_tracer(&p.tracer(), dir, "be", be_from, send_end, &mut o.warnings) } else { None };
    let mut be = None;
    let stat_t0 = if p.pods.is_some() { pods_at(t0) } else { None };
    let bpf_window = match (p.bpf_stats, sched.as_ref()) {
        (true, Some(s)) => {
            sleep_until_ns(lc_from);
            Some(crate::bpf_stats::Window::open(s.pid()))
        }
        _ => None,
    };
    sleep_until_ns(be_start);
    // the pods' snapshot first: it marks the phase boundary, and BE starts right after
    let stat_be = if p.pods.is_some() { pods_at(be_start) } else { None };
    match bpf_window.map(|w| w.and_then(|w| w.close())) {
        Some(Ok(c)) => o.bpf_lc_phase = Some(c),
        Some(Err(e)) => o.warnings.push(format!("BPF stats: {e:#}")),
        None => {}
    }
    if has_be {
        be = Some(start_be(p, &plan, be_cg.as_deref(), dir)?);
        o.be_start_ns = Some(monotonic_ns());
        let what = if p.pods.is_some() { "service2" } else { "BE" };
        say(&format!("{what} started ({} threads, policy {})", p.be_threads, plan.be_policy));
    } else {
        o.be_start_ns = Some(be_start);
        say("second phase (no BE in this configuration)");
    }
    let tr_lc_fig = finish_tracer(tr_lc, "lc", dir, &mut o.warnings);

    // client end (it drains outstanding requests itself)
    let client_budget = Duration::from_secs_f64((send_end.saturating_sub(monotonic_ns())) as f64 / 1e9 + p.drain_timeout_secs + 60.0);
    let st = client.wait_timeout(client_budget)?;
    if let (Some(a), Some(b), Some(c)) = (stat_t0, stat_be, if p.pods.is_some() { pods_at(0) } else { None }) {
        o.pods_cpu_stat = Some(crate::kube_exp::PodsCpuStat { service1_before: b.0.since(&a.0), service1_after: c.0.since(&b.0), service2_after: c.1.since(&b.1) });
    }
    let tr_be_fig = finish_tracer(tr_be, "be", dir, &mut o.warnings);
    match st {
        Some(st) if st.success() => {}
        Some(st) => o.warnings.push(format!("client exited with {st}")),
        None => {
            client.stop(libc::SIGKILL, Duration::from_secs(1));
            o.warnings.push("client did not finish in time; killed".into());
        }
    }
    if p.tail_secs > 0.0 && be.is_some() {
        say(&format!("client done; BE keeps running {:.0} s", p.tail_secs));
        std::thread::sleep(Duration::from_secs_f64(p.tail_secs));
    }
    if let Some(b) = be.as_mut() {
        let (st, killed) = b.stop(libc::SIGTERM, Duration::from_secs(30));
        if killed {
            o.warnings.push("BE worker did not stop on SIGTERM within 30 s; killed (its iterations are lost)".into());
        } else if let Some(st) = st {
            if !st.success() {
                o.warnings.push(format!("BE worker exited with {st}"));
            }
        }
    }
    server.stop(libc::SIGTERM, Duration::from_secs(5));
    if let Some(s) = sched.take() {
        o.warnings.extend(s.stop());
    }
    let _ = server.pid();
    if let Some(t) = &tr_lc_fig {
        if t.window_end_ns > be_start {
            o.warnings.push(format!("trace lc: window ran {:.2} s into the BE phase (slow tracer start)", (t.window_end_ns - be_start) as f64 / 1e9));
        }
    }
    if let Some(t) = &tr_be_fig {
        if t.window_end_ns > send_end {
            o.warnings.push(format!("trace be: window ran {:.2} s past the end of sending", (t.window_end_ns - send_end) as f64 / 1e9));
        }
    }

    // results
    o.trace_lc = tr_lc_fig;
    o.trace_be = tr_be_fig;
    o.client = Some(
        std::fs::read_to_string(dir.join("client.json"))
            .context("client summary missing (client failed?)")
            .and_then(|s| serde_json::from_str(&s).context("client summary"))?,
    );
    if let Some(c) = &o.client {
        o.warnings.extend(c.warnings.iter().map(|w| format!("client: {w}")));
    }
    o.records = read_records(&dir.join("requests.csv"))?;
    let be_times = if has_be {
        o.be = std::fs::read_to_string(dir.join("be.json")).ok().and_then(|s| serde_json::from_str(&s).ok());
        match read_times(&dir.join("be-iterations.csv")) {
            Ok(t) => t,
            Err(e) => {
                o.warnings.push(format!("BE iterations: {e:#}"));
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    let be_actual = o.be_start_ns.unwrap_or(be_start);
    compute_figures(p, o, &be_times, has_be, be_actual);
    say(&format!(
        "done: LC mean {:.2} -> {:.2} ms (x{}), p99 {:.2} -> {:.2} ms (x{}){}{}",
        o.before.mean_us / 1000.0,
        o.after.mean_us / 1000.0,
        fmt_opt(o.mean_ratio),
        o.before.p99_us / 1000.0,
        o.after.p99_us / 1000.0,
        fmt_opt(o.p99_ratio),
        o.be_iters_per_s.map(|b| format!(", BE {b:.1} it/s")).unwrap_or_default(),
        o.trace_be.as_ref().map(|t| format!(", inversion {:.4}% of CPU", 100.0 * t.inversion_frac)).unwrap_or_default()
    ));
    Ok(())
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into())
}

/// Before/after figures and per-window series from the raw records.
pub fn compute_figures(p: &RunParams, o: &mut RunOutcome, be_times: &[u64], has_be: bool, be_start_actual: u64) {
    let t0 = o.t0_ns;
    let be_phase = t0 + secs_ns(p.lc_alone_secs);
    let before = (t0 + secs_ns(p.warmup_secs), be_phase);
    let after = (be_start_actual.max(be_phase) + secs_ns(p.settle_secs), o.send_end_ns);
    let mut hb = LatencyHist::new();
    let mut ha = LatencyHist::new();
    let mut served_ns_before: u128 = 0;
    let mut finished_ns_before: u128 = 0;
    let mut hall = LatencyHist::new();
    let mut burn: Vec<f64> = Vec::new();
    for r in &o.records {
        if r.end_ns >= before.0 && r.end_ns < before.1 {
            finished_ns_before += r.service_ns as u128;
        }
        if r.intended_ns >= before.0 && r.intended_ns < o.send_end_ns {
            hall.record_ns(r.latency_ns());
        }
        if r.intended_ns >= before.0 && r.intended_ns < before.1 {
            hb.record_ns(r.latency_ns());
            served_ns_before += r.service_ns as u128;
            if r.service_ns > 0 && r.cpu_ns > 0 {
                burn.push(r.cpu_ns as f64 / r.service_ns as f64);
            }
        } else if r.intended_ns >= after.0 && r.intended_ns < after.1 {
            ha.record_ns(r.latency_ns());
        }
    }
    o.before = hb.summary();
    o.after = ha.summary();
    let within = |w: (u64, u64)| move |r: &&Record| r.intended_ns >= w.0 && r.intended_ns < w.1;
    o.parts_before = LatencyParts::of(o.records.iter().filter(within(before)));
    o.parts_after = LatencyParts::of(o.records.iter().filter(within(after)));
    o.overall = hall.summary();
    burn.sort_by(|a, b| a.total_cmp(b));
    o.burn_cpu_ratio = crate::stats::median_sorted(&burn);
    let svc_us = p.service.mean_us();
    if o.before.count > 0 && o.before.mean_us > 20.0 * svc_us {
        o.warnings.push(format!(
            "LC overloaded before BE started: mean latency {:.1} ms is over 20x the {:.1} ms service time \
             (burn CPU ratio {:.2}); lower --util or lengthen --service",
            o.before.mean_us / 1000.0,
            svc_us / 1000.0,
            o.burn_cpu_ratio.unwrap_or(f64::NAN)
        ));
    }
    o.mean_ratio = ratio(o.after.mean_us, o.before.mean_us);
    o.p99_ratio = ratio(o.after.p99_us, o.before.p99_us);
    let bw = before.1.saturating_sub(before.0);
    let per_cpu_window = |ns: u128| if bw > 0 { Some(ns as f64 / (bw as f64 * p.ncpus.max(1) as f64)) } else { None };
    o.achieved_util_before = per_cpu_window(served_ns_before);
    o.served_util_before = per_cpu_window(finished_ns_before);
    if has_be && after.1 > after.0 {
        let n = be_times.iter().filter(|&&t| t >= after.0 && t < after.1).count();
        o.be_iters_per_s = Some(n as f64 / ((after.1 - after.0) as f64 / 1e9));
    }
    // windows, up to the last record / BE iteration
    let width = secs_ns(p.window_secs).max(1_000_000);
    let last = o.records.iter().map(|r| r.intended_ns).max().unwrap_or(o.send_end_ns).max(be_times.last().copied().unwrap_or(0)).max(o.send_end_ns);
    let n = (window_index(last, t0, width).unwrap_or(0) + 1).min(1_000_000);
    let mut hs: Vec<LatencyHist> = (0..n).map(|_| LatencyHist::new()).collect();
    let mut lag = vec![0u64; n];
    let mut be_n = vec![0u64; n];
    for r in &o.records {
        if let Some(i) = window_index(r.intended_ns, t0, width).filter(|&i| i < n) {
            hs[i].record_ns(r.latency_ns());
            lag[i] = lag[i].max(r.lag_ns());
        }
    }
    for &t in be_times {
        if let Some(i) = window_index(t, t0, width).filter(|&i| i < n) {
            be_n[i] += 1;
        }
    }
    o.windows = (0..n)
        .map(|i| {
            let ws = t0 + i as u64 * width;
            let phase = if ws < be_phase {
                "lc"
            } else if ws < o.send_end_ns {
                if has_be { "lc+be" } else { "lc2" }
            } else {
                "drain"
            };
            Window { t_s: (i as u64 * width) as f64 / 1e9, phase: phase.into(), lc: hs[i].summary(), be_iters: be_n[i], lag_max_us: lag[i] as f64 / 1000.0 }
        })
        .collect();
}

/// Small parameters for unit tests.
#[cfg(test)]
pub fn tests_params() -> RunParams {
        RunParams {
            experiment: "srv-bg".into(),
            util: 0.5,
            service: ServiceDist::Fixed(1000.0),
            conns: 2,
            lc_alone_secs: 2.0,
            be_secs: 2.0,
            tail_secs: 0.0,
            warmup_secs: 0.5,
            settle_secs: 0.5,
            with_be: true,
            be_threads: 1,
            be_src: "8x8".into(),
            be_dst: "4x4".into(),
            be_simd: "auto".into(),
            trace: TraceMode::Off,
            cpus: None,
            ncpus: 1,
            client_cpus: None,
            client_rt_prio: 0,
            lc_fifo_prio: 10,
            tracer_rt_prio: 0,
            transport: "unix".into(),
            burn: "cpu-time".into(),
            repeat_arrivals_secs: 0.0,
            iters_per_us: 1.0,
            drain_timeout_secs: 1.0,
            window_secs: 1.0,
            progress_secs: 0.0,
            base_seed: 1,
            exe: PathBuf::new(),
            exe_prefix: vec![],
            schedbe_bin: None,
            schedbe_args: vec![],
            tracer_cmd: vec![],
            peers_dir: None,
            pods: None,
            bpf_stats: false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_parts_add_up() {
        // ms: send lag 1, wait to start 2, 8 of service wall of which 3 CPU and
        // 5 preempted, reply 4: 15 in all
        let r = Record { conn: 0, id: 0, intended_ns: 100, send_ns: 1_000_100, start_ns: 3_000_100, end_ns: 11_000_100,
                         recv_ns: 15_000_100, service_ns: 3_000_000, cpu_ns: 3_000_000 };
        let unanswered = Record { recv_ns: 0, ..r };
        let p = LatencyParts::of([&r, &r, &unanswered]);
        assert_eq!(p.n, 2);
        let got = [p.send_lag_ms, p.to_start_ms, p.cpu_ms, p.preempted_ms, p.reply_ms];
        for (g, want) in got.iter().zip([1.0, 2.0, 3.0, 5.0, 4.0]) {
            assert!((g - want).abs() < 1e-9, "{got:?}");
        }
        assert!((got.iter().sum::<f64>() - r.latency_ns() as f64 / 1e6).abs() < 1e-9);
        assert_eq!(LatencyParts::of([] as [&Record; 0]), LatencyParts::default());
    }

    #[test]
    fn figures_from_records() {
        let p = tests_params();
        let t0 = 1_000_000_000_000u64;
        let mut o = RunOutcome { t0_ns: t0, send_end_ns: t0 + 4_000_000_000, ..Default::default() };
        // 1 request every 10 ms; latency 1 ms before BE, 2 ms after.
        for k in 0..400u64 {
            let t = t0 + k * 10_000_000;
            let lat = if t < t0 + 2_000_000_000 { 1_000_000 } else { 2_000_000 };
            // the server ends each request 0.5 ms after it was due
            o.records.push(Record { conn: 0, id: k, intended_ns: t, send_ns: t + 1000, recv_ns: t + lat, service_ns: 1_000_000, end_ns: t + 500_000, ..Default::default() });
        }
        let be: Vec<u64> = (0..100u64).map(|k| t0 + 2_000_000_000 + k * 20_000_000).collect();
        compute_figures(&p, &mut o, &be, true, t0 + 2_000_000_000);
        assert_eq!(o.before.count, 150);
        assert_eq!(o.after.count, 150);
        assert!((o.mean_ratio.unwrap() - 2.0).abs() < 1e-9);
        assert!((o.be_iters_per_s.unwrap() - 50.0).abs() < 1e-9);
        // 1 ms of demand every 10 ms on 1 CPU
        assert!((o.achieved_util_before.unwrap() - 0.1).abs() < 1e-9);
        // finished in the window: the same 150 requests (each ends before the next is due)
        assert!((o.served_util_before.unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(o.windows.len(), 5);
        assert_eq!(o.windows[0].phase, "lc");
        assert_eq!(o.windows[2].phase, "lc+be");
        assert_eq!(o.windows[2].be_iters, 50);
        assert_eq!(o.windows[0].lc.count, 100);
        assert_eq!(o.windows[4].phase, "drain");
        assert!((o.windows[1].lag_max_us - 1.0).abs() < 1e-9);
    }

    #[test]
    fn trace_modes() {
        assert_eq!("both".parse::<TraceMode>().unwrap(), TraceMode::Both);
        assert!("x".parse::<TraceMode>().is_err());
    }
}
