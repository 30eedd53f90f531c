//! `schedbe-bench serverless`: paper 003's experiment. N function sandboxes
//! (kubelet pods) serve an Azure-shaped request trace while the offered load
//! sweeps from moderate to overload, under EEVDF (kubelet's cgroup
//! weights), schedbe's default policy and LLF; configurations interleaved
//! within each repetition, the same trace for every configuration of a
//! repetition (seed + repetition). Reports the share of requests meeting
//! their latency target per group, context switches, the agent's overload
//! detection and hotspot precision, and the floor from the tracer.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::metrics::Sample;
use super::model::{ModelParams, Workload};
use super::runner::{one_run, Cfg, Env, Row};
use super::trace;
use crate::experiment::utc_stamp;
use crate::scx::{self, resolve_schedbe_bin};
use crate::stats::fmt_spread as med;

#[derive(clap::Args, Debug, Clone)]
pub struct ServerlessArgs {
    /// Configurations, comma-separated: eevdf, schedbe, llf
    #[arg(long, default_value = "eevdf,schedbe,llf")]
    pub configs: String,
    /// Repetitions (configurations interleaved in each; repetition k uses seed + k)
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Offered loads, as fractions of the CPUs, comma-separated
    #[arg(long, default_value = "0.5,0.8,1.0,1.2")]
    pub utils: String,
    /// Length of each run's trace, seconds
    #[arg(long, default_value_t = 30.0)]
    pub duration_s: f64,
    /// Requests arriving in the first seconds are not measured (loads settle)
    #[arg(long, default_value_t = 6.0)]
    pub warmup_s: f64,
    /// Seconds to wait for replies after the last arrival
    #[arg(long, default_value_t = 3.0)]
    pub drain_s: f64,
    /// Number of function sandboxes (at most 1024)
    #[arg(long, default_value_t = 100)]
    pub functions: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Spread of ln(invocations/day) (docs/serverless.md: 1.5 gives every band requests in a short run)
    #[arg(long, default_value_t = 1.5)]
    pub rate_sigma: f64,
    /// Execution-time scale (0.01: the Azure median 0.68 s becomes 6.8 ms)
    #[arg(long)]
    pub time_scale: Option<f64>,
    /// Latency target as a multiple of a request's CPU demand
    #[arg(long)]
    pub target_multiple: Option<f64>,
    /// Model parameters (TOML, keys as in docs/serverless.md); flags override it
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// Take arrival rates from an Azure invocations_per_function_md CSV
    #[arg(long)]
    pub azure: Option<PathBuf>,
    /// With --azure: minutes FIRST-LAST of the file (1-based)
    #[arg(long, value_name = "FIRST-LAST")]
    pub minutes: Option<String>,
    /// Worker threads per sandbox [default: the CPUs]
    #[arg(long)]
    pub threads: Option<usize>,
    /// CPU request of each sandbox pod, millicores (kubelet derives the weights)
    #[arg(long, default_value_t = 100)]
    pub request_milli: u64,
    /// UDP port of the first sandbox (sandbox i listens on PORT + i)
    #[arg(long, default_value_t = 20000)]
    pub base_port: u16,
    /// Do not run `schedbe agent` next to each run
    #[arg(long)]
    pub no_agent: bool,
    /// Do not run `schedbe trace` next to each run (no floor figures)
    #[arg(long)]
    pub no_trace: bool,
    /// SCHED_FIFO priority of the load generator and the tracer (0: none)
    #[arg(long, default_value_t = 50)]
    pub rt_prio: u8,
    /// Output directory [default: results/tmp/bench/serverless-<UTC time>]
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The schedbe binary to run as the scheduler, agent and tracer [default: `schedbe` next to this binary, else on $PATH]
    #[arg(long, env = "SCHEDBE_BIN")]
    pub schedbe_bin: Option<PathBuf>,
    /// Do not draw the figures (scripts/plot_serverless.py)
    #[arg(long)]
    pub no_plot: bool,
}

fn parse_utils(s: &str) -> Result<Vec<f64>> {
    let mut v = Vec::new();
    for u in s.split(',').map(str::trim).filter(|u| !u.is_empty()) {
        let x: f64 = u.parse().with_context(|| format!("--utils: {u:?} is not a number"))?;
        if !(x.is_finite() && x > 0.0 && x <= 4.0) {
            bail!("--utils: {x} is not in (0, 4] (fractions of the CPUs)");
        }
        v.push(x);
    }
    if v.is_empty() {
        bail!("--utils is empty");
    }
    Ok(v)
}

