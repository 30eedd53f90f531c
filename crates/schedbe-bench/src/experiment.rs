//! Experiments: srv-bg, weight-sweep, overload, lc-alone. They share the
//! runner and differ in defaults (configurations, load, timeline, figures).
//! Within one invocation (one boot) the spin loop is calibrated once and
//! configurations are interleaved across repetitions (A B A B ...), with the
//! same arrival sequence (seed) for every configuration of a repetition.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::cgroup::Cgroups;
use crate::configs::{parse_list, Config};
use crate::load::ServiceDist;
use crate::report::{aggregate, markdown, write_per_second, write_requests, ConfigAggregate, Meta};
use crate::runner::{run_one, RunOutcome, RunParams, TraceMode};
use crate::scx::{resolve_schedbe_bin, sched_ext_state};
use crate::spin::{calibrate, Calibration};
use crate::sys::{self, Policy};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpKind {
    SrvBg,
    WeightSweep,
    Overload,
    LcAlone,
    K8sLcBurst,
    K8sLcGuar,
}

impl ExpKind {
    pub fn name(self) -> &'static str {
        match self {
            ExpKind::SrvBg => "srv-bg",
            ExpKind::WeightSweep => "weight-sweep",
            ExpKind::Overload => "overload",
            ExpKind::LcAlone => "lc-alone",
            ExpKind::K8sLcBurst => "k8s-lc-burst",
            ExpKind::K8sLcGuar => "k8s-lc-guar",
        }
    }

    /// The Kubernetes experiments' pods (crate::kube_exp), if this is one.
    pub fn scenario(self) -> Option<crate::kube_exp::Scenario> {
        match self {
            ExpKind::K8sLcBurst => Some(crate::kube_exp::Scenario::Burst),
            ExpKind::K8sLcGuar => Some(crate::kube_exp::Scenario::Guar),
            _ => None,
        }
    }
}

