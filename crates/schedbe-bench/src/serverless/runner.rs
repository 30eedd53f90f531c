//! One run of `schedbe-bench serverless`: a configuration, a load, a
//! repetition. Builds the sandboxes as kubelet pods (the `pods` emulation
//! of kubelet's writes: each function a Burstable pod with one container),
//! starts their servers (serverless::pool), loads the scheduler, starts the
//! agent and the tracer, replays the trace, and takes everything down again,
//! whatever happened.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::gen;
use super::metrics::{self, AgentFig, FloorFig, GroupFig, Sample};
use super::model::{Group, Workload};
use super::pool::{self, Sandbox};
use super::trace::Request;
use crate::kubepods::{self, ContainerSpec, Driver, LevelKind, MilliCpu, PodSpec, Spec, WeightConversion};
use crate::bpf_stats as bpf;
use crate::proc::{child_setup, log_file, Proc};
use crate::scx::{self, SchedCmd, Scheduler};
use crate::sys::{monotonic_ns, sleep_until_ns};
use crate::tracer::{finish_tracer, start_tracer, TracerSpec};

/// A configuration of the serverless bench.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cfg {
    /// No sched_ext: EEVDF with kubelet's cgroup weights.
    Eevdf,
    /// schedbe's default policy (SCHED_BE).
    Schedbe,
    /// `schedbe run --policy llf`.
    Llf,
}

impl Cfg {
    pub fn name(self) -> &'static str {
        match self {
            Cfg::Eevdf => "eevdf",
            Cfg::Schedbe => "schedbe",
            Cfg::Llf => "llf",
        }
    }

    pub fn parse_list(s: &str) -> Result<Vec<Cfg>> {
        let mut v = Vec::new();
        for c in s.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            let cfg = match c {
                "eevdf" => Cfg::Eevdf,
                "schedbe" => Cfg::Schedbe,
                "llf" => Cfg::Llf,
                _ => bail!("unknown configuration {c:?}: expected eevdf, schedbe or llf"),
            };
            if !v.contains(&cfg) {
                v.push(cfg);
            }
        }
        if v.is_empty() {
            bail!("--configs is empty");
        }
        Ok(v)
    }

    fn sched_args(self) -> Option<Vec<String>> {
        let a: &[&str] = match self {
            Cfg::Eevdf => return None,
            Cfg::Schedbe => &["--stats", "1", "--json"],
            Cfg::Llf => &["--policy", "llf", "--stats", "1", "--json"],
        };
        Some(a.iter().map(|s| s.to_string()).collect())
    }
}

/// What every run shares.
pub struct Env {
    pub exe: PathBuf,
    pub schedbe: Option<PathBuf>,
    pub nr_cpus: usize,
    pub threads: usize,
    pub request_milli: u64,
    pub base_port: u16,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub drain_s: f64,
    pub agent: bool,
    pub trace: bool,
    /// SCHED_FIFO priority of the load generator and the tracer.
    pub rt_prio: u8,
}

/// One run's figures (a row of serverless.json). Fields added later are
/// `default` so that older outputs still read.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Row {
    pub config: Cfg,
    /// Offered load, fraction of the CPUs.
    pub util: f64,
    pub rep: usize,
    pub functions: usize,
    pub groups: BTreeMap<String, GroupFig>,
    /// CPU the sandboxes' cgroups used in the window, CPUs (cgroup cpu.stat).
    pub cpu_high: f64,
    pub cpu_low: f64,
    pub ctx_per_s: Option<f64>,
    pub send_lag_p99_us: f64,
    pub send_failed: u64,
    pub agent: Option<AgentFig>,
    /// Per traced cgroup (the QoS cgroup holding every sandbox, and the top
    /// band's pods).
    pub floors: BTreeMap<String, FloorFig>,
    /// The scheduler's BPF programs over the window (sched_ext configurations).
    pub bpf_calls: Option<u64>,
    pub bpf_ns_per_call: Option<f64>,
    /// BPF time per context switch (/proc/stat ctxt): the cost of a scheduling event.
    #[serde(default)]
    pub bpf_ns_per_switch: Option<f64>,
    pub bpf_cpu_pct: Option<f64>,
    /// CPU of the scheduler's and the agent's processes over the window, % of one CPU.
    #[serde(default)]
    pub sched_proc_cpu_pct: Option<f64>,
    #[serde(default)]
    pub agent_proc_cpu_pct: Option<f64>,
    pub warnings: Vec<String>,
}