fn model_params(a: &ServerlessArgs) -> Result<ModelParams> {
    let mut p = super::cli::load_params(a.params.as_deref())?;
    p.functions = a.functions;
    p.rate_sigma_ln = a.rate_sigma;
    if let Some(v) = a.time_scale {
        p.time_scale = v;
    }
    if let Some(v) = a.target_multiple {
        p.target_multiple = v;
    }
    p.validate()?;
    Ok(p)
}

/// Check everything before the first run touches the machine.
fn check(a: &ServerlessArgs, configs: &[Cfg], schedbe: &Option<PathBuf>) -> Result<()> {
    if !(1..=crate::kubepods::MAX_PODS).contains(&a.functions) {
        bail!("--functions must be in [1, {}], got {}", crate::kubepods::MAX_PODS, a.functions);
    }
    if !(1..=100).contains(&a.reps) {
        bail!("--reps must be in [1, 100], got {}", a.reps);
    }
    if !(a.duration_s.is_finite() && a.warmup_s.is_finite() && a.warmup_s >= 0.0 && a.duration_s >= a.warmup_s + 2.0 && a.duration_s <= 3600.0) {
        bail!("need 0 <= --warmup-s and --warmup-s + 2 <= --duration-s <= 3600 (got {} and {})", a.warmup_s, a.duration_s);
    }
    if !(a.drain_s.is_finite() && (0.0..=600.0).contains(&a.drain_s)) {
        bail!("--drain-s must be in [0, 600], got {}", a.drain_s);
    }
    if a.base_port < 1024 || a.base_port as usize + a.functions > 65535 {
        bail!("--base-port {}: the ports PORT..PORT+{} must lie in 1024-65535", a.base_port, a.functions);
    }
    if a.request_milli == 0 || a.request_milli > 64_000 {
        bail!("--request-milli must be in [1, 64000], got {}", a.request_milli);
    }
    if a.rt_prio > 99 {
        bail!("--rt-prio must be in [0, 99], got {}", a.rt_prio);
    }
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        bail!("schedbe-bench serverless needs root (it builds pod cgroups and loads schedulers)");
    }
    let needs_schedbe = configs.iter().any(|c| *c != Cfg::Eevdf) || !a.no_agent || !a.no_trace;
    if needs_schedbe && schedbe.is_none() {
        bail!("{}", scx::NO_SCHEDBE);
    }
    if configs.iter().any(|c| *c != Cfg::Eevdf) && scx::sched_ext_state().is_none() {
        bail!("this kernel has no sched_ext (/sys/kernel/sched_ext missing); run in the VM (scripts/vm.sh)");
    }
    crate::kubepods::check_root(std::path::Path::new(crate::kubepods::DEFAULT_ROOT))?;
    Ok(())
}


/// The summary table: per load and configuration, medians [min-max] over repetitions.
pub fn table(rows: &[Row], configs: &[Cfg], utils: &[f64]) -> String {
    let mut t = String::from(
        "| load | config | group-low met % | group-high met % | all met % | group-high CPU | ctx switches/s | agent: overload after s | hotspot precision: top band; top load | pod floor: least CPU ms in a backlogged s |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for &u in utils {
        for &c in configs {
            let rs: Vec<&Row> = rows.iter().filter(|r| r.config == c && r.util == u).collect();
            if rs.is_empty() {
                continue;
            }
            let att = |g: &str| -> Vec<f64> { rs.iter().filter_map(|r| r.groups.get(g).and_then(|x| x.attainment_pct)).collect() };
            let hi_cpu: Vec<f64> = rs.iter().map(|r| r.cpu_high).collect();
            let ctx: Vec<f64> = rs.iter().filter_map(|r| r.ctx_per_s).collect();
            let det: Vec<f64> = rs.iter().filter_map(|r| r.agent.as_ref().and_then(|a| a.first_overload_s)).collect();
            let agent_runs = rs.iter().filter(|r| r.agent.is_some()).count();
            let det_s = if agent_runs == 0 { "-".into() } else { format!("{} ({}/{} runs)", med(&det, 1), det.len(), agent_runs) };
            let prec: Vec<f64> = rs.iter().filter_map(|r| r.agent.as_ref().and_then(|a| a.precision)).collect();
            let prec_load: Vec<f64> = rs.iter().filter_map(|r| r.agent.as_ref().and_then(|a| a.precision_by_load)).collect();
            // the pods' own floors: the QoS cgroup holding them all is no sandbox
            let floor: Vec<f64> = rs.iter().copied().filter_map(pod_floor).collect();
            t += &format!(
                "| {u:.2} | {} | {} | {} | {} | {} | {} | {det_s} | {} | {} |\n",
                c.name(),
                med(&att("group-low"), 1),
                med(&att("group-high"), 1),
                med(&att("all"), 1),
                med(&hi_cpu, 2),
                med(&ctx, 0),
                format!("{}; {}", med(&prec, 2), med(&prec_load, 2)),
                med(&floor, 1),
            );
        }
    }
    t
}