/// Options shared by the experiments; unset ones take the experiment's default.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ExpArgs {
    /// Comma-separated configurations: eevdf, weights, weights-N, sched-idle, cpu-idle, fifo, schedbe, scx_bpfland, scx_lavd
    #[arg(long)]
    pub configs: Option<String>,
    /// LC load as a fraction of the CPUs LC may use (before BE starts)
    #[arg(long)]
    pub util: Option<f64>,
    /// Seconds of LC alone before BE starts
    #[arg(long)]
    pub lc_alone_secs: Option<f64>,
    /// Seconds of LC + BE (the client keeps sending)
    #[arg(long)]
    pub be_secs: Option<f64>,
    /// Seconds BE keeps running after the client stopped and drained (overload)
    #[arg(long)]
    pub tail_secs: Option<f64>,
    /// Repetitions (configurations interleaved: A B A B ...)
    #[arg(long)]
    pub reps: Option<usize>,
    /// Short smoke run: 6 s + 6 s, 1 repetition
    #[arg(long)]
    pub quick: bool,
    /// Output directory (default results/tmp/bench/<experiment>-<UTC time>)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Service demand: fixed:US, exp:US [default fixed:2000]
    #[arg(long)]
    pub service: Option<String>,
    /// Client connections = server threads [default 8 per CPU]
    #[arg(long)]
    pub conns: Option<usize>,
    /// BE threads [default: one per CPU]
    #[arg(long)]
    pub be_threads: Option<usize>,
    /// BE source image WxH
    #[arg(long, default_value = "960x540")]
    pub be_src: String,
    /// BE destination image WxH
    #[arg(long, default_value = "400x225")]
    pub be_dst: String,
    /// BE SIMD: auto or none
    #[arg(long, default_value = "auto")]
    pub be_simd: String,
    /// Run `schedbe trace`: off, be (BE phase), both (each phase, so tracing overhead is the same before and after)
    #[arg(long, default_value = "both")]
    pub trace: String,
    /// Seconds skipped at the start of the LC-alone phase [default 2, quick 1]
    #[arg(long)]
    pub warmup_secs: Option<f64>,
    /// Seconds skipped after BE starts [default 1]
    #[arg(long)]
    pub settle_secs: Option<f64>,
    /// Width of the per-window series (s)
    #[arg(long, default_value_t = 1.0)]
    pub window_secs: f64,
    /// Seed of repetition 1 (repetition r uses seed+r-1, the same for every configuration)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// CPUs for LC and BE (default: all)
    #[arg(long)]
    pub cpus: Option<String>,
    /// Pin the client to these CPUs (e.g. one excluded from --cpus)
    #[arg(long)]
    pub client_cpus: Option<String>,
    /// SCHED_FIFO priority of the client threads (0: none)
    #[arg(long, default_value_t = 60)]
    pub client_rt_prio: u8,
    /// SCHED_FIFO priority of this orchestrating process (0: none)
    #[arg(long, default_value_t = 70)]
    pub rt_prio: u8,
    /// SCHED_FIFO priority of the tracer (0: none)
    #[arg(long, default_value_t = 50)]
    pub tracer_rt_prio: u8,
    /// SCHED_FIFO priority of LC in the fifo configuration
    #[arg(long, default_value_t = 10)]
    pub lc_fifo_prio: u8,
    /// What a request's service demand means: cpu-time (the worker spins until
    /// its thread has used that much CPU time) or iterations (calibrated spin
    /// iterations: fixed work, whose CPU time the environment may inflate)
    #[arg(long, default_value = "cpu-time")]
    pub burn: String,
    /// Client-server transport: unix or tcp (loopback)
    #[arg(long, default_value = "unix")]
    pub transport: String,
    /// Use this spin-loop speed instead of calibrating
    #[arg(long)]
    pub iters_per_us: Option<f64>,
    #[command(flatten)]
    pub sched: SchedArgs,
    /// Tracer command [default: "<schedbe-bin> trace"]
    #[arg(long)]
    pub tracer: Option<String>,
    /// After sending, wait this long for outstanding answers [default 30, overload 300]
    #[arg(long)]
    pub drain_timeout: Option<f64>,
    /// Live client statistics every N seconds (0: off)
    #[arg(long, default_value_t = 5.0)]
    pub progress_secs: f64,
    /// Draw fresh Poisson arrivals for the second phase. By default, when both
    /// phases are equally long, the second phase repeats the first phase's
    /// arrivals (same request times and demands), so before/after compare
    /// the same load
    #[arg(long)]
    pub independent_arrivals: bool,
    /// Do not run scripts/plot.py
    #[arg(long)]
    pub no_plot: bool,
    /// Count the scheduler's BPF programs over each run's LC-alone window
    /// (kernel.bpf_stats_enabled, on for the experiment): BPF CPU % and
    /// cost per call in the summary, per callback in bench.json
    #[arg(long)]
    pub bpf_stats: bool,
}

/// The schedulers a configuration may load: schedbe (`schedbe run`) and
/// the peers (crate::peers).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SchedArgs {
    /// The schedbe binary (for `schedbe run` and `schedbe trace`) [default: `schedbe` next to this binary, else on $PATH]
    #[arg(long, env = "SCHEDBE_BIN")]
    pub schedbe_bin: Option<PathBuf>,
    /// Extra argument for `schedbe run` (repeatable)
    #[arg(long = "schedbe-arg", allow_hyphen_values = true)]
    pub schedbe_args: Vec<String>,
    /// Directory with the peer schedulers' binaries (scx_bpfland, scx_lavd)
    /// [default: <repo>/.cache/peers/bin, then $PATH]
    #[arg(long)]
    pub peers_dir: Option<PathBuf>,
    /// Build missing peers with scripts/peers.sh first (needs cargo; minutes)
    #[arg(long)]
    pub build_peers: bool,
}

