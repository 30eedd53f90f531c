//! schedbe: SCHED_BE on sched_ext. See README.md for what and why.
//!
//! This file is the command line; the rest, by responsibility:
//! - `policy`: the scheduling policies, one folder each with its whole
//!   userspace side: `sched_be` (the default), `akita` (mixed-criticality
//!   VMs, also `schedbe akita`), `llf` (least-loaded-first among sandboxes)
//!
//! What every policy shares:
//! - `loader`: open, probe the kernel, choose the RT/DL path, load, attach
//! - `lifecycle`: run until stopped, reload on the kernel's request
//! - `preflight`: whether the machine can run a policy at all
//! - `be_sync`: BE path patterns -> a policy's be_cgroups map
//! - `cgrp_watch`: when a rescan reads the cgroup files again
//! - `cpumax`: cpu.max enforced by schedbe: slots, limits, cpu.stat-like counters
//! - `park`: parking starved BE cgroups (freezer), the state file, the guardian
//! - `rt_takeover`: which path evacuates a CPU an RT/DL task takes
//! - `verifier_stats`: the BPF verifier's statistics on request
//! - `bpf_intf`: the BPF interface types the shared modules and SCHED_BE use
//! - `sandbox`: sandbox discovery and decaying load (LLF and `schedbe agent`)
//!
//! The other subcommands:
//! - `exec`: `schedbe exec --be`
//! - `vm`: `schedbe vm`, for hosts without sched_ext
//! - `agent`: `schedbe agent`, the contention-aware host agent's core
//!   (overload, per-sandbox load, hotspots; reads only, not part of `run`)
//!
//! The tracer (`schedbe trace`) is the separate crate schedbe-trace.

mod agent;
mod be_sync;
mod bpf_intf;
mod cgrp_watch;
mod cpumax;
mod exec;
mod lifecycle;
mod loader;
mod park;
mod policy;
mod preflight;
mod rt_takeover;
mod sandbox;
#[cfg(test)]
mod testtree;
mod verifier_stats;
mod vm;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

use policy::sched_be::config::{self, Config};
use policy::sched_be::stats;
use policy::{akita, llf, sched_be};

