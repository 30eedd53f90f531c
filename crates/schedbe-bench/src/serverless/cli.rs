//! `schedbe-bench serverless-trace`: generate a workload and its request
//! trace into a directory, for a runner (not written yet) or for a look.

use std::fs;
use std::io::BufWriter;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;

use super::azure::{self, Selection};
use super::model::{Function, Group, ModelParams, Workload};
use super::trace;

#[derive(clap::Args, Debug, Clone)]
pub struct TraceArgs {
    /// Output directory: workload.json, requests.csv (and azure.csv with --write-azure-minutes)
    #[arg(long)]
    pub out: PathBuf,
    /// Model parameters (TOML, keys as in docs/serverless.md); the flags below override it
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// Number of function sandboxes (with --azure: the N most invoked functions)
    #[arg(long)]
    pub functions: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Scale the rates so that the functions keep this many CPUs busy
    #[arg(long, default_value_t = 3.2)]
    pub util_cpus: f64,
    /// Length of the request trace, seconds
    #[arg(long, default_value_t = 60.0)]
    pub duration_s: f64,
    /// Execution-time scale (0.01: the paper's 0.68 s median becomes 6.8 ms)
    #[arg(long)]
    pub time_scale: Option<f64>,
    /// Spread of ln(invocations/day) across functions (4.07: Azure's ~9
    /// decades; smaller values give group-low enough requests in a short run)
    #[arg(long)]
    pub rate_sigma: Option<f64>,
    /// Latency target as a multiple of a request's CPU demand
    #[arg(long)]
    pub target_multiple: Option<f64>,
    /// Take arrival rates from an Azure invocations_per_function_md CSV instead of the model
    #[arg(long)]
    pub azure: Option<PathBuf>,
    /// With --azure: minutes FIRST-LAST of the file (1-based)
    #[arg(long, value_name = "FIRST-LAST")]
    pub minutes: Option<String>,
    /// Also write the workload as an Azure-format CSV of this many minutes
    #[arg(long)]
    pub write_azure_minutes: Option<usize>,
}

#[derive(Serialize)]
struct FunctionOut<'a> {
    #[serde(flatten)]
    f: &'a Function,
    group: Group,
    load_cpus: f64,
    target_us: f64,
}

#[derive(Serialize)]
struct WorkloadOut<'a> {
    source: String,
    util_cpus: f64,
    duration_s: f64,
    requests: usize,
    params: &'a ModelParams,
    seed: u64,
    functions: Vec<FunctionOut<'a>>,
}

/// Model parameters from a TOML file (any of the keys of docs/serverless.md),
/// or the defaults; the caller applies its flags and validates.
pub(super) fn load_params(path: Option<&std::path::Path>) -> Result<ModelParams> {
    Ok(match path {
        Some(path) => {
            let text = fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            toml::from_str(&text)
                .map_err(|e| anyhow::anyhow!("{}", e.message()))
                .with_context(|| format!("invalid model parameters {}", path.display()))?
        }
        None => ModelParams::default(),
    })
}

/// The workload, not yet scaled to a load: rates from an Azure invocation
/// file (its `p.functions` most invoked functions, over an optional minute
/// window) or from the model; and where they came from.
pub(super) fn base_workload(p: &ModelParams, seed: u64, azure_file: Option<&std::path::Path>, minutes: Option<&str>) -> Result<(Workload, String)> {
    Ok(match azure_file {
        Some(path) => {
            let rows = azure::read(path)?;
            let window = minutes.map(azure::parse_window).transpose()?;
            let rates = azure::rates(&rows, Selection { window, top: Some(p.functions) })?;
            (Workload::with_rates(p, seed, rates)?, format!("azure:{}", path.display()))
        }
        None => (Workload::generate(p, seed)?, "model".to_string()),
    })
}

fn params_from(a: &TraceArgs) -> Result<ModelParams> {
    let mut p = load_params(a.params.as_deref())?;
    if let Some(n) = a.functions {
        p.functions = n;
    }
    if let Some(v) = a.time_scale {
        p.time_scale = v;
    }
    if let Some(v) = a.rate_sigma {
        p.rate_sigma_ln = v;
    }
    if let Some(v) = a.target_multiple {
        p.target_multiple = v;
    }
    p.validate()?;
    Ok(p)
}

/// Per band: functions, rate range (per s) and share of the load, for the terminal.
pub fn band_table(w: &Workload) -> String {
    let total = w.utilisation_cpus().max(f64::MIN_POSITIVE);
    let mut s = String::from("band  group       funcs  rate/s min .. max        load share\n");
    for b in (0..w.params.bands).rev() {
        let fs: Vec<&Function> = w.functions.iter().filter(|f| f.band == b).collect();
        if fs.is_empty() {
            continue;
        }
        let lo = fs.iter().map(|f| f.rate_per_s).fold(f64::INFINITY, f64::min);
        let hi = fs.iter().map(|f| f.rate_per_s).fold(0.0, f64::max);
        let load: f64 = fs.iter().map(|f| f.load_cpus()).sum();
        let g = Group::of_band(b, w.params.bands).name();
        s.push_str(&format!("{b:>4}  {g:<10} {:>6}  {lo:>10.3e} .. {hi:<10.3e}  {:>6.2}%\n", fs.len(), 100.0 * load / total));
    }
    s
}

pub fn run(a: &TraceArgs) -> Result<()> {
    let p = params_from(a)?;
    let (mut w, source) = base_workload(&p, a.seed, a.azure.as_deref(), a.minutes.as_deref())?;
    w.scale_to_util(a.util_cpus)?;
    let reqs = trace::requests(&w, a.duration_s, a.seed)?;
    fs::create_dir_all(&a.out).with_context(|| format!("cannot create {}", a.out.display()))?;
    let csv = a.out.join("requests.csv");
    let file = fs::File::create(&csv).with_context(|| format!("cannot create {}", csv.display()))?;
    trace::write_csv(&w, &reqs, BufWriter::new(file)).with_context(|| format!("writing {}", csv.display()))?;
    let out = WorkloadOut {
        source,
        util_cpus: a.util_cpus,
        duration_s: a.duration_s,
        requests: reqs.len(),
        params: &w.params,
        seed: w.seed,
        functions: w
            .functions
            .iter()
            .map(|f| FunctionOut { f, group: w.group(f), load_cpus: f.load_cpus(), target_us: w.params.latency_target_us(f.service_us) })
            .collect(),
    };
    let json = a.out.join("workload.json");
    fs::write(&json, serde_json::to_string_pretty(&out)? + "\n").with_context(|| format!("cannot write {}", json.display()))?;
    if let Some(m) = a.write_azure_minutes {
        let path = a.out.join("azure.csv");
        let file = fs::File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        azure::write(&azure::rows_from_model(&w, m, a.seed)?, BufWriter::new(file)).with_context(|| format!("writing {}", path.display()))?;
    }
    eprint!("{}", band_table(&w));
    eprintln!("{} functions, {:.2} CPUs, {} requests in {} s", w.functions.len(), w.utilisation_cpus(), reqs.len(), a.duration_s);
    println!("{}", a.out.display());
    Ok(())
}
