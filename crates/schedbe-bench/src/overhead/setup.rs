//! `schedbe-bench overhead`: its options, checking them and the machine before any
//! run (configurations, workloads, peers, tools, cgroups), the shared
//! state of a run (output directory, parameters, calibration, BPF stats),
//! and writing the outputs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::bpf_stats as bpf;
use super::report::{self, Row, WorkloadRun};
use super::workloads::{self, Workload};
use crate::cgroup::Cgroups;
use crate::configs::{parse_list, Config};
use crate::experiment::{preflight_schedulers, SchedArgs};
use crate::load::ServiceDist;
use crate::report::{fmt_spread, Meta};
use crate::runner::{RunParams, TraceMode};
use crate::scx::SchedCmd;
use crate::spin::{calibrate, Calibration};
use crate::sys;

/// `schedbe-bench overhead`
#[derive(clap::Args, Debug, Clone)]
pub struct OverheadArgs {
    /// Comma-separated configurations (eevdf, the baseline of the ratios; schedbe; scx_bpfland, scx_lavd; any other of `schedbe-bench srv-bg`)
    #[arg(long, default_value = "eevdf,schedbe,scx_bpfland,scx_lavd")]
    pub configs: String,
    /// Comma-separated workloads: messaging, pipe, cyclictest, lc (one per --lc-utils), build
    #[arg(long, default_value = "messaging,pipe,cyclictest,lc,build")]
    pub workloads: String,
    /// Repetitions (configurations interleaved within each) [default 3, --quick 1]
    #[arg(long)]
    pub reps: Option<usize>,
    /// Short everything (a smoke test): 1 repetition, small workloads
    #[arg(long)]
    pub quick: bool,
    /// Output directory [default results/tmp/bench/overhead-<UTC time>]
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Do not draw the figure (scripts/plot_overhead.py); `schedbe-bench plot DIR` draws it later
    #[arg(long)]
    pub no_plot: bool,
    /// No BPF count pass (the pass after the timed repetitions that turns on
    /// kernel.bpf_stats_enabled for each scheduler's BPF cost per callback)
    #[arg(long)]
    pub no_bpf_stats: bool,
    /// perf bench sched messaging: groups (-g) [default 2, --quick 1]
    #[arg(long)]
    pub messaging_groups: Option<u32>,
    /// perf bench sched messaging: loops (-l) [default 50, --quick 20]
    #[arg(long)]
    pub messaging_loops: Option<u32>,
    /// perf bench sched pipe: loops (-l) [default 10000, --quick 2000]
    #[arg(long)]
    pub pipe_loops: Option<u32>,
    /// Run `schedbe trace` next to cyclictest (cyclictest in its own cgroup)
    /// and add, from kernel tracepoints, how late its sleep timers fired
    /// (timer_p99_us) and its wakeup latency, woken until switched in
    /// (wake_p50_us, wake_p99_us): which part of cyclictest's latency is the
    /// timer interrupt's and which the scheduler's. The tracer's own cost
    /// is in every configuration's figures then.
    #[arg(long)]
    pub cyclictest_trace: bool,
    /// cyclictest duration, seconds [default 10, --quick 3]
    #[arg(long)]
    pub cyclictest_secs: Option<u32>,
    /// cyclictest timer interval, µs
    #[arg(long, default_value_t = 1000)]
    pub cyclictest_interval_us: u32,
    /// cyclictest histogram range, µs (latencies above count as overflows)
    #[arg(long, default_value_t = 20_000)]
    pub cyclictest_hist_us: u32,
    /// Background load during cyclictest: stress-ng --cpu <CPUs> --cpu-load PCT (0: none)
    #[arg(long, default_value_t = 50)]
    pub cyclictest_load_pct: u32,
    /// Offered loads of the LC server alone, fractions of the CPUs (one workload lc-NN each)
    #[arg(long, default_value = "0.6,0.85")]
    pub lc_utils: String,
    /// --lc-utils are fractions of the LC server's capacity on this machine,
    /// not of the CPUs: before the repetitions the server is offered 1.25 of
    /// the CPUs under EEVDF, and the service it finishes per second is its
    /// capacity. Under emulation a request costs more than its service
    /// demand (wakeups, the client), so 0.85 of the CPUs overloads the server
    /// under every scheduler and its latency only measures the backlog.
    #[arg(long)]
    pub lc_capacity: bool,
    /// Seconds of each of an LC run's two phases (its mean and p99 cover both after warm-up) [default 10, --quick 3]
    #[arg(long)]
    pub lc_secs: Option<f64>,
    /// LC service demand: fixed:US or exp:US
    #[arg(long, default_value = "fixed:2000")]
    pub lc_service: String,
    /// Source files of the generated C project [default 100, --quick 12]
    #[arg(long)]
    pub build_files: Option<usize>,
    /// C compiler for the build [default gcc, else clang-19, clang, cc]
    #[arg(long)]
    pub build_cc: Option<String>,
    /// perf binary
    #[arg(long, default_value = "perf")]
    pub perf: String,
    /// cyclictest binary
    #[arg(long, default_value = "cyclictest")]
    pub cyclictest: String,
    /// stress-ng binary (cyclictest's background load)
    #[arg(long, default_value = "stress-ng")]
    pub stress_ng: String,
    /// A workload run taking longer than this fails (seconds)
    #[arg(long, default_value_t = 900.0)]
    pub timeout_secs: f64,
    /// SCHED_FIFO priority of this orchestrating process (0: none)
    #[arg(long, default_value_t = 70)]
    pub rt_prio: u8,
    /// SCHED_FIFO priority of the LC client's threads (0: none)
    #[arg(long, default_value_t = 60)]
    pub client_rt_prio: u8,
    #[command(flatten)]
    pub sched: SchedArgs,
}

