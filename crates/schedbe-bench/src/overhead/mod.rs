//! `schedbe-bench overhead`: what schedbe costs when there is no BE, against
//! EEVDF and peer sched_ext schedulers (scx_bpfland, scx_lavd). One boot,
//! configurations interleaved within each repetition (rep 1: eevdf,
//! schedbe, scx_bpfland, scx_lavd; rep 2: ...), every workload per
//! configuration: perf's messaging and pipe benchmarks, cyclictest under a
//! background load, the LC server alone at two loads (the runner's lc-alone
//! machinery) and a parallel C build. Then a BPF count pass: every
//! scheduler configuration runs each workload once more with
//! kernel.bpf_stats_enabled, and its BPF time per callback is measured
//! around each workload (for the LC server, whose runs load the scheduler
//! themselves, over the first phase's measured window). The counting slows
//! every BPF program, so the timed repetitions run without it.
//! docs/bench.md.

pub mod build;
pub mod parse;
pub mod report;
pub mod setup;
pub mod workloads;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::bpf_stats as bpf;
use crate::configs::Config;
use crate::runner::run_one;
use crate::scx::{self, sched_ext_state, SchedCmd};
use report::WorkloadRun;
use setup::{LcCapacity, Setup};
use workloads::Workload;

pub use setup::OverheadArgs;

/// The JSON file of an output directory.
pub const JSON: &str = "overhead.json";

/// Draw overhead.png from an output directory (scripts/plot_overhead.py).
pub fn plot(dir: &Path) -> Result<Vec<String>> {
    let script = crate::scripts::find_script("plot_overhead.py").context("scripts/plot_overhead.py not found")?;
    crate::scripts::run_plot_script(&script, dir)
}

pub fn run(a: &OverheadArgs, command_line: &str) -> Result<()> {
    let mut s = setup::prepare(a, command_line)?;
    let nonlc: Vec<Workload> = s.workloads.iter().copied().filter(|w| !matches!(w, Workload::Lc(_))).collect();
    let lc_utils: Vec<f64> = s.workloads.iter().filter_map(|w| if let Workload::Lc(u) = w { Some(*u) } else { None }).collect();
    if a.lc_capacity {
        s.lc_capacity = Some(measure_capacity(&mut s)?);
    }
    let mut runs: Vec<WorkloadRun> = Vec::new();
    let mut idx = 0;
    for rep in 1..=s.reps {
        for cfg in s.configs.clone() {
            eprintln!("bench: overhead repetition {rep}/{}: {}", s.reps, cfg.name);
            if !nonlc.is_empty() {
                runs.extend(run_group(&s, &cfg, rep, &nonlc, false));
            }
            for &u in &lc_utils {
                idx += 1;
                runs.push(run_lc(&s, &cfg, rep, u, idx, false));
            }
            s.write(&runs, &[])?;
        }
    }
    if s.bpf_count {
        runs.extend(count_pass(&s, &nonlc, &lc_utils, &mut idx));
        s.write(&runs, &[])?;
    }
    if let Some(c) = &s.cgroups {
        c.cleanup();
    }
    let mut figures = Vec::new();
    if !a.no_plot {
        s.write(&runs, &[])?;
        match plot(&s.out) {
            Ok(f) => figures = f,
            Err(e) => {
                eprintln!("bench: warning: no figure: {e:#}");
                s.meta.notes.push(format!("figure not drawn: {e:#}"));
            }
        }
    }
    let rows = s.write(&runs, &figures)?;
    setup::print_table(&s, &rows);
    eprintln!("bench: summary {}/summary.md; data {JSON}, overhead.csv, raw/", s.out.display());
    for f in &figures {
        eprintln!("bench: figure {}/{f}", s.out.display());
    }
    let failed = runs.iter().filter(|r| !r.ok).count();
    if failed == runs.len() {
        bail!("all {failed} runs failed (see {}/summary.md)", s.out.display());
    }
    if failed > 0 {
        eprintln!("bench: warning: {failed} of {} runs failed (see summary.md)", runs.len());
    }
    Ok(())
}

/// Is the configuration's scheduler (or none) still what runs? A scheduler
/// the kernel threw out (error exit, watchdog) leaves EEVDF measured.
fn check_scheduler(cmd: Option<&SchedCmd>) -> Result<()> {
    let st = sched_ext_state();
    match cmd {
        Some(c) => {
            let ops = scx::root_ops();
            if st.as_deref() != Some("enabled") || !ops.as_deref().is_some_and(|o| o.starts_with(c.sched.ops_name())) {
                bail!("{} is no longer loaded (sched_ext state {st:?}, ops {ops:?}): the kernel unloaded it during the run", c.sched.name());
            }
        }
        None if matches!(st.as_deref(), Some(s) if s != "disabled") => bail!("a sched_ext scheduler is {st:?} ({:?}) in a configuration that loads none", scx::root_ops()),
        None => {}
    }
    Ok(())
}