/// Before any run: the configurations' sched_ext schedulers can be loaded
/// here (peers found or built, schedbe's binary found, sched_ext present).
/// Peers come first, so a missing one is named even where sched_ext is not.
/// Returns the schedbe binary ([`crate::scx::resolve_schedbe_bin`]).
pub(crate) fn preflight_schedulers(configs: &[Config], lc_fifo_prio: u8, s: &SchedArgs) -> Result<Option<PathBuf>> {
    let schedbe_bin = resolve_schedbe_bin(s.schedbe_bin.as_deref());
    let with: Vec<&Config> = configs.iter().filter(|c| c.loads_scheduler()).collect();
    let scheds: Vec<crate::scx::Scheduler> = with.iter().filter_map(|c| c.plan(lc_fifo_prio).scheduler).collect();
    let peers: Vec<&str> = scheds.iter().filter_map(|s| if let crate::scx::Scheduler::Peer(n) = s { Some(*n) } else { None }).collect();
    crate::peers::resolve(&peers, s.peers_dir.as_deref(), s.build_peers)?;
    if let Some(c) = with.first() {
        if sched_ext_state().is_none() {
            bail!("configuration {} needs a kernel with sched_ext (/sys/kernel/sched_ext is missing): run inside the VM, e.g. scripts/vm.sh --cpus 2 -- target/release/schedbe-bench ...", c.name);
        }
    }
    if scheds.contains(&crate::scx::Scheduler::Schedbe) && schedbe_bin.is_none() {
        bail!("configuration schedbe: {}", crate::scx::NO_SCHEDBE);
    }
    Ok(schedbe_bin)
}

struct Defaults {
    configs: &'static str,
    util: f64,
    lc_alone: f64,
    be: f64,
    tail: f64,
    reps: usize,
    with_be: bool,
    drain: f64,
}

fn defaults(k: ExpKind, quick: bool) -> Defaults {
    let (lc_alone, be) = if quick { (6.0, 6.0) } else { (20.0, 20.0) };
    let reps = if quick { 1 } else { 3 };
    match k {
        ExpKind::SrvBg => Defaults { configs: "weights,sched-idle,schedbe", util: 0.85, lc_alone, be, tail: 0.0, reps, with_be: true, drain: 30.0 },
        ExpKind::WeightSweep => Defaults { configs: "weights-10,weights-100,weights-1000,weights-10000", util: 0.85, lc_alone, be, tail: 0.0, reps, with_be: true, drain: 30.0 },
        ExpKind::Overload => Defaults {
            configs: "fifo,schedbe",
            util: 1.0,
            lc_alone: if quick { 5.0 } else { 15.0 },
            be: if quick { 5.0 } else { 15.0 },
            tail: if quick { 3.0 } else { 10.0 },
            reps,
            with_be: true,
            drain: 300.0,
        },
        ExpKind::LcAlone => Defaults { configs: "eevdf,schedbe", util: 0.85, lc_alone, be, tail: 0.0, reps, with_be: false, drain: 30.0 },
        // util: of service1's limit. 0.5 leaves it room under its quota, as a
        // request costs more than its calibrated demand on a busy node
        // (docs/bench.md, "k8s-lc-burst and k8s-lc-guar").
        ExpKind::K8sLcBurst | ExpKind::K8sLcGuar => Defaults { configs: "eevdf,schedbe,schedbe-conc", util: 0.5, lc_alone, be, tail: 0.0, reps, with_be: true, drain: 30.0 },
    }
}

fn check_secs(name: &str, v: f64, min: f64) -> Result<f64> {
    if !(v.is_finite() && v >= min && v <= 86_400.0) {
        bail!("--{name} must be a number of seconds in [{min}, 86400], got {v}");
    }
    Ok(v)
}

pub(crate) fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    // civil from days (Howard Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if mo <= 2 { 1 } else { 0 };
    format!("{y:04}{mo:02}{d:02}-{:02}{:02}{:02}Z", sod / 3600, sod / 60 % 60, sod % 60)
}

/// Whether this runs in a guest of `scripts/vm.sh --icount`, whose clock counts instructions.
fn icount_clock() -> bool {
    std::env::var("SCHEDBE_VM_ICOUNT").is_ok_and(|v| v == "1")
}

/// Whether this runs in a guest of `scripts/vm.sh --prompt-timers` whose
/// host has put QEMU's main loop, which raises the guest's timer
/// interrupts, at real-time priority: vm.sh writes the run directory's
/// `prompt-timers` file once that is done, not before, and not if it failed.
fn prompt_timers() -> bool {
    std::env::var_os("SCHEDBE_VM_RUN").is_some_and(|run| std::path::Path::new(&run).join("prompt-timers").exists())
}