/// The function sandboxes as a pod spec: `fn-NNN`, one container `fn`
/// requesting `request_milli`, no limit (Burstable, like a function pod
/// with a request and no limit).
pub fn pod_spec(w: &Workload, request_milli: u64) -> Spec {
    Spec {
        driver: Some(Driver::Systemd),
        weight_conversion: Some(WeightConversion::Linear),
        allocatable_cpu: None,
        pods: w
            .functions
            .iter()
            .map(|f| PodSpec {
                name: pod_name(f.id),
                uid: None,
                containers: vec![ContainerSpec { name: "fn".into(), cpu_request: Some(MilliCpu(request_milli)), cpu_limit: None }],
            })
            .collect(),
    }
}

pub fn pod_name(id: usize) -> String {
    format!("fn-{id:04}")
}

fn usage_usec(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("cpu.stat"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("usage_usec ")).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0)
}

/// Everything a run started, stopped in reverse order on drop.
struct Running {
    root: PathBuf,
    plan: kubepods::Plan,
    pool: Option<Proc>,
    sched: Option<scx::Loaded>,
    agent: Option<Proc>,
    warnings: Vec<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut a) = self.agent.take() {
            a.stop(libc::SIGINT, Duration::from_secs(5));
        }
        if let Some(s) = self.sched.take() {
            self.warnings.extend(s.stop());
        }
        if let Some(mut p) = self.pool.take() {
            p.stop(libc::SIGTERM, Duration::from_secs(10));
        }
        if let Err(e) = kubepods::delete(&self.root, &self.plan) {
            eprintln!("bench: warning: removing the sandbox pods: {e:#}");
        }
    }
}