/// The least CPU (ms) a traced sandbox pod got in a second in which it was
/// backlogged, over one run (None: no pod was backlogged for a second).
pub fn pod_floor(r: &Row) -> Option<f64> {
    r.floors.iter().filter(|(k, _)| k.contains("-pod")).filter_map(|(_, f)| f.min_cpu_ms).reduce(f64::min)
}

fn write_samples(path: &std::path::Path, w: &Workload, samples: &[Sample]) -> Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?);
    writeln!(f, "function,band,group,latency_us,target_us")?;
    for s in samples {
        let band = w.functions.get(s.function).map_or(0, |x| x.band);
        // Latency to the nanosecond it was measured in, and the target as the
        // shortest text that parses back to the same f64: a reader comparing
        // the two counts exactly the requests the summary counts as met.
        let lat = s.latency_us.map_or(String::new(), |l| format!("{l:.3}"));
        writeln!(f, "{},{band},{},{lat},{}", super::runner::pod_name(s.function), s.group.name(), s.target_us)?;
    }
    Ok(())
}

pub fn run(a: &ServerlessArgs) -> Result<()> {
    let configs = Cfg::parse_list(&a.configs)?;
    let utils = parse_utils(&a.utils)?;
    let p = model_params(a)?;
    let nr_cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    // Every workload first: a bad trace file fails before anything is checked or runs.
    // (the trace file is read once; each load scales a copy)
    let (base, _) = super::cli::base_workload(&p, a.seed, a.azure.as_deref(), a.minutes.as_deref())?;
    let mut loads = Vec::new();
    for &u in &utils {
        let mut w = base.clone();
        w.scale_to_util(u * nr_cpus as f64)?;
        loads.push((u, w));
    }
    let schedbe = resolve_schedbe_bin(a.schedbe_bin.as_deref());
    check(a, &configs, &schedbe)?;
    let env = Env {
        exe: std::env::current_exe().context("cannot find this binary")?,
        schedbe,
        nr_cpus,
        threads: a.threads.unwrap_or(nr_cpus).clamp(1, 64),
        request_milli: a.request_milli,
        base_port: a.base_port,
        warmup_s: a.warmup_s,
        duration_s: a.duration_s,
        drain_s: a.drain_s,
        agent: !a.no_agent,
        trace: !a.no_trace,
        rt_prio: a.rt_prio,
    };
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from(format!("results/tmp/bench/serverless-{}", utc_stamp())));
    std::fs::create_dir_all(&out).with_context(|| format!("mkdir {}", out.display()))?;
    println!(
        "serverless: {} sandboxes x {} threads on {nr_cpus} CPUs, loads {:?}, {} s runs ({} s warm-up), configs {:?}, {} repetitions -> {}",
        a.functions,
        env.threads,
        utils,
        a.duration_s,
        a.warmup_s,
        configs.iter().map(|c| c.name()).collect::<Vec<_>>(),
        a.reps,
        out.display()
    );
    eprint!("{}", super::band_table(&loads[0].1));
    let mut rows: Vec<Row> = Vec::new();
    for rep in 0..a.reps {
        for (u, w) in &loads {
            let reqs = trace::requests(w, a.duration_s, a.seed + rep as u64)?;
            for &c in &configs {
                let dir = out.join(format!("{}-u{u:.2}-r{}", c.name(), rep + 1));
                let (row, samples) = one_run(&env, w, &reqs, c, *u, rep, &dir).with_context(|| format!("{} at load {u} (repetition {})", c.name(), rep + 1))?;
                write_samples(&dir.join("samples.csv"), w, &samples)?;
                let g = |k: &str| row.groups.get(k).and_then(|x| x.attainment_pct).map_or("-".into(), |v| format!("{v:.1}%"));
                println!(
                    "  rep {} load {u:.2} {:<7}: met low {} high {} all {} ({} requests), group-high CPU {:.2}, ctx/s {:.0}{}",
                    rep + 1,
                    c.name(),
                    g("group-low"),
                    g("group-high"),
                    g("all"),
                    row.groups.get("all").map_or(0, |x| x.arrived),
                    row.cpu_high,
                    row.ctx_per_s.unwrap_or(0.0),
                    row.agent.as_ref().map_or(String::new(), |ag| format!(
                        ", agent: overload {} precision {}",
                        ag.first_overload_s.map_or("never".into(), |s| format!("after {s:.1} s")),
                        ag.precision.map_or("-".into(), |p| format!("{p:.2}"))
                    )),
                );
                for wn in &row.warnings {
                    eprintln!("bench: warning: {wn}");
                }
                rows.push(row);
                // Write as we go: a long sweep interrupted keeps what it measured.
                save(&out, a, &p, nr_cpus, &loads, &rows, &configs, &utils)?;
            }
        }
    }
    let t = table(&rows, &configs, &utils);
    print!("\n{t}");
    if !a.no_plot {
        match crate::scripts::find_script("plot_serverless.py") {
            Some(s) => match crate::scripts::run_plot_script(&s, &out) {
                Ok(pngs) => pngs.iter().for_each(|p| println!("figure: {p}")),
                Err(e) => eprintln!("bench: warning: no figure: {e:#}"),
            },
            None => eprintln!("bench: warning: scripts/plot_serverless.py not found: no figure"),
        }
    }
    Ok(())
}

