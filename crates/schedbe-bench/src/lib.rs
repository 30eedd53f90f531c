//! `schedbe-bench`: the evaluation harness of the SCHED_BE papers
//! (shared/papers/000-002): an LC server with one thread per connection, an
//! open-loop Poisson client, a BE image-resizing workload, the baseline
//! configurations (EEVDF, cgroup weights, SCHED_IDLE, cpu.idle, SCHED_FIFO)
//! and schedbe, run side by side in one boot with the tracer alongside.
//! See docs/bench.md.
//!
//! Modules, by responsibility:
//! - `sys`: clocks, scheduling policies, affinity
//! - `proc`: helper processes (spawn, wait, stop, logs)
//! - `scx`, `peers`: sched_ext state, loading schedbe or a peer scheduler (scx_bpfland, scx_lavd)
//! - `endpoint`, `proto`: client/server transport and wire format
//! - `spin`: the calibrated CPU burn
//! - `load`: Poisson arrivals, service-time distributions, rate math
//! - `server`, `client`, `be`: the three helper processes (hidden subcommands)
//! - `stats`: histograms, windows, medians and spreads
//! - `configs`, `cgroup`: what each configuration is and how it is applied
//! - `tracer`: running `schedbe trace` and reading its report
//! - `runner`: one configuration, one repetition
//! - `experiment`: srv-bg, weight-sweep, overload, lc-alone
//! - `overhead`: schedbe's cost with no BE against EEVDF and peer schedulers
//!   (perf bench sched, cyclictest, the LC server alone, a C build; BPF time per callback)
//! - `memcached`: `mc-client`, an open-loop memcached load generator
//!   (Poisson gets over a few connections; the Akita experiments' LC load)
//! - `akita_exp`: the Akita paper's experiments (akita-diff: Fig. 4, akita-mc:
//!   Fig. 5, akita-share: Fig. 7, akita-place: Figs. 8/9), VMs as cgroups (libvirt's layout for a real QEMU), `duty`
//! - `park`: park-resume (a parked BE job resumes and answers correctly)
//! - `kube_exp`: the pods of k8s-lc-burst and k8s-lc-guar (paper 001's Kubernetes experiments)
//! - `kubepods`: `pods`, the cgroup tree kubelet and the OCI runtime
//!   write for a spec of pods (both cgroup drivers), emulated without kubelet
//! - `report`: aggregation, markdown summary, CSVs; `pod_report`: the per-pod figures of the Kubernetes experiments
//! - `serverless`: the Azure-shaped serverless workload model for an LLF
//!   policy (`serverless-trace` writes a trace; no runner uses it yet)
//!
//! The helpers are this same binary re-executed (`current_exe() lc-server
//! ...`), so the CLI that parses [`BenchCmd`] must take it as its top-level
//! subcommand, as src/main.rs does. The scheduler is another binary, found by
//! [`scx::resolve_schedbe_bin`].

pub mod akita_exp;
pub mod be;
pub mod bpf_stats;
pub mod cgroup;
pub mod client;
pub mod configs;
pub mod endpoint;
pub mod experiment;
pub mod kube_exp;
pub mod kubepods;
pub mod load;
pub mod memcached;
pub mod overhead;
pub mod park;
pub mod peers;
pub mod pod_report;
pub mod proc;
pub mod proto;
pub mod report;
pub mod runner;
pub mod scripts;
pub mod server;
pub mod serverless;
pub mod spin;
pub mod scx;
pub mod stats;
pub mod sys;
pub mod tracer;

use std::path::PathBuf;

use anyhow::Result;

pub use experiment::{ExpArgs, ExpKind};

