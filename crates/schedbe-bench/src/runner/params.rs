//! What a run is given (RunParams, the same for every run of an experiment)
//! and what it gives back (RunOutcome, with its Window and LatencyParts).

use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::be::BeSummary;
use crate::client::{ClientSummary, Record};
use crate::load::ServiceDist;
use crate::stats::LatencySummary;
use crate::tracer::{TraceFigures, TracerSpec};

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
    fn trace_modes() {
        assert_eq!("both".parse::<TraceMode>().unwrap(), TraceMode::Both);
        assert!("x".parse::<TraceMode>().is_err());
    }
}