/// The BPF count pass, after the timed repetitions: each configuration with
/// a scheduler runs every workload once more (repetition reps+1) with
/// kernel.bpf_stats_enabled on, which gives its BPF cost per callback. No
/// ratio uses these runs.
fn count_pass(s: &Setup, nonlc: &[Workload], lc_utils: &[f64], idx: &mut usize) -> Vec<WorkloadRun> {
    let _on = match bpf::enable_stats() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("bench: warning: no BPF count pass: {e:#}");
            return Vec::new();
        }
    };
    let rep = s.reps + 1;
    let mut out = Vec::new();
    for cfg in s.configs.iter().filter(|c| c.loads_scheduler()) {
        eprintln!("bench: BPF count pass (kernel.bpf_stats_enabled=1): {}", cfg.name);
        if !nonlc.is_empty() {
            out.extend(run_group(s, cfg, rep, nonlc, true));
        }
        for &u in lc_utils {
            *idx += 1;
            out.push(run_lc(s, cfg, rep, u, *idx, true));
        }
    }
    out
}

/// The non-LC workloads of one configuration and repetition, under one load
/// of its scheduler. @counted: the BPF count pass (kernel.bpf_stats_enabled
/// is on): the scheduler's programs are counted around each workload.
fn run_group(s: &Setup, cfg: &Config, rep: usize, ws: &[Workload], counted: bool) -> Vec<WorkloadRun> {
    let raw = format!("raw/{}-r{rep}", cfg.name);
    let dir = s.out.join(&raw);
    let blank = |w: Workload| WorkloadRun { workload: w.name(), config: cfg.name.clone(), rep, counted, raw_dir: raw.clone(), ..Default::default() };
    let fail_all = |e: anyhow::Error| ws.iter().map(|w| WorkloadRun { error: Some(format!("{e:#}")), ..blank(*w) }).collect::<Vec<_>>();
    if let Err(e) = std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display())) {
        return fail_all(e);
    }
    let cmd = match s.sched_cmd(cfg) {
        Ok(c) => c,
        Err(e) => return fail_all(e),
    };
    let loaded = match &cmd {
        Some(c) => {
            eprintln!("bench: [{} r{rep}] starting {}", cfg.name, c.sched.name());
            match scx::load(c, &dir, scx::LOAD_TIMEOUT) {
                Ok(l) => Some(l),
                Err(e) => return fail_all(e.context(format!("configuration {}", cfg.name))),
            }
        }
        None => None,
    };
    let names = if counted && loaded.is_some() { bpf::names() } else { Default::default() };
    let mut out = Vec::new();
    for &w in ws {
        let mut r = blank(w);
        eprintln!("bench: [{} r{rep}] {}", cfg.name, w.name());
        let before = loaded.as_ref().filter(|_| counted).map(|l| bpf::snapshot(l.pid()));
        match workloads::run(w, &s.wl, &dir).and_then(|m| check_scheduler(cmd.as_ref()).map(|_| m)) {
            Ok(m) => {
                if let (Some(Ok(b)), Some(l)) = (&before, &loaded) {
                    match bpf::snapshot(l.pid()) {
                        Ok(a) => r.bpf = Some(bpf::cost(b, &a, &names, m.elapsed_s, s.wl.ncpus)),
                        Err(e) => r.warnings.push(format!("BPF stats: {e:#}")),
                    }
                }
                if let Some(Err(e)) = &before {
                    r.warnings.push(format!("BPF stats: {e:#}"));
                }
                r.ok = true;
                r.values = m.values;
                r.elapsed_s = m.elapsed_s;
                r.warnings.extend(m.warnings);
                eprintln!("bench: [{} r{rep}] {}: {}", cfg.name, w.name(), fmt_values(&r));
            }
            Err(e) => {
                eprintln!("bench: [{} r{rep}] {} FAILED: {e:#}", cfg.name, w.name());
                r.error = Some(format!("{e:#}"));
            }
        }
        out.push(r);
    }
    if let Some(l) = loaded {
        let w = l.stop();
        if let Some(last) = out.last_mut() {
            last.warnings.extend(w);
        }
    }
    out
}

fn fmt_values(r: &WorkloadRun) -> String {
    let mut v: Vec<String> = r.values.iter().map(|(k, x)| format!("{k} {x:.3}")).collect();
    if let Some(b) = &r.bpf {
        v.push(format!("BPF {:.2}% of CPU", b.cpu_pct));
    }
    v.join(", ")
}