/// `schedbe-bench ...`
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCmd {
    /// LC server alone, then BE image resizing starts: LC latency before and
    /// after, per configuration (papers: srv-bg-*). Defaults: weights,
    /// sched-idle, schedbe; 85% load; 20 s + 20 s; 3 repetitions.
    SrvBg(ExpArgs),
    /// srv-bg for LC cgroup weights 10, 100, 1000, 10000 against BE weight 1
    /// (papers: srv-bg-weight-cmp).
    WeightSweep(ExpArgs),
    /// LC demand at 100% of its CPUs: fifo (throttled) vs schedbe (BE
    /// parked); BE keeps running after the client stops (papers: overload-*).
    /// Defaults: fifo, schedbe; util 1.0; 15 s + 15 s + 10 s tail.
    Overload(ExpArgs),
    /// The cost of schedbe without BE: eevdf vs schedbe, LC alone throughout.
    LcAlone(ExpArgs),
    /// Paper 001's "Burstable pods affect Guaranteed pods": an LC server in a
    /// Guaranteed pod (half the node), then a CPU-bound Burstable pod (a
    /// quarter requested, no limit) starts; pods built as kubelet writes
    /// them. Defaults: eevdf, schedbe (cpu.max as quota), schedbe-conc (cpu.max
    /// also as CPUs at once); util 0.5 of service1's limit
    K8sLcBurst(ExpArgs),
    /// Paper 001's "Guaranteed pods affect other Guaranteed pods": as
    /// k8s-lc-burst, with service2 Guaranteed like service1
    K8sLcGuar(ExpArgs),
    /// schedbe's own cost with no BE, against EEVDF and peer sched_ext
    /// schedulers (scx_bpfland, scx_lavd): perf bench sched messaging and
    /// pipe, cyclictest (SCHED_OTHER) under load, the LC server alone at ~60%
    /// and ~85%, a parallel C build; BPF time per callback. 3 repetitions,
    /// configurations interleaved. Peers: scripts/peers.sh
    Overhead(overhead::OverheadArgs),
    /// A BE job serving a client over TCP is parked for minutes by an LC
    /// antagonist, then resumes and answers correctly (papers: parked-kubernetes)
    ParkResume(park::ParkArgs),
    /// Build (apply) or remove (delete) the cgroup tree kubelet and the OCI
    /// runtime write for a TOML spec of pods, with either cgroup driver, and
    /// print each cgroup's cpu.weight and cpu.max (docs/kubernetes.md)
    Pods(kubepods::PodsArgs),
    /// Write a serverless workload (Azure-shaped rates and execution times,
    /// demand bands, latency targets) and its request trace to a directory
    /// (docs/serverless.md)
    ServerlessTrace(serverless::TraceArgs),
    /// Paper 003's experiment: function sandboxes (kubelet pods) serve an
    /// Azure-shaped trace while the load sweeps to overload, under eevdf,
    /// schedbe and llf: latency-target attainment per demand group, context
    /// switches, the agent's overload detection, the floor (docs/serverless.md)
    Serverless(serverless::ServerlessArgs),
    /// The serverless bench's sandbox servers (a helper)
    #[command(hide = true)]
    FnPool(serverless::PoolArgs),
    /// Measure the spin loop's speed here and print it (JSON)
    Calibrate {
        #[arg(long, default_value_t = 11)]
        trials: usize,
        #[arg(long, default_value_t = 50.0)]
        trial_ms: f64,
        /// Policy to calibrate at: normal, batch, idle, fifo:PRIO
        #[arg(long, default_value = "normal")]
        policy: String,
    },
    /// Draw the figures of an output directory again (scripts/plot.py; for
    /// `serverless`, also rewrite its table from serverless.json)
    Plot {
        /// An experiment's output directory (with bench.json, overhead.json or serverless.json)
        dir: PathBuf,
    },
    /// Akita's Fig. 5: a HI memcached VM alone, then next to three LO VMs
    /// (one a real QEMU), on one CPU; eevdf (same pinning) vs akita
    AkitaMc(akita_exp::McArgs),
    /// Akita's Fig. 4: two sysbench VMs (types 2, 3) and two memcached RPC
    /// VMs (types 4, 5) on one CPU; speed follows budget/period, latency the period
    AkitaDiff(akita_exp::DiffArgs),
    /// Akita's Fig. 7: a HI VM's demand steps up next to three CPU-bound LO
    /// VMs; it gets its demand up to C_pes/T, the LO VMs share the rest
    AkitaShare(akita_exp::ShareArgs),
    /// Akita's Figs. 8/9: a HI RPC VM plus a growing number of CPU-bound LO
    /// VMs; RPC p99 and idle VM CPUs, eevdf vs akita (first-fit placement)
    AkitaPlace(akita_exp::PlaceArgs),
    /// Helper: a periodic CPU demand (burn MS per period)
    #[command(hide = true)]
    Duty(akita_exp::DutyArgs),
    /// Open-loop memcached load: Poisson `get`s of uniform keys over a few
    /// connections; latency p50/p99/p99.9 from the intended send times
    McClient(memcached::McClientArgs),
    /// Helper: the LC server
    #[command(hide = true)]
    LcServer(server::ServerArgs),
    /// Helper: the open-loop client
    #[command(hide = true)]
    Client(client::ClientArgs),
    /// Helper: the BE image-resizing workload
    #[command(hide = true)]
    BeWorker(be::BeArgs),
    /// Helper: the park-resume BE job server
    #[command(hide = true)]
    JobServer(park::JobServerArgs),
}