pub(crate) fn machine_meta(m: &mut Meta) {
    // SAFETY: uname fills a plain struct.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) == 0 {
            m.kernel = std::ffi::CStr::from_ptr(u.release.as_ptr()).to_string_lossy().into_owned();
        }
    }
    m.cpus_online = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let ci = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    m.cpu_model = ci.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string()).unwrap_or_default();
    m.hypervisor = ci.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"));
    m.sched_ext = sched_ext_state().map(|s| format!("available (state {s})")).unwrap_or_else(|| "not in this kernel".into());
    // How far the times can be trusted, said in one place: under
    // scripts/vm.sh --icount every time is an instruction count (a cost
    // measure, steady); any other clock in a VM moves with the host's load.
    if icount_clock() {
        m.cpu_model.push_str(", instruction-counted clock");
        m.notes.push("instruction-counted clock (scripts/vm.sh --icount): 1 ns is one guest instruction and the vCPUs run one at a time, so times are instruction counts; a cost measure, no parallelism".into());
    } else if m.hypervisor {
        if prompt_timers() {
            m.notes.push("prompt timers (scripts/vm.sh --prompt-timers): the host runs QEMU's main loop, which raises the guest's timer interrupts, at SCHED_FIFO, so a timer's lateness does not grow with how busy the vCPUs are".into());
        }
        m.notes.push("timing in a virtual machine (software-emulated, sharing the host's cores) is noisy: compare configurations within this run only".into());
    }
}

/// An experiment's Meta with the machine's facts, after putting this
/// orchestrating process at SCHED_FIFO @rt_prio (0: stay) with
/// SCHED_RESET_ON_FORK, so it starts phases on time and its children start
/// as ordinary tasks.
pub(crate) fn start_meta(experiment: &str, command_line: &str, rt_prio: u8) -> Meta {
    let mut meta = Meta { experiment: experiment.into(), command: command_line.into(), started: utc_stamp(), ..Default::default() };
    machine_meta(&mut meta);
    if rt_prio > 0 {
        if let Err(e) = Policy::Fifo(rt_prio.min(99)).apply_to_current_thread(true) {
            eprintln!("bench: warning: orchestrator stays SCHED_NORMAL: {e:#}");
            meta.notes.push(format!("orchestrator could not go SCHED_FIFO: {e:#}"));
        }
    }
    meta.orchestrator_policy = sys::current_policy_desc();
    meta
}

/// After drawing an output directory's figures separately (`schedbe-bench plot`,
/// e.g. on the host after a `--no-plot` run in the VM): list them in
/// its JSON (bench.json, overhead.json) and summary.md.
pub fn record_figures(dir: &Path, json_name: &str, figs: &[String]) -> Result<()> {
    let pj = dir.join(json_name);
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&pj).with_context(|| format!("read {}", pj.display()))?)
        .with_context(|| format!("parse {}", pj.display()))?;
    v["figures"] = serde_json::json!(figs);
    std::fs::write(&pj, serde_json::to_string_pretty(&v)? + "\n").with_context(|| format!("write {}", pj.display()))?;
    let ps = dir.join("summary.md");
    if let Ok(md) = std::fs::read_to_string(&ps) {
        let body = md.split("\n## Figures\n").next().unwrap_or(&md).trim_end().to_string();
        let mut out = body + "\n";
        if !figs.is_empty() {
            out.push_str("\n## Figures\n\n");
            for f in figs {
                out.push_str(&format!("- [{f}]({f})\n"));
            }
        }
        std::fs::write(&ps, out).with_context(|| format!("write {}", ps.display()))?;
    }
    Ok(())
}

#[derive(Serialize)]
struct BenchJson<'a> {
    format: u32,
    meta: &'a Meta,
    params: &'a RunParams,
    calibration: &'a Option<Calibration>,
    configs: Vec<(String, String)>,
    aggregates: &'a [ConfigAggregate],
    runs: &'a [RunOutcome],
    figures: &'a [String],
    /// The Kubernetes experiments: per-pod figures per configuration
    #[serde(skip_serializing_if = "Option::is_none")]
    pods: Option<Vec<crate::pod_report::PodsAggregate>>,
}