/// Everything a run of the benchmark shares.
pub struct Setup {
    pub configs: Vec<Config>,
    pub workloads: Vec<Workload>,
    pub reps: usize,
    pub out: PathBuf,
    pub meta: Meta,
    pub wl: workloads::Params,
    /// The LC runs' parameters (util set per workload).
    pub lc: RunParams,
    pub cgroups: Option<Cgroups>,
    pub calibration: Option<Calibration>,
    /// Run the BPF count pass after the timed repetitions.
    pub bpf_count: bool,
    pub peer_versions: BTreeMap<String, String>,
    /// What --lc-capacity's probe measured (None without it: an --lc-utils
    /// load is then a fraction of the CPUs).
    pub lc_capacity: Option<LcCapacity>,
    pub(super) params_md: Vec<String>,
}

fn check<T: PartialOrd + std::fmt::Display>(name: &str, v: T, lo: T, hi: T) -> Result<T> {
    if !(v >= lo && v <= hi) {
        bail!("--{name} must be in [{lo}, {hi}], got {v}");
    }
    Ok(v)
}

fn runs(prog: &str, arg: &str) -> bool {
    Command::new(prog).arg(arg).output().is_ok()
}

/// "0.6,0.85" -> loads, each in (0, 4], no duplicates (by their names).
pub fn parse_utils(s: &str) -> Result<Vec<f64>> {
    let mut out: Vec<f64> = Vec::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let u: f64 = p.parse().with_context(|| format!("--lc-utils: {p:?} is not a number"))?;
        if !(u.is_finite() && u > 0.0 && u <= 4.0) {
            bail!("--lc-utils: {u} is not in (0, 4]");
        }
        if out.iter().any(|o| Workload::Lc(*o).name() == Workload::Lc(u).name()) {
            bail!("--lc-utils: {p} listed twice");
        }
        out.push(u);
    }
    Ok(out)
}