/// Run `reqs` (workload `w`) under `cfg`; outputs in `dir`.
pub fn one_run(env: &Env, w: &Workload, reqs: &[Request], cfg: Cfg, util: f64, rep: usize, dir: &Path) -> Result<(Row, Vec<Sample>)> {
    std::fs::create_dir_all(dir).with_context(|| format!("mkdir {}", dir.display()))?;
    let root = PathBuf::from(kubepods::DEFAULT_ROOT);
    let plan = kubepods::plan(&pod_spec(w, env.request_milli), Driver::Systemd, WeightConversion::Linear, env.nr_cpus as u64 * 1000)?;
    // A tree an interrupted run left behind would be reused with its processes.
    let _ = kubepods::delete(&root, &plan);
    let mut run = Running { root: root.clone(), plan: plan.clone(), pool: None, sched: None, agent: None, warnings: Vec::new() };
    let applied = kubepods::apply(&root, &plan).context("build the sandbox pods")?;
    let qos = plan.levels.iter().find(|l| l.kind == LevelKind::Qos).context("the plan has no QoS cgroup")?.rel.clone();
    // Function i's pod level and container cgroup, by pod name.
    let mut pods: Vec<&kubepods::Level> = Vec::with_capacity(w.functions.len());
    let mut sandboxes: Vec<Sandbox> = Vec::with_capacity(w.functions.len());
    for f in &w.functions {
        let name = pod_name(f.id);
        let l = plan.levels.iter().find(|l| l.kind == LevelKind::Pod && l.pod.as_deref() == Some(name.as_str()));
        let c = applied.containers.iter().find(|c| c.pod == name);
        let (Some(l), Some(c)) = (l, c) else { bail!("the pod plan has no pod {name}") };
        pods.push(l);
        sandboxes.push(Sandbox { port: env.base_port + f.id as u16, cgroup: c.path.clone() });
    }
    let ports: Vec<u16> = sandboxes.iter().map(|s| s.port).collect();
    let spec = dir.join("sandboxes.txt");
    std::fs::write(&spec, pool::write_spec(&sandboxes)).with_context(|| format!("write {}", spec.display()))?;

    let mut c = crate::proc::helper(&env.exe, "fn-pool");
    c.arg("--spec").arg(&spec).args(["--threads", &env.threads.to_string()]);
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(log_file(dir, "fn-pool.err")?);
    child_setup(&mut c, libc::SIGKILL, None);
    let mut pr = Proc::spawn("fn-pool", &mut c)?;
    let out = pr.take_stdout().context("the pool's stdout")?;
    run.pool = Some(pr);
    pool::wait_ready(out, Duration::from_secs(180)).with_context(|| format!("see {}", dir.join("fn-pool.err").display()))?;

    if let Some(args) = cfg.sched_args() {
        let cmd = SchedCmd::new(Scheduler::Schedbe, env.schedbe.as_deref(), &args, None)?;
        run.sched = Some(scx::load(&cmd, dir, scx::LOAD_TIMEOUT)?);
    }
    // The tracer loads before the trace starts; its window is the measurement's.
    let t0 = monotonic_ns() + 2_000_000_000 + if env.trace { (crate::tracer::tracer_startup_estimate_s() * 1e9) as u64 } else { 0 };
    let from = t0 + (env.warmup_s * 1e9) as u64;
    let to = t0 + (env.duration_s * 1e9) as u64;
    let top: Vec<usize> = w.functions.iter().filter(|f| w.group(f) == Group::GroupHigh).map(|f| f.id).take(60).collect();
    let mut tracer_cmd: Vec<String> = Vec::new();
    if env.trace {
        let bin = env.schedbe.as_deref().context("the tracer needs the schedbe binary (--schedbe-bin)")?;
        tracer_cmd = vec![bin.display().to_string(), "trace".into(), "--period-ms".into(), "1000".into(), "--cgroup".into(), qos.display().to_string()];
        for &i in &top {
            tracer_cmd.extend(["--cgroup".to_string(), pods[i].rel.display().to_string()]);
        }
    }
    // One below the generator: a FIFO tracer of the same priority would hold
    // a send back for as long as it reads its buffers.
    let tspec = TracerSpec { cmd: &tracer_cmd, rt_prio: env.rt_prio.saturating_sub(1), timeline: None };
    let tracer = if env.trace { start_tracer(&tspec, dir, "run", from, to, &mut run.warnings) } else { None };

    // The agent starts after the tracer's launch, so that its first intervals
    // see the node as the trace will, not the scheduler's loading.
    let mut agent_started = 0;
    if env.agent {
        let bin = env.schedbe.as_deref().context("the agent needs the schedbe binary (--schedbe-bin)")?;
        let mut a = Command::new(bin);
        a.args(["agent", "--interval-s", "1", "--format", "json"]);
        a.stdin(Stdio::null()).stdout(log_file(dir, "agent.jsonl")?).stderr(log_file(dir, "agent.err")?);
        child_setup(&mut a, libc::SIGKILL, None);
        agent_started = monotonic_ns();
        run.agent = Some(Proc::spawn("schedbe agent", &mut a)?);
    }

    let stats_on = match (&run.sched, bpf::available()) {
        (Some(_), true) => bpf::enable_stats().map_err(|e| run.warnings.push(format!("BPF stats: {e:#}"))).ok(),
        _ => None,
    };
    let drain = Duration::from_secs_f64(env.drain_s);
    let rt = (env.rt_prio > 0).then_some(env.rt_prio);
    let (reqs_owned, ports_owned) = (reqs.to_vec(), ports.clone());
    let generator = std::thread::spawn(move || gen::replay(&reqs_owned, &ports_owned, t0, drain, rt));

    let pod_dirs: Vec<PathBuf> = pods.iter().map(|l| root.join(&l.rel)).collect();
    sleep_until_ns(from);
    let snap = |run: &Running| run.sched.as_ref().and_then(|s| bpf::snapshot(s.pid()).ok());
    let procs = |run: &Running| {
        (run.sched.as_ref().and_then(|s| metrics::proc_cpu_s(s.pid())), run.agent.as_ref().and_then(|a| metrics::proc_cpu_s(a.pid())))
    };
    let (u0, c0, b0, p0, m0) = (pod_dirs.iter().map(|d| usage_usec(d)).collect::<Vec<_>>(), metrics::ctxt(), snap(&run), procs(&run), monotonic_ns());
    sleep_until_ns(to);
    let (u1, c1, b1, p1, m1) = (pod_dirs.iter().map(|d| usage_usec(d)).collect::<Vec<_>>(), metrics::ctxt(), snap(&run), procs(&run), monotonic_ns());
    let win_s = (m1 - m0) as f64 / 1e9;
    let pct = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| 100.0 * (b - a) / win_s);
    let outcome = generator.join().map_err(|_| anyhow::anyhow!("the load generator panicked"))??;
    drop(stats_on);

    let bpf_cost = match (b0, b1) {
        (Some(b0), Some(b1)) => Some(bpf::cost(&b0, &b1, &bpf::names(), win_s, env.nr_cpus)),
        _ => None,
    };
    let mut floors = BTreeMap::new();
    if let Some(_figs) = finish_tracer(tracer, "run", dir, &mut run.warnings) {
        let raw = std::fs::read_to_string(dir.join("trace-run.json")).unwrap_or_default();
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&raw) {
            floors = metrics::floors(&v, 500.0);
        }
    }
    let agent = if env.agent {
        if let Some(mut a) = run.agent.take() {
            a.stop(libc::SIGINT, Duration::from_secs(5));
        }
        let lines = std::fs::read_to_string(dir.join("agent.jsonl")).unwrap_or_default();
        // as many "top by load" functions as the top band has
        let n_top = w.functions.iter().filter(|f| w.group(f) == Group::GroupHigh).count();
        let mut by_load: Vec<&super::model::Function> = w.functions.iter().collect();
        by_load.sort_by(|a, b| b.load_cpus().total_cmp(&a.load_cpus()).then(a.id.cmp(&b.id)));
        let top_load: std::collections::HashSet<usize> = by_load.iter().take(n_top).map(|f| f.id).collect();
        let map: HashMap<String, metrics::FnClass> = pods
            .iter()
            .zip(&w.functions)
            .map(|(l, f)| {
                let c = metrics::FnClass { name: f.name.clone(), top_band: w.group(f) == Group::GroupHigh, top_load: top_load.contains(&f.id) };
                (l.rel.display().to_string(), c)
            })
            .collect();
        Some(metrics::agent(&lines, agent_started, t0, &map))
    } else {
        None
    };

    let (groups, samples) = metrics::attainment(w, reqs, &outcome, t0, from - t0, to - t0);
    let cpu = |g: Group| -> f64 {
        w.functions.iter().filter(|f| w.group(f) == g).map(|f| u1[f.id].saturating_sub(u0[f.id]) as f64 / 1e6 / win_s).sum()
    };
    let mut lags: Vec<u64> = outcome.send_lag_ns.iter().copied().filter(|&l| l != u64::MAX).collect();
    lags.sort_unstable();
    let p99 = lags.get(((lags.len() as f64 * 0.99) as usize).min(lags.len().saturating_sub(1))).copied().unwrap_or(0);
    let mut row = Row {
        config: cfg,
        util,
        rep,
        functions: w.functions.len(),
        groups,
        cpu_high: cpu(Group::GroupHigh),
        cpu_low: cpu(Group::GroupLow),
        ctx_per_s: c0.zip(c1).map(|(a, b)| b.saturating_sub(a) as f64 / win_s),
        send_lag_p99_us: p99 as f64 / 1e3,
        send_failed: outcome.send_lag_ns.iter().filter(|&&l| l == u64::MAX).count() as u64,
        agent,
        floors,
        bpf_calls: bpf_cost.as_ref().map(|c| c.calls),
        bpf_ns_per_call: bpf_cost.as_ref().and_then(|c| (c.calls > 0).then(|| c.total_ns as f64 / c.calls as f64)),
        bpf_ns_per_switch: bpf_cost.as_ref().zip(c0.zip(c1)).and_then(|(c, (a, b))| (b > a).then(|| c.total_ns as f64 / (b - a) as f64)),
        bpf_cpu_pct: bpf_cost.as_ref().map(|c| c.cpu_pct),
        sched_proc_cpu_pct: pct(p0.0, p1.0),
        agent_proc_cpu_pct: pct(p0.1, p1.1),
        warnings: Vec::new(),
    };
    if let Some(c) = &bpf_cost {
        std::fs::write(dir.join("bpf.json"), serde_json::to_string_pretty(c)?)?;
    }
    if let Some(s) = run.sched.take() {
        run.warnings.extend(s.stop());
    }
    row.warnings = std::mem::take(&mut run.warnings);
    drop(run);
    Ok((row, samples))
}