fn write_outputs(out: &Path, meta: &Meta, params: &RunParams, cal: &Option<Calibration>, cfgs: &[(String, String)], runs: &[RunOutcome], figures: &[String]) -> Result<Vec<ConfigAggregate>> {
    let aggs = aggregate(cfgs, runs);
    let pods = params.pods.as_ref().map(|p| crate::pod_report::aggregate(cfgs, runs, p));
    let js = BenchJson { format: 1, meta, params, calibration: cal, configs: cfgs.to_vec(), aggregates: &aggs, runs, figures, pods: pods.clone() };
    let p = out.join("bench.json");
    std::fs::write(&p, serde_json::to_string_pretty(&js)? + "\n").with_context(|| format!("write {}", p.display()))?;
    write_per_second(&out.join("per_second.csv"), runs)?;
    let mut md = markdown(meta, params, &aggs, runs, figures);
    if let (Some(p), Some(rows)) = (&params.pods, &pods) {
        let mut sec = String::new();
        crate::pod_report::markdown(&mut sec, p, rows);
        let at = md.find("\n## Runs").unwrap_or(md.len());
        md.insert_str(at, &sec);
    }
    std::fs::write(out.join("summary.md"), md).with_context(|| format!("write {}/summary.md", out.display()))?;
    Ok(aggs)
}