#[derive(Parser, Debug)]
#[command(name = "schedbe", version, about = "Best-effort work as a categorically lower scheduling class (sched_ext)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once per process: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Cmd {
    /// Load the scheduler and run until SIGINT/SIGTERM
    Run(RunArgs),
    /// Run a command in the BE tier and return its exit status
    Exec(ExecArgs),
    /// Measure LC/BE inversions from kernel tracepoints (any scheduler)
    Trace(schedbe_trace::TraceArgs),
    /// The experiments moved to the schedbe-bench binary; this says so
    #[command(hide = true, trailing_var_arg = true, disable_help_flag = true)]
    Bench {
        #[arg(allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Print the running scheduler's stats
    Stats(StatsArgs),
    /// Thaw BE cgroups a dead schedbe left parked (the systemd unit runs this after every stop)
    Thaw(ThawArgs),
    /// Internal: the parking guardian `schedbe run` starts
    #[command(hide = true)]
    Guard(ThawArgs),
    /// Akita mixed-criticality VMs: check a VM file's placement; add, remove, list VMs of the running daemon (docs/akita.md)
    #[command(subcommand)]
    Akita(akita::AkitaCmd),
    /// Report overload, per-sandbox load and hotspots of a cgroup tree (reads only; docs/serverless.md)
    Agent(agent::AgentArgs),
    /// Run a command in a VM whose kernel has sched_ext (scripts/vm.sh)
    #[command(trailing_var_arg = true)]
    Vm {
        /// Options for scripts/vm.sh (--cpus N, --mem M, --timeout S), then -- CMD
        #[arg(allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
}

/// The scheduling policies `schedbe run` offers.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    /// SCHED_BE: a global weighted-fair LC tier, BE strictly below (docs/design.md)
    SchedBe,
    /// Akita: mixed-criticality VMs with budgets and EDF-VD, from --vms (docs/akita.md)
    Akita,
    /// Least-loaded-first among sandboxes (--sandbox patterns) for dense serverless nodes (docs/serverless.md)
    Llf,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The scheduling policy
    #[arg(long, value_enum, default_value = "sched-be")]
    policy: Policy,
    /// Akita: the VM file (vms.toml, docs/akita.md); required with --policy akita
    #[arg(long, value_name = "FILE")]
    vms: Option<PathBuf>,
    /// LLF: a sandbox cgroup path pattern, glob relative to /sys/fs/cgroup (repeatable) [default: each kubelet pod]
    #[arg(long = "sandbox", value_name = "PATTERN")]
    sandboxes: Vec<String>,
    /// LLF: half-life of a sandbox's decaying load, in seconds (4 half-lives leave a burst 6%) [default 1]
    #[arg(long, value_name = "SECS")]
    load_half_life_s: Option<f64>,
    /// TOML config file (see docs/design.md); flags override it
    #[arg(long)]
    config: Option<PathBuf>,
    /// Extra BE cgroup path pattern, glob relative to /sys/fs/cgroup (repeatable)
    #[arg(long = "be-cgroup")]
    be_cgroups: Vec<String>,
    /// Do not treat kubelet BestEffort cgroups as BE by default
    #[arg(long)]
    no_default_be_cgroups: bool,
    /// LC time slice in µs [default 5000]
    #[arg(long)]
    lc_slice_us: Option<u64>,
    /// LC wakeup preemption: a woken LC task this far (µs of virtual time) behind the LC task on a busy CPU preempts it; 0 turns it off [default 400]
    #[arg(long)]
    lc_preempt_us: Option<u64>,
    /// Turn reservations off: a cgroup below its cpu.weight entitlement then waits for virtual time like any other (docs/design.md)
    #[arg(long)]
    no_reservations: bool,
    /// BE time slice in µs (LC preempts BE whenever it needs the CPU, so this can be long) [default 20000]
    #[arg(long)]
    be_slice_us: Option<u64>,
    /// A BE task waiting longer than this gets one guard slice (keeps the watchdog away)
    #[arg(long)]
    starvation_limit_ms: Option<u64>,
    /// Length in µs of the guard slice a starved BE task gets [default 2000]
    #[arg(long)]
    guard_slice_us: Option<u64>,
    /// Never park (freeze) starved BE cgroups; only the starvation guard serves them
    #[arg(long)]
    no_park: bool,
    /// Park a BE cgroup once one of its tasks was runnable this long with less than 1/32 of it on a CPU, and the cgroup then gets less than 1/32 of a CPU for half as long again [default 3000]
    #[arg(long)]
    park_after_ms: Option<u64>,
    /// Thaw parked cgroups once LC has left idle capacity this long
    #[arg(long)]
    unpark_after_ms: Option<u64>,
    /// State file recording parked cgroups
    #[arg(long)]
    state_file: Option<String>,
    /// How cpu.max is enforced: quota (the kernel's semantics) or concurrency
    /// (also at most ceil(quota/period) CPUs at once, the paper's reading) [default quota]
    #[arg(long, value_enum)]
    limit_mode: Option<config::LimitMode>,
    /// Print stats every SECS seconds
    #[arg(long, value_name = "SECS")]
    stats: Option<f64>,
    /// Print stats as one JSON object per line
    #[arg(long)]
    json: bool,
    /// More log output
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Args, Debug)]
struct ExecArgs {
    /// Run CMD in the BE tier (required: the only tier exec offers)
    #[arg(long)]
    be: bool,
    /// The command and its arguments
    #[arg(last = true, required = true)]
    cmd: Vec<String>,
}

#[derive(Args, Debug)]
struct ThawArgs {
    /// The state file schedbe run records parked cgroups in
    #[arg(long, default_value = park::DEFAULT_STATE_FILE)]
    state_file: PathBuf,
}

#[derive(Args, Debug)]
struct StatsArgs {
    /// Interval in seconds
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
}

fn init_log(verbose: bool) {
    let level = if verbose { simplelog::LevelFilter::Debug } else { simplelog::LevelFilter::Info };
    let cfg = simplelog::ConfigBuilder::new()
        .set_time_level(simplelog::LevelFilter::Off)
        .set_target_level(simplelog::LevelFilter::Off)
        .set_thread_level(simplelog::LevelFilter::Off)
        .set_location_level(simplelog::LevelFilter::Off)
        .build();
    let _ = simplelog::TermLogger::init(level, cfg, simplelog::TerminalMode::Stderr, simplelog::ColorChoice::Never);
}