/// Check the options and the machine, then set up (output directory,
/// orchestrator priority, calibration, BPF stats, the C project).
pub fn prepare(a: &OverheadArgs, command_line: &str) -> Result<Setup> {
    let q = a.quick;
    let configs = parse_list(&a.configs)?;
    let utils = parse_utils(&a.lc_utils)?;
    let workloads = workloads::parse_list(&a.workloads, &utils)?;
    if workloads.is_empty() {
        bail!("--workloads lc with an empty --lc-utils leaves nothing to run");
    }
    if a.lc_capacity && !workloads.iter().any(|w| matches!(w, Workload::Lc(_))) {
        bail!("--lc-capacity scales the LC workloads' loads: add lc to --workloads");
    }
    if a.cyclictest_trace && !workloads.contains(&Workload::Cyclictest) {
        bail!("--cyclictest-trace needs the cyclictest workload (--workloads ...,cyclictest)");
    }
    let reps = check("reps", a.reps.unwrap_or(if q { 1 } else { 3 }), 1, 100)?;
    let lc_secs = check("lc-secs", a.lc_secs.unwrap_or(if q { 3.0 } else { 10.0 }), 2.0, 3600.0)?;
    let warmup = if q { 1.0 } else { 2.0_f64.min(lc_secs / 2.0) };
    let service: ServiceDist = a.lc_service.parse()?;
    check("timeout-secs", a.timeout_secs, 10.0, 86_400.0)?;
    let ncpus = sys::allowed_cpus()?.len();
    let build_files = check("build-files", a.build_files.unwrap_or(if q { 12 } else { 100 }), 1, 10_000)?;
    let wl = workloads::Params {
        perf: a.perf.clone(),
        messaging_groups: check("messaging-groups", a.messaging_groups.unwrap_or(if q { 1 } else { 2 }), 1, 64)?,
        messaging_loops: check("messaging-loops", a.messaging_loops.unwrap_or(if q { 20 } else { 50 }), 1, 1_000_000)?,
        pipe_loops: check("pipe-loops", a.pipe_loops.unwrap_or(if q { 2000 } else { 10_000 }), 1, 100_000_000)?,
        cyclictest: a.cyclictest.clone(),
        cyclictest_secs: check("cyclictest-secs", a.cyclictest_secs.unwrap_or(if q { 3 } else { 10 }), 2, 3600)?,
        cyclictest_interval_us: check("cyclictest-interval-us", a.cyclictest_interval_us, 100, 1_000_000)?,
        cyclictest_hist_us: check("cyclictest-hist-us", a.cyclictest_hist_us, 10, 1_000_000)?,
        cyclictest_load_pct: check("cyclictest-load-pct", a.cyclictest_load_pct, 0, 100)?,
        stress_ng: a.stress_ng.clone(),
        cyclictest_trace: None,
        build_files,
        build_cc: String::new(),
        build_dir: std::env::temp_dir().join(format!("schedbe-overhead-build-{}", std::process::id())),
        ncpus,
        timeout_secs: a.timeout_secs,
    };
    // The schedulers first (a missing peer is named even without sched_ext).
    let schedbe_bin = preflight_schedulers(&configs, 10, &a.sched)?;
    let mut wl = wl;
    let has = |w: Workload| workloads.contains(&w);
    if (has(Workload::Messaging) || has(Workload::Pipe)) && !runs(&wl.perf, "--version") {
        bail!("workloads messaging and pipe need perf ({}: not found; Debian package linux-perf, scripts/setup.sh)", wl.perf);
    }
    if has(Workload::Cyclictest) {
        if !runs(&wl.cyclictest, "--help") {
            bail!("workload cyclictest needs cyclictest ({}: not found; Debian package rt-tests)", wl.cyclictest);
        }
        if wl.cyclictest_load_pct > 0 && !runs(&wl.stress_ng, "--version") {
            bail!("workload cyclictest's background load needs stress-ng ({}: not found), or --cyclictest-load-pct 0", wl.stress_ng);
        }
    }
    if has(Workload::Build) {
        wl.build_cc = super::build::find_cc(a.build_cc.as_deref())?;
        if !runs("make", "--version") {
            bail!("workload build needs make");
        }
    }
    let has_lc = workloads.iter().any(|w| matches!(w, Workload::Lc(_)));
    let cgroups = if has_lc || a.cyclictest_trace {
        match Cgroups::setup() {
            Ok(c) => Some(c),
            Err(e) if a.cyclictest_trace => return Err(e.context("--cyclictest-trace runs cyclictest in a cgroup of its own")),
            Err(e) => {
                let needs: Vec<&str> = configs.iter().filter(|c| c.plan(10).needs_cpu_controller).map(|c| c.name.as_str()).collect();
                if !needs.is_empty() {
                    return Err(e.context(format!("the LC workloads of configurations {} need cgroup v2", needs.join(", "))));
                }
                None
            }
        }
    } else {
        None
    };
    if let (true, Some(c)) = (a.cyclictest_trace, &cgroups) {
        let schedbe = schedbe_bin.as_deref().with_context(|| format!("--cyclictest-trace runs `schedbe trace`: {}", crate::scx::NO_SCHEDBE))?;
        wl.cyclictest_trace = Some(workloads::CycTrace {
            tracer: vec![schedbe.display().to_string(), "trace".into(), "--cgroup".into(), format!("{}/{}", crate::cgroup::BASE, workloads::CYC_CG)],
            cgroup: c.path(workloads::CYC_CG),
        });
    }
    let out = a.out.clone().unwrap_or_else(super::default_out);
    std::fs::create_dir_all(&out).with_context(|| format!("create output directory {}", out.display()))?;

    let mut meta = crate::experiment::start_meta("overhead", command_line, a.rt_prio);
    let mut peer_versions = BTreeMap::new();
    for c in &configs {
        if let Some(s @ crate::scx::Scheduler::Peer(n)) = c.plan(10).scheduler {
            let cmd = SchedCmd::new(s, None, &[], a.sched.peers_dir.as_deref())?;
            let v = crate::scx::version_of(&cmd.bin).unwrap_or_else(|e| format!("unknown ({e:#})"));
            peer_versions.insert(n.to_string(), format!("{v} ({})", cmd.bin.display()));
        }
    }
    let calibration = if has_lc {
        eprintln!("bench: calibrating the spin loop...");
        let c = calibrate(11, 50.0);
        meta.calibration = c.describe();
        Some(c)
    } else {
        None
    };
    let any_sched = configs.iter().any(Config::loads_scheduler);
    let bpf_count = if a.no_bpf_stats || !any_sched {
        false
    } else if !bpf::available() {
        meta.notes.push("no kernel.bpf_stats_enabled here: BPF cost not measured".into());
        false
    } else {
        // may we turn it on? (the guard puts the old value back at once)
        match bpf::enable_stats() {
            Ok(g) => {
                meta.notes.push("BPF cost from a count pass after the timed repetitions (kernel.bpf_stats_enabled=1 only then, restored afterwards); the timed runs go without the counting".into());
                if g.was_on() {
                    meta.notes.push("kernel.bpf_stats_enabled was already 1 (set by someone else): the timed runs of the sched_ext configurations include the counting".into());
                }
                true
            }
            Err(e) => {
                meta.notes.push(format!("BPF cost not measured: {e:#}"));
                false
            }
        }
    };
    if has(Workload::Build) {
        super::build::generate(&wl.build_dir, build_files)?;
    }
    let exe = std::env::current_exe().context("cannot find this program (current_exe)")?;
    let lc = RunParams {
        experiment: "overhead".into(),
        util: 0.0,
        service,
        conns: 8 * ncpus,
        lc_alone_secs: lc_secs,
        be_secs: lc_secs,
        tail_secs: 0.0,
        warmup_secs: warmup,
        settle_secs: warmup,
        with_be: false,
        be_threads: ncpus,
        be_src: "960x540".into(),
        be_dst: "400x225".into(),
        be_simd: "auto".into(),
        trace: TraceMode::Off,
        cpus: None,
        ncpus,
        client_cpus: None,
        client_rt_prio: a.client_rt_prio,
        lc_fifo_prio: 10,
        tracer_rt_prio: 0,
        transport: "unix".into(),
        burn: "cpu-time".into(),
        repeat_arrivals_secs: lc_secs,
        iters_per_us: calibration.as_ref().map(|c| c.iters_per_us).unwrap_or(1.0),
        drain_timeout_secs: 30.0,
        window_secs: 1.0,
        progress_secs: 0.0,
        base_seed: 1,
        exe,
        schedbe_bin,
        schedbe_args: a.sched.schedbe_args.clone(),
        tracer_cmd: vec![],
        peers_dir: a.sched.peers_dir.clone(),
        pods: None,
        bpf_stats: false,
    };
    let params_md = vec![
        format!("repetitions: {reps}; workloads: {}", workloads.iter().map(|w| w.name()).collect::<Vec<_>>().join(", ")),
        format!("messaging: `{} bench sched messaging -g {} -l {}` (total time)", wl.perf, wl.messaging_groups, wl.messaging_loops),
        format!("pipe: `{} bench sched pipe -l {}` (ops/s)", wl.perf, wl.pipe_loops),
        format!(
            "cyclictest: `{} -m -q --policy=other -t {ncpus} --duration={} --interval={} --histogram={}` (SCHED_OTHER threads, so sched_ext schedules them), under `{} --cpu {ncpus} --cpu-load {}` (0: no load)",
            wl.cyclictest, wl.cyclictest_secs, wl.cyclictest_interval_us, wl.cyclictest_hist_us, wl.stress_ng, wl.cyclictest_load_pct
        ),
        format!(
            "lc-NN: the LC server alone (schedbe-bench lc-alone's run) at offered load NN% of {}, service {}, {lc_secs} s + {lc_secs} s (same arrivals repeated), warm-up {warmup} s; mean and p99 over both phases; no tracer",
            if a.lc_capacity { "its capacity (`--lc-capacity`, measured under EEVDF before the repetitions, see below)".to_string() } else { format!("{ncpus} CPUs") },
            a.lc_service
        ),
        format!("build: `make -j{ncpus} CC={}` of {build_files} generated C files (`make clean` before each)", wl.build_cc),
        format!("peers: {}", if peer_versions.is_empty() { "none".into() } else { peer_versions.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join("; ") }),
        format!("orchestrator: {}; calibration: {}", meta.orchestrator_policy, if meta.calibration.is_empty() { "none (no LC workload)" } else { &meta.calibration }),
    ];
    eprintln!("bench: overhead — {} configuration(s) x {} workload(s) x {reps} repetition(s); output in {}", configs.len(), workloads.len(), out.display());
    Ok(Setup { configs, workloads, reps, out, meta, wl, lc, cgroups, calibration, bpf_count, peer_versions, lc_capacity: None, params_md })
}