/// Entry point for `schedbe-bench`.
pub fn cli_main(cmd: &BenchCmd) -> Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    let line = argv.join(" ");
    match cmd {
        BenchCmd::SrvBg(a) => experiment::run(ExpKind::SrvBg, a, &line),
        BenchCmd::WeightSweep(a) => experiment::run(ExpKind::WeightSweep, a, &line),
        BenchCmd::Overload(a) => experiment::run(ExpKind::Overload, a, &line),
        BenchCmd::LcAlone(a) => experiment::run(ExpKind::LcAlone, a, &line),
        BenchCmd::K8sLcBurst(a) => experiment::run(ExpKind::K8sLcBurst, a, &line),
        BenchCmd::K8sLcGuar(a) => experiment::run(ExpKind::K8sLcGuar, a, &line),
        BenchCmd::Overhead(a) => overhead::run(a, &line),
        BenchCmd::Calibrate { trials, trial_ms, policy } => {
            if !((1..=1000).contains(trials) && trial_ms.is_finite() && *trial_ms > 0.0 && *trial_ms <= 10_000.0) {
                anyhow::bail!("--trials must be in 1..=1000 and --trial-ms in (0, 10000]");
            }
            policy.parse::<sys::Policy>()?.apply_to_current_thread(false)?;
            let c = spin::calibrate(*trials, *trial_ms);
            eprintln!("{}", c.describe());
            println!("{}", serde_json::to_string_pretty(&c)?);
            Ok(())
        }
        BenchCmd::Plot { dir } if serverless::sweep::is_serverless_dir(dir) => {
            for f in serverless::sweep::replot(dir)? {
                println!("{}", dir.join(f).display());
            }
            Ok(())
        }
        BenchCmd::Plot { dir } => {
            let (figs, json) = if overhead::setup::is_overhead_dir(dir) {
                (overhead::plot(dir)?, overhead::JSON)
            } else {
                (scripts::plot(dir)?, "bench.json")
            };
            experiment::record_figures(dir, json, &figs)?;
            for f in figs {
                println!("{}", dir.join(f).display());
            }
            Ok(())
        }
        BenchCmd::McClient(a) => memcached::cli(a),
        BenchCmd::AkitaMc(a) => akita_exp::mc(a),
        BenchCmd::AkitaShare(a) => akita_exp::share(a),
        BenchCmd::AkitaDiff(a) => akita_exp::diff(a),
        BenchCmd::AkitaPlace(a) => akita_exp::place(a),
        BenchCmd::Duty(a) => akita_exp::duty_main(a),
        BenchCmd::LcServer(a) => server::run(a),
        BenchCmd::Client(a) => client::run(a),
        BenchCmd::BeWorker(a) => be::run(a),
        BenchCmd::ParkResume(a) => park::run(a),
        BenchCmd::Pods(a) => kubepods::cli(a),
        BenchCmd::ServerlessTrace(a) => serverless::run(a),
        BenchCmd::Serverless(a) => serverless::sweep::run(a),
        BenchCmd::FnPool(a) => serverless::pool::run(a),
        BenchCmd::JobServer(a) => park::job_server(a),
    }
}