fn duration_arg(name: &str, secs: f64) -> Result<Duration> {
    if !(secs.is_finite() && secs > 0.0 && secs <= 86400.0) {
        bail!("--{name} must be a number of seconds in (0, 86400], got {secs}");
    }
    Ok(Duration::from_secs_f64(secs))
}

fn build_config(a: &RunArgs) -> Result<Config> {
    let mut cfg = match &a.config {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    cfg.be_cgroups.extend(a.be_cgroups.iter().cloned());
    if a.no_default_be_cgroups {
        cfg.default_be_cgroups = false;
    }
    if let Some(v) = a.lc_preempt_us {
        cfg.lc_preempt_us = v;
    }
    if a.no_reservations {
        cfg.reservations = false;
    }
    if let Some(v) = a.lc_slice_us {
        cfg.lc_slice_us = v;
    }
    if let Some(v) = a.be_slice_us {
        cfg.be_slice_us = v;
    }
    if let Some(v) = a.starvation_limit_ms {
        cfg.starvation_limit_ms = v;
    }
    if let Some(v) = a.guard_slice_us {
        cfg.guard_slice_us = v;
    }
    apply_park_flags(&mut cfg, a);
    if let Some(v) = a.limit_mode {
        cfg.limit_mode = v;
    }
    cfg.validate()?;
    Ok(cfg)
}

/// The parking flags, which every policy takes.
fn apply_park_flags(cfg: &mut Config, a: &RunArgs) {
    if a.no_park {
        cfg.park = false;
    }
    if let Some(v) = a.park_after_ms {
        cfg.park_after_ms = v;
    }
    if let Some(v) = a.unpark_after_ms {
        cfg.unpark_after_ms = v;
    }
    if let Some(v) = &a.state_file {
        cfg.state_file = v.clone();
    }
}

/// Parking for the policies other than sched-be (Akita, LLF): BE below them
/// is parked as under sched-be, with the same flags and defaults.
fn park_options(a: &RunArgs) -> Result<park::ParkOptions> {
    let mut cfg = Config::default();
    apply_park_flags(&mut cfg, a);
    cfg.validate_park()?;
    Ok(cfg.park_options())
}

fn shutdown_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    ctrlc::set_handler(move || f.store(true, Ordering::Relaxed)).context("cannot install signal handler")?;
    Ok(flag)
}

/// The SCHED_BE options given on the command line, which no other policy
/// takes (every policy takes parking's).
fn sched_be_flags(a: &RunArgs) -> Vec<&'static str> {
    let set = [
        ("--config", a.config.is_some()),
        ("--be-cgroup", !a.be_cgroups.is_empty()),
        ("--no-default-be-cgroups", a.no_default_be_cgroups),
        ("--lc-slice-us", a.lc_slice_us.is_some()),
        ("--lc-preempt-us", a.lc_preempt_us.is_some()),
        ("--no-reservations", a.no_reservations),
        ("--be-slice-us", a.be_slice_us.is_some()),
        ("--starvation-limit-ms", a.starvation_limit_ms.is_some()),
        ("--guard-slice-us", a.guard_slice_us.is_some()),
        ("--limit-mode", a.limit_mode.is_some()),
    ];
    set.iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect()
}

fn cmd_run_akita(a: RunArgs) -> Result<i32> {
    let given = sched_be_flags(&a);
    if !given.is_empty() {
        let verb = if given.len() == 1 { "applies" } else { "apply" };
        bail!("{} {verb} to --policy sched-be only, not to --policy akita", given.join(", "));
    }
    if !a.sandboxes.is_empty() || a.load_half_life_s.is_some() {
        bail!("--sandbox and --load-half-life-s apply to --policy llf only");
    }
    let Some(file) = &a.vms else {
        bail!("--policy akita needs --vms FILE (the VM file, docs/akita.md)");
    };
    let cfg = akita::config::AkitaConfig::load(file)?;
    let park = park_options(&a)?;
    let out = akita::runtime::StatsOut { interval: a.stats.map(|s| duration_arg("stats", s)).transpose()?, json: a.json };
    preflight::check_run()?;
    init_log(a.verbose);
    let _guardian = if park.settings.is_some() { Some(park::spawn_guardian(&park.state_file)?) } else { None };
    let socket = std::path::Path::new(akita::control::DEFAULT_SOCKET);
    akita::runtime::run_policy(&cfg, socket, &park, shutdown_flag()?, out)
}