/// `--lc-capacity`'s probe: the LC server offered `offered_util` of the CPUs
/// under EEVDF finished `served_util` of them; lc-NN offers NN% of
/// `capacity` (served, at most 1). `lower_bound`: it kept up with the probe,
/// so its capacity may be higher.
#[derive(Clone, Debug, Serialize)]
pub struct LcCapacity {
    pub offered_util: f64,
    pub served_util: f64,
    pub capacity: f64,
    pub lower_bound: bool,
    /// The probe's raw files, relative to the output directory.
    pub raw_dir: String,
}

impl Setup {
    /// What an --lc-utils load is a fraction of, in CPUs' worth of service
    /// per CPU: 1 (the CPUs), or the capacity --lc-capacity measured.
    pub fn lc_scale(&self) -> f64 {
        self.lc_capacity.as_ref().map_or(1.0, |c| c.capacity)
    }
}

#[derive(Serialize)]
struct Json<'a> {
    format: u32,
    meta: &'a Meta,
    params: &'a workloads::Params,
    lc_params: &'a RunParams,
    calibration: &'a Option<Calibration>,
    configs: Vec<(String, String)>,
    workloads: Vec<String>,
    peer_versions: &'a BTreeMap<String, String>,
    lc_capacity: &'a Option<LcCapacity>,
    rows: &'a [Row],
    runs: &'a [WorkloadRun],
    figures: &'a [String],
}