pub fn run(kind: ExpKind, a: &ExpArgs, command_line: &str) -> Result<()> {
    let d = defaults(kind, a.quick);
    let configs: Vec<Config> = parse_list(a.configs.as_deref().unwrap_or(d.configs))?;
    let service: ServiceDist = a.service.as_deref().unwrap_or("fixed:2000").parse()?;
    let trace: TraceMode = a.trace.parse()?;
    let util = a.util.unwrap_or(d.util);
    if !(util.is_finite() && util > 0.0 && util <= 4.0) {
        bail!("--util must be in (0, 4], got {util}");
    }
    let lc_alone = check_secs("lc-alone-secs", a.lc_alone_secs.unwrap_or(d.lc_alone), 2.0)?;
    let be_secs = check_secs("be-secs", a.be_secs.unwrap_or(d.be), 2.0)?;
    let tail = check_secs("tail-secs", a.tail_secs.unwrap_or(d.tail), 0.0)?;
    let warmup = check_secs("warmup-secs", a.warmup_secs.unwrap_or(if a.quick { 1.0 } else { 2.0 }), 0.0)?;
    let settle = check_secs("settle-secs", a.settle_secs.unwrap_or(warmup), 0.0)?;
    let drain = check_secs("drain-timeout", a.drain_timeout.unwrap_or(d.drain), 0.0)?;
    check_secs("window-secs", a.window_secs, 0.01)?;
    if warmup >= lc_alone || settle >= be_secs {
        bail!("--warmup-secs must be shorter than --lc-alone-secs and --settle-secs shorter than --be-secs");
    }
    let reps = a.reps.unwrap_or(d.reps);
    if !(1..=1000).contains(&reps) {
        bail!("--reps must be in 1..=1000");
    }
    a.burn.parse::<crate::server::Burn>()?;
    if !matches!(a.transport.as_str(), "unix" | "tcp") {
        bail!("--transport must be unix or tcp");
    }
    crate::be::parse_size(&a.be_src)?;
    crate::be::parse_size(&a.be_dst)?;
    let cpus = a.cpus.as_deref().map(sys::parse_cpu_list).transpose()?;
    if let Some(c) = &a.client_cpus {
        sys::parse_cpu_list(c)?;
    }
    let node_cpus = match &cpus {
        Some(c) => c.len(),
        None => sys::allowed_cpus()?.len(),
    };
    // The CPUs LC's load is computed for: the node, or service1's limit.
    let ncpus = match kind.scenario() {
        Some(_) => {
            crate::kube_exp::check_node(node_cpus)?;
            (crate::kube_exp::service1_milli(node_cpus) / 1000) as usize
        }
        None => node_cpus,
    };
    let conns = a.conns.unwrap_or(8 * ncpus);
    if !(1..=4096).contains(&conns) {
        bail!("--conns must be in 1..=4096");
    }
    let be_threads = a.be_threads.unwrap_or(node_cpus);
    if !(1..=1024).contains(&be_threads) {
        bail!("--be-threads must be in 1..=1024");
    }
    let schedbe_bin = resolve_schedbe_bin(a.sched.schedbe_bin.as_deref());
    let mut tracer_cmd: Vec<String> = match &a.tracer {
        Some(t) => t.split_whitespace().map(String::from).collect(),
        None => match &schedbe_bin {
            Some(b) => vec![b.display().to_string(), "trace".into()],
            None => vec![],
        },
    };
    if trace != TraceMode::Off && tracer_cmd.is_empty() {
        bail!("--trace {}: no schedbe binary found for `schedbe trace` (give --schedbe-bin or --tracer, or --trace off)", a.trace);
    }
    // Preflight, before any long run.
    let cgroups = match Cgroups::setup() {
        Ok(c) if kind.scenario().is_some() && !c.cpu_controller => bail!("{}: the pods need the cgroup v2 cpu controller, which is not available here", kind.name()),
        Ok(c) => Some(c),
        Err(e) if kind.scenario().is_some() => return Err(e.context(format!("{} builds pods with cgroup v2", kind.name()))),
        Err(e) => {
            let needs: Vec<&str> = configs.iter().filter(|c| c.plan(a.lc_fifo_prio).needs_cpu_controller).map(|c| c.name.as_str()).collect();
            if !needs.is_empty() {
                return Err(e.context(format!("configurations {} need cgroup v2", needs.join(", "))));
            }
            eprintln!("bench: note: {e:#}; running without cgroups");
            None
        }
    };
    preflight_schedulers(&configs, a.lc_fifo_prio, &a.sched)?;
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from(format!("results/tmp/bench/{}-{}", kind.name(), utc_stamp())));
    std::fs::create_dir_all(&out).with_context(|| format!("create output directory {}", out.display()))?;
    let pods = match (kind.scenario(), &cgroups) {
        (Some(s), Some(cg)) => {
            let list: Vec<u32> = cpus.iter().flatten().map(|&c| c as u32).collect();
            let node = if list.is_empty() { crate::kube_exp::Node::Whole(node_cpus) } else { crate::kube_exp::Node::Cpus(&list) };
            let p = crate::kube_exp::apply(s, node, &cg.base, crate::kube_exp::TIMELINE_WINDOW)?;
            tracer_cmd.extend(p.tracer_args());
            Some(p)
        }
        _ => None,
    };

    let mut meta = start_meta(kind.name(), command_line, a.rt_prio);
    meta.client_protection = match (a.client_rt_prio, &a.client_cpus) {
        (0, None) => "no protection (ordinary threads)".into(),
        (p, None) => format!("every client thread SCHED_FIFO {p} with SCHED_RESET_ON_FORK"),
        (0, Some(c)) => format!("pinned to CPUs {c}"),
        (p, Some(c)) => format!("every client thread SCHED_FIFO {p} with SCHED_RESET_ON_FORK, pinned to CPUs {c}"),
    };
    meta.cgroups = match &cgroups {
        Some(c) => format!("{} (cpu controller: {})", c.base.display(), if c.cpu_controller { "yes" } else { "no" }),
        None => "none (no cgroup v2 here)".into(),
    };

    let calibration = match a.iters_per_us {
        Some(v) if v.is_finite() && v > 0.0 => {
            meta.calibration = format!("spin loop: {v:.1} iterations/us (given with --iters-per-us)");
            None
        }
        Some(v) => bail!("--iters-per-us must be positive, got {v}"),
        None => {
            let orig = sys::allowed_cpus()?;
            if let Some(c) = &cpus {
                sys::set_affinity(c)?;
            }
            eprintln!("bench: calibrating the spin loop...");
            let c = calibrate(11, 50.0);
            sys::set_affinity(&orig)?;
            eprintln!("bench: {}", c.describe());
            meta.calibration = c.describe();
            Some(c)
        }
    };
    let iters_per_us = calibration.as_ref().map(|c| c.iters_per_us).or(a.iters_per_us).unwrap_or(1.0);
    let exe = std::env::current_exe().context("cannot find this program (current_exe)")?;
    // kept until the experiment ends; the sysctl's old value goes back on drop
    let _bpf_stats = if a.bpf_stats {
        if !crate::bpf_stats::available() {
            bail!("--bpf-stats: this kernel has no kernel.bpf_stats_enabled");
        }
        let s = crate::bpf_stats::enable_stats().context("--bpf-stats (needs root)")?;
        meta.notes.push("kernel.bpf_stats_enabled=1 for the whole experiment: BPF programs counted over each run's LC-alone window (the counting is in every timing)".into());
        Some(s)
    } else {
        None
    };
    let params = RunParams {
        experiment: kind.name().into(),
        util,
        service,
        conns,
        lc_alone_secs: lc_alone,
        be_secs,
        tail_secs: tail,
        warmup_secs: warmup,
        settle_secs: settle,
        with_be: d.with_be,
        be_threads,
        be_src: a.be_src.clone(),
        be_dst: a.be_dst.clone(),
        be_simd: a.be_simd.clone(),
        trace,
        cpus,
        ncpus,
        client_cpus: a.client_cpus.clone(),
        client_rt_prio: a.client_rt_prio,
        lc_fifo_prio: a.lc_fifo_prio,
        tracer_rt_prio: a.tracer_rt_prio,
        transport: a.transport.clone(),
        burn: a.burn.clone(),
        repeat_arrivals_secs: if !a.independent_arrivals && (lc_alone - be_secs).abs() < 1e-9 && tail == 0.0 { lc_alone } else { 0.0 },
        iters_per_us,
        drain_timeout_secs: drain,
        window_secs: a.window_secs,
        progress_secs: a.progress_secs,
        base_seed: a.seed,
        exe,
        schedbe_bin,
        schedbe_args: a.sched.schedbe_args.clone(),
        tracer_cmd,
        peers_dir: a.sched.peers_dir.clone(),
        pods: pods.as_ref().map(|p| p.run.clone()),
        bpf_stats: a.bpf_stats,
    };
    let mut params = params;
    if params.trace != TraceMode::Off {
        eprintln!("bench: timing the tracer's start-up...");
        match crate::tracer::probe_tracer(&params.tracer(), &out.join("raw")) {
            Ok(s) => {
                eprintln!("bench: tracer window opens {s:.2} s after launch; tracers are launched that much early");
                meta.notes.push(format!("tracer start-up (probe): {s:.2} s; tracers launch early by their measured start-up"));
            }
            Err(e) => {
                eprintln!("bench: warning: the tracer does not work here, tracing disabled: {e:#}");
                meta.notes.push(format!("tracing disabled: {e:#}"));
                params.trace = TraceMode::Off;
            }
        }
    }
    let describe = |c: &Config| match (&params.pods, c.plan(a.lc_fifo_prio).scheduler) {
        (Some(_), None) => "EEVDF (kernel default) with kubelet's cgroup values; the kernel enforces cpu.max".to_string(),
        (Some(_), Some(_)) => format!("{}; kubelet's cgroup values, cpu.max enforced by the scheduler", c.name),
        (None, _) => c.describe(),
    };
    let cfg_names: Vec<(String, String)> = configs.iter().map(|c| (c.name.clone(), describe(c))).collect();
    let total = reps * configs.len();
    let per_run = lc_alone + be_secs + tail + 3.0;
    eprintln!(
        "bench: {} — {} configuration(s) x {} repetition(s) = {} runs of ~{:.0} s (~{:.1} min); output in {}",
        kind.name(),
        configs.len(),
        reps,
        total,
        per_run,
        total as f64 * per_run / 60.0,
        out.display()
    );
    let mut runs: Vec<RunOutcome> = Vec::new();
    let mut idx = 0;
    for rep in 0..reps {
        for cfg in &configs {
            idx += 1;
            eprintln!("bench: run {idx}/{total}: {} repetition {}", cfg.name, rep + 1);
            let mut o = run_one(&params, cfg, rep, idx, cgroups.as_ref(), &out);
            // A run the host disturbed (the spin loop slower than calibrated
            // before or right after it) is done again, at most twice.
            for attempt in 1..=2 {
                let after = crate::runner::speed_now(&params);
                let before = o.speed_vs_calibration.unwrap_or(1.0);
                if !o.ok || (before >= crate::runner::QUIET_SPEED && after >= crate::runner::QUIET_SPEED) {
                    break;
                }
                let why = format!(
                    "{} repetition {}: discarded attempt {attempt}: spin loop at {:.0}% / {:.0}% of its calibrated speed before / after the run (host busy)",
                    cfg.name,
                    rep + 1,
                    100.0 * before,
                    100.0 * after
                );
                eprintln!("bench: {why}; running it again");
                meta.notes.push(why);
                o = run_one(&params, cfg, rep, idx, cgroups.as_ref(), &out);
            }
            if let Some(e) = &o.error {
                eprintln!("bench: run {idx}/{total} FAILED: {e}");
            }
            runs.push(o);
            // keep what we have if interrupted later
            write_outputs(&out, &meta, &params, &calibration, &cfg_names, &runs, &[])?;
        }
    }
    drop(pods);
    if let Some(c) = &cgroups {
        c.cleanup();
    }
    write_requests(&out.join("requests.csv"), &runs)?;
    let mut figures = Vec::new();
    if !a.no_plot {
        match crate::scripts::plot(&out) {
            Ok(f) => figures = f,
            Err(e) => {
                eprintln!("bench: warning: no figures: {e:#}");
                meta.notes.push(format!("figures not drawn: {e:#}"));
            }
        }
    }
    let aggs = write_outputs(&out, &meta, &params, &calibration, &cfg_names, &runs, &figures)?;
    print_table(&aggs);
    eprintln!("bench: summary {}/summary.md; data bench.json, per_second.csv, requests.csv, raw/", out.display());
    for f in &figures {
        eprintln!("bench: figure {}/{f}", out.display());
    }
    let failed = runs.iter().filter(|r| !r.ok).count();
    if failed == runs.len() {
        bail!("all {failed} runs failed (see {}/summary.md)", out.display());
    }
    if failed > 0 {
        eprintln!("bench: warning: {failed} of {} runs failed (see summary.md)", runs.len());
    }
    Ok(())
}