/// Whether `dir` holds a `schedbe-bench serverless` output.
pub fn is_serverless_dir(dir: &std::path::Path) -> bool {
    dir.join("serverless.json").is_file()
}

/// Rewrite `serverless.md` from `serverless.json` (the table as this
/// version computes it) and draw the figures; returns the PNG names.
pub fn replot(dir: &std::path::Path) -> Result<Vec<String>> {
    let path = dir.join("serverless.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?)
        .with_context(|| format!("{} is not JSON", path.display()))?;
    let rows: Vec<Row> = serde_json::from_value(v["rows"].clone()).with_context(|| format!("{}: rows", path.display()))?;
    let configs: Vec<Cfg> = serde_json::from_value(v["configs"].clone()).with_context(|| format!("{}: configs", path.display()))?;
    let utils: Vec<f64> = serde_json::from_value(v["utils"].clone()).with_context(|| format!("{}: utils", path.display()))?;
    let t = table(&rows, &configs, &utils);
    std::fs::write(dir.join("serverless.md"), &t)?;
    print!("{t}");
    let script = crate::scripts::find_script("plot_serverless.py").context("scripts/plot_serverless.py not found")?;
    let pngs = crate::scripts::run_plot_script(&script, dir)?;
    Ok(pngs.iter().filter_map(|p| std::path::Path::new(p).file_name().map(|n| n.to_string_lossy().into_owned())).collect())
}

#[allow(clippy::too_many_arguments)]
fn save(out: &std::path::Path, a: &ServerlessArgs, p: &ModelParams, nr_cpus: usize, loads: &[(f64, Workload)], rows: &[Row], configs: &[Cfg], utils: &[f64]) -> Result<()> {
    let functions: BTreeMap<String, serde_json::Value> = loads
        .iter()
        .map(|(u, w)| {
            let fs: Vec<serde_json::Value> = w
                .functions
                .iter()
                .map(|f| serde_json::json!({"name": super::runner::pod_name(f.id), "rate_per_s": f.rate_per_s, "service_us": f.service_us, "band": f.band, "group": w.group(f).name()}))
                .collect();
            (format!("{u:.2}"), serde_json::Value::Array(fs))
        })
        .collect();
    let json = serde_json::json!({
        "experiment": "serverless",
        "nr_cpus": nr_cpus,
        "configs": configs.iter().map(|c| c.name()).collect::<Vec<_>>(),
        "utils": utils,
        "reps": a.reps,
        "duration_s": a.duration_s,
        "warmup_s": a.warmup_s,
        "drain_s": a.drain_s,
        "seed": a.seed,
        "azure": a.azure.as_ref().map(|p| p.display().to_string()),
        "request_milli": a.request_milli,
        "params": p,
        "functions": functions,
        "rows": rows,
    });
    std::fs::write(out.join("serverless.json"), serde_json::to_string_pretty(&json)? + "\n")?;
    std::fs::write(out.join("serverless.md"), table(rows, configs, utils))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utils_and_configs_are_checked() {
        assert_eq!(parse_utils("0.5, 1.2").unwrap(), vec![0.5, 1.2]);
        for bad in ["", "0", "-1", "x", "5"] {
            assert!(parse_utils(bad).is_err(), "{bad}");
        }
        assert_eq!(Cfg::parse_list("llf,eevdf,llf").unwrap(), vec![Cfg::Llf, Cfg::Eevdf]);
        assert!(Cfg::parse_list("cfs").unwrap_err().to_string().contains("expected eevdf, schedbe or llf"));
    }
}