impl Setup {
    /// The command for the configuration's scheduler (None: EEVDF).
    pub fn sched_cmd(&self, cfg: &Config) -> Result<Option<SchedCmd>> {
        let plan = cfg.plan(10);
        let Some(s) = plan.scheduler else { return Ok(None) };
        // the configuration's own arguments too (schedbe-conc, llf), as the srv-bg runner passes them
        let args: Vec<String> = self.lc.schedbe_args.iter().cloned().chain(plan.sched_args.iter().map(|a| a.to_string())).collect();
        SchedCmd::new(s, self.lc.schedbe_bin.as_deref(), &args, self.lc.peers_dir.as_deref()).map(Some)
    }

    fn workload_metrics(&self) -> Vec<(String, &'static [workloads::Metric])> {
        let traced = self.wl.cyclictest_trace.is_some();
        self.workloads
            .iter()
            .map(|w| (w.name(), if traced && *w == Workload::Cyclictest { workloads::CYCLICTEST_TRACED } else { w.metrics() }))
            .collect()
    }

    /// overhead.json, overhead.csv and summary.md for the runs so far.
    pub fn write(&self, runs: &[WorkloadRun], figures: &[String]) -> Result<Vec<Row>> {
        let configs: Vec<(String, String)> = self.configs.iter().map(|c| (c.name.clone(), c.describe())).collect();
        let names: Vec<String> = configs.iter().map(|c| c.0.clone()).collect();
        let wm = self.workload_metrics();
        let rows = report::rows(runs, &wm, &names);
        let js = Json {
            format: 1,
            meta: &self.meta,
            params: &self.wl,
            lc_params: &self.lc,
            calibration: &self.calibration,
            configs: configs.clone(),
            workloads: wm.iter().map(|w| w.0.clone()).collect(),
            peer_versions: &self.peer_versions,
            lc_capacity: &self.lc_capacity,
            rows: &rows,
            runs,
            figures,
        };
        let p = self.out.join(super::JSON);
        std::fs::write(&p, serde_json::to_string_pretty(&js)? + "\n").with_context(|| format!("write {}", p.display()))?;
        report::write_csv(&self.out.join("overhead.csv"), runs)?;
        let md = report::markdown(&report::Summary { meta: &self.meta, params_md: &self.params_md, configs: &configs, workloads: &wm, rows: &rows, runs, figures });
        std::fs::write(self.out.join("summary.md"), md).with_context(|| format!("write {}/summary.md", self.out.display()))?;
        Ok(rows)
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.wl.build_dir);
    }
}

