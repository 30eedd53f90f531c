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
//! - `cli`: `schedbe run`'s options, per policy (clap refuses another policy's flag)
//! - `preflight`: whether the machine can run a policy at all
//! - `be_sync`: BE path patterns -> a policy's be_cgroups map
//! - `cgrp_watch`: when a rescan reads the cgroup files again
//! - `cpumax`: cpu.max enforced by schedbe: slots, limits, cpu.stat-like counters
//! - `stats_server`: the scx_stats server every policy runs; `stats_client`:
//!   `schedbe stats`, for whichever policy runs
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
mod cli;
mod cpumax;
mod exec;
mod lifecycle;
mod loader;
mod park;
mod policy;
mod preflight;
mod rt_takeover;
mod sandbox;
mod stats_client;
mod stats_server;
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

use cli::{CommonArgs, PolicyCmd, RunArgs, SchedBeArgs};
use policy::sched_be::config::Config;
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
    /// Print each reading as the JSON object the stats server sent
    #[arg(long)]
    json: bool,
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

fn build_config(a: &SchedBeArgs, common: &CommonArgs) -> Result<Config> {
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
    apply_park_flags(&mut cfg, common);
    if let Some(v) = a.limit_mode {
        cfg.limit_mode = v;
    }
    cfg.validate()?;
    Ok(cfg)
}

/// The parking flags, which every policy takes.
fn apply_park_flags(cfg: &mut Config, a: &CommonArgs) {
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
fn park_options(a: &CommonArgs) -> Result<park::ParkOptions> {
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

fn cmd_run_akita(a: &cli::AkitaArgs, common: &CommonArgs) -> Result<i32> {
    let cfg = akita::config::AkitaConfig::load(&a.vms)?;
    let park = park_options(common)?;
    let out = akita::runtime::StatsOut { interval: common.stats.map(|s| duration_arg("stats", s)).transpose()?, json: common.json };
    preflight::check_run()?;
    init_log(common.verbose);
    let _guardian = if park.settings.is_some() { Some(park::spawn_guardian(&park.state_file)?) } else { None };
    let socket = std::path::Path::new(akita::control::DEFAULT_SOCKET);
    akita::runtime::run_policy(&cfg, socket, &park, shutdown_flag()?, out)
}

fn cmd_run_llf(a: &cli::LlfArgs, common: &CommonArgs) -> Result<i32> {
    let half_life = duration_arg("load-half-life-s", a.load_half_life_s.unwrap_or(1.0))?;
    let park = park_options(common)?;
    // the patterns are checked before anything is loaded
    sandbox::discover::patterns(&a.sandboxes)?;
    let opts = llf::runtime::LlfOptions {
        patterns: a.sandboxes.clone(),
        half_life,
        stats: common.stats.map(|s| duration_arg("stats", s)).transpose()?,
        json: common.json,
        park,
    };
    preflight::check_run()?;
    init_log(common.verbose);
    let _guardian = if opts.park.settings.is_some() { Some(park::spawn_guardian(&opts.park.state_file)?) } else { None };
    llf::runtime::run_policy(&opts, shutdown_flag()?)
}

fn cmd_run(a: RunArgs) -> Result<i32> {
    if let Some(p) = a.unknown_policy {
        bail!("--policy {p:?}: the policy is a subcommand now (schedbe run akita, schedbe run llf)");
    }
    match &a.policy {
        Some(PolicyCmd::Akita(p)) => return cmd_run_akita(p, &a.common),
        Some(PolicyCmd::Llf(p)) => return cmd_run_llf(p, &a.common),
        None => {}
    }
    // Everything that can be checked without touching the system comes first.
    let cfg = build_config(&a.sched_be, &a.common)?;
    let out = sched_be::runtime::StatsOut { interval: a.common.stats.map(|s| duration_arg("stats", s)).transpose()?, json: a.common.json };
    preflight::check_run()?;
    init_log(a.common.verbose);
    // The guardian first: before the scheduler is loaded, and before the
    // signal-handler thread exists.
    let _guardian = if cfg.park { Some(park::spawn_guardian(std::path::Path::new(&cfg.state_file))?) } else { None };

    sched_be::runtime::run_policy(&cfg, shutdown_flag()?, out)
}

fn real_main() -> Result<i32> {
    let cli: Cli = cli::parse();
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
            stats_client::monitor(intv, a.json, shutdown_flag()?)?;
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