fn print_table(aggs: &[ConfigAggregate]) {
    use crate::report::fmt_spread;
    println!("{:<14} {:>5} {:>22} {:>22} {:>22} {:>10} {:>12}", "config", "ok", "LC mean ratio", "LC p99 ratio", "mean after (ms)", "BE it/s", "inversion %");
    for a in aggs {
        println!(
            "{:<14} {:>2}/{:<2} {:>22} {:>22} {:>22} {:>10} {:>12}",
            a.config,
            a.runs_ok,
            a.runs,
            fmt_spread(&a.mean_ratio, 2),
            fmt_spread(&a.p99_ratio, 2),
            fmt_spread(&a.mean_after_ms, 2),
            fmt_spread(&a.be_iters_per_s, 1),
            fmt_spread(&a.inversion_pct, 4)
        );
    }
    for a in aggs.iter().filter(|a| a.bpf_cpu_pct_lc_phase.is_some()) {
        println!(
            "{:<14} BPF {}% of CPU, {} ns per call (LC-alone window)",
            a.config,
            fmt_spread(&a.bpf_cpu_pct_lc_phase, 2),
            fmt_spread(&a.bpf_ns_per_call_lc_phase, 0)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_per_experiment() {
        assert_eq!(defaults(ExpKind::SrvBg, false).configs, "weights,sched-idle,schedbe");
        assert_eq!(defaults(ExpKind::SrvBg, true).reps, 1);
        assert!(!defaults(ExpKind::LcAlone, false).with_be);
        assert!(defaults(ExpKind::Overload, false).util >= 1.0);
        for k in [ExpKind::SrvBg, ExpKind::WeightSweep, ExpKind::Overload, ExpKind::LcAlone, ExpKind::K8sLcBurst, ExpKind::K8sLcGuar] {
            assert!(parse_list(defaults(k, false).configs).is_ok());
        }
    }

    #[test]
    fn stamp_format() {
        let s = utc_stamp();
        assert_eq!(s.len(), 16, "{s}");
        assert!(s.ends_with('Z') && s.as_bytes()[8] == b'-');
    }
}