/// The ratios to EEVDF, one line per workload metric.
pub fn print_table(s: &Setup, rows: &[Row]) {
    let names: Vec<&str> = s.configs.iter().map(|c| c.name.as_str()).collect();
    print!("{:<24}", "workload metric");
    for n in &names {
        print!(" {n:>24}");
    }
    println!();
    for (w, ms) in s.workload_metrics() {
        for m in ms {
            print!("{:<24}", format!("{w} {}", m.key));
            for n in &names {
                let r = rows.iter().find(|r| r.workload == w && r.metric == m.key && r.config == *n);
                let c = match r {
                    Some(r) if *n == report::BASELINE => fmt_spread(&r.value, 3),
                    Some(r) if r.ratio.is_some() => format!("x{}", fmt_spread(&r.ratio, 3)),
                    Some(_) => "-".into(),
                    None => "-".into(),
                };
                print!(" {c:>24}");
            }
            println!();
        }
    }
}

/// The directory holds an overhead run.
pub fn is_overhead_dir(dir: &Path) -> bool {
    dir.join(super::JSON).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utils() {
        assert_eq!(parse_utils("0.6, 0.85").unwrap(), vec![0.6, 0.85]);
        assert!(parse_utils("0.6,0.6").is_err());
        assert!(parse_utils("0").is_err());
        assert!(parse_utils("x").is_err());
        assert!(parse_utils("").unwrap().is_empty());
        assert!(check("reps", 0usize, 1, 100).is_err());
        assert_eq!(check("reps", 3usize, 1, 100).unwrap(), 3);
    }
}