fn cmd_run_llf(a: RunArgs) -> Result<i32> {
    let given = sched_be_flags(&a);
    if !given.is_empty() {
        let verb = if given.len() == 1 { "applies" } else { "apply" };
        bail!("{} {verb} to --policy sched-be only, not to --policy llf", given.join(", "));
    }
    if a.vms.is_some() {
        bail!("--vms applies to --policy akita only");
    }
    let half_life = duration_arg("load-half-life-s", a.load_half_life_s.unwrap_or(1.0))?;
    let park = park_options(&a)?;
    // the patterns are checked before anything is loaded
    sandbox::discover::patterns(&a.sandboxes)?;
    let opts = llf::runtime::LlfOptions {
        patterns: a.sandboxes.clone(),
        half_life,
        stats: a.stats.map(|s| duration_arg("stats", s)).transpose()?,
        json: a.json,
        park,
    };
    preflight::check_run()?;
    init_log(a.verbose);
    let _guardian = if opts.park.settings.is_some() { Some(park::spawn_guardian(&opts.park.state_file)?) } else { None };
    llf::runtime::run_policy(&opts, shutdown_flag()?)
}

fn cmd_run(a: RunArgs) -> Result<i32> {
    match a.policy {
        Policy::Akita => return cmd_run_akita(a),
        Policy::Llf => return cmd_run_llf(a),
        Policy::SchedBe => {}
    }
    if a.vms.is_some() {
        bail!("--vms applies to --policy akita only");
    }
    if !a.sandboxes.is_empty() || a.load_half_life_s.is_some() {
        bail!("--sandbox and --load-half-life-s apply to --policy llf only");
    }
    // Everything that can be checked without touching the system comes first.
    let cfg = build_config(&a)?;
    let out = sched_be::runtime::StatsOut { interval: a.stats.map(|s| duration_arg("stats", s)).transpose()?, json: a.json };
    preflight::check_run()?;
    init_log(a.verbose);
    // The guardian first: before the scheduler is loaded, and before the
    // signal-handler thread exists.
    let _guardian = if cfg.park { Some(park::spawn_guardian(std::path::Path::new(&cfg.state_file))?) } else { None };

    sched_be::runtime::run_policy(&cfg, shutdown_flag()?, out)
}

fn real_main() -> Result<i32> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run(a) => cmd_run(a),
        Cmd::Exec(a) => {
            if !a.be {
                bail!("schedbe exec needs --be (the only tier it offers): schedbe exec --be -- CMD");
            }
            exec::exec_be(&a.cmd)
        }
        Cmd::Trace(a) => {
            schedbe_trace::cli_main(&a)?;
            Ok(0)
        }
        Cmd::Bench { args } => {
            let cmd: Vec<&str> = std::iter::once("schedbe-bench").chain(args.iter().map(String::as_str)).collect();
            eprintln!("schedbe: error: the benchmark harness is its own binary now: run `{}`", cmd.join(" "));
            Ok(2)
        }
        Cmd::Stats(a) => {
            let intv = duration_arg("interval", a.interval)?;
            stats::monitor(intv, shutdown_flag()?)?;
            Ok(0)
        }
        Cmd::Thaw(a) => {
            init_log(false);
            let thawed = park::thaw_leftovers(&a.state_file)?;
            if thawed.is_empty() {
                println!("nothing to thaw ({} lists no parked cgroup)", a.state_file.display());
            } else {
                println!("thawed /{}", thawed.join(", /"));
            }
            Ok(0)
        }
        Cmd::Guard(a) => {
            init_log(false);
            park::guardian_main(&a.state_file)?;
            Ok(0)
        }
        Cmd::Akita(c) => akita::cli_main(&c),
        Cmd::Agent(a) => {
            let stop = if a.once { None } else { Some(shutdown_flag()?) };
            agent::run(&a, stop)?;
            Ok(0)
        }
        Cmd::Vm { args } => vm::run(&args),
    }
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("schedbe: error: {e:#}");
            ExitCode::from(1)
        }
    }
}