/// Offered load of `--lc-capacity`'s probe, in CPUs' worth of service per
/// CPU: beyond what any server can finish, so it finishes its capacity.
const CAPACITY_PROBE_UTIL: f64 = 1.25;

/// `--lc-capacity`: offer the LC server CAPACITY_PROBE_UTIL under EEVDF for
/// one LC phase and return the service it finished per second in the
/// measured window, per CPU (runner's served_util_before). Recorded in the
/// summary's parameters and notes, and in overhead.json's lc_capacity.
fn measure_capacity(s: &mut Setup) -> Result<LcCapacity> {
    let eevdf: Config = "eevdf".parse()?;
    let mut p = s.lc.clone();
    p.util = CAPACITY_PROBE_UTIL;
    p.be_secs = 0.0;
    p.experiment = "overhead lc-capacity".into();
    eprintln!("bench: measuring the LC server's capacity: offered {CAPACITY_PROBE_UTIL} of {} CPUs under EEVDF for {} s", p.ncpus, p.lc_alone_secs);
    let o = run_one(&p, &eevdf, 0, 0, s.cgroups.as_ref(), &s.out.join("lc-capacity"));
    if !o.ok {
        bail!("--lc-capacity: the probe run failed: {}", o.error.unwrap_or_default());
    }
    let served = o.served_util_before.context("--lc-capacity: the probe's measured window is empty")?;
    let offered = o.achieved_util_before.unwrap_or(0.0);
    if !(served > 0.01) {
        bail!("--lc-capacity: the server finished {served:.3} of the CPUs' worth of service under a {offered:.2} load; no capacity to scale by");
    }
    // Saturated, it finishes less than it is offered; a server that kept up was
    // not saturated and its capacity is at least what it was offered.
    let kept_up = served >= 0.97 * offered;
    let cap = served.min(1.0);
    let line = format!(
        "LC capacity (`--lc-capacity`): offered {offered:.3} of {} CPUs under EEVDF (lc-capacity/{}), it finished {served:.3}: lc-NN offers NN% of {cap:.3} of the CPUs{}",
        p.ncpus,
        o.raw_dir,
        if kept_up { " (WARNING: it kept up with the probe, so this is a lower bound)" } else { "" }
    );
    eprintln!("bench: {line}");
    s.meta.notes.push(line.clone());
    s.params_md.push(line);
    Ok(LcCapacity { offered_util: offered, served_util: served, capacity: cap, lower_bound: kept_up, raw_dir: format!("lc-capacity/{}", o.raw_dir) })
}

/// The LC server alone at one load: the runner's lc-alone run (which loads
/// the configuration's scheduler itself); LC mean and p99 over the whole run.
/// The load is @util of the CPUs, scaled by --lc-capacity's measure.
/// @counted: the BPF count pass (the runner counts the scheduler's programs).
fn run_lc(s: &Setup, cfg: &Config, rep: usize, util: f64, idx: usize, counted: bool) -> WorkloadRun {
    let w = Workload::Lc(util);
    let mut p = s.lc.clone();
    p.util = util * s.lc_scale();
    p.bpf_stats = counted;
    p.experiment = format!("overhead {}", w.name());
    let sub = s.out.join(w.name());
    eprintln!("bench: [{} r{rep}] {} (LC alone at util {:.3})", cfg.name, w.name(), p.util);
    let o = run_one(&p, cfg, rep - 1, idx, s.cgroups.as_ref(), &sub);
    let mut r = WorkloadRun {
        workload: w.name(),
        config: cfg.name.clone(),
        rep,
        counted,
        ok: o.ok,
        error: o.error.clone(),
        elapsed_s: p.lc_alone_secs + p.be_secs,
        raw_dir: format!("{}/{}", w.name(), o.raw_dir),
        warnings: o.warnings.clone(),
        bpf: o.bpf_lc_phase.clone(),
        ..Default::default()
    };
    if o.ok {
        if o.overall.count == 0 {
            r.ok = false;
            r.error = Some("no LC request was answered".into());
        }
        r.values.insert("mean_ms".into(), o.overall.mean_us / 1000.0);
        r.values.insert("p99_ms".into(), o.overall.p99_us / 1000.0);
        r.values.insert("max_ms".into(), o.overall.max_us / 1000.0);
        r.values.insert("requests".into(), o.overall.count as f64);
        if let Some(u) = o.achieved_util_before {
            r.values.insert("offered_util".into(), u);
        }
        eprintln!("bench: [{} r{rep}] {}: {}", cfg.name, w.name(), fmt_values(&r));
    }
    r
}

/// The output directory's default name.
pub fn default_out() -> PathBuf {
    PathBuf::from(format!("results/tmp/bench/overhead-{}", crate::experiment::utc_stamp()))
}
