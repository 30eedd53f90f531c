//! `schedbe agent`: the core of paper 003's contention-aware host agent. It
//! reads the node's CPU pressure and run queue and each function sandbox's
//! CPU usage, keeps a decaying load per sandbox, detects overload, names the
//! hotspot sandboxes and suggests CPUs or replicas for them, and publishes
//! all of it as JSON lines or Prometheus text. It only reads: /proc (or
//! `--proc-root`) and the cgroup tree (or `--cgroup-root`, e.g. a fake tree),
//! so it runs unprivileged. It is not part of `schedbe run`.
//!
//! - `psi`: parsing PSI, cpu.stat, /proc/stat, /proc/loadavg
//! - `reading`: what is read from each sandbox
//! - `hotspot`: overload with hysteresis, hotspots, suggestions
//! - `files`: the kernel files read each sample, kept open
//! - `publish`: JSON lines and the Prometheus text format
//!
//! The sandboxes and their decaying loads (~4 s horizon) are crate::sandbox's,
//! which the LLF policy uses too.

mod files;
pub mod hotspot;
pub mod psi;
pub mod publish;
mod reading;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use schedbe_cgroup::PathPatterns;

use hotspot::{Detector, NodeSignals, SandboxLoad, Thresholds};
use publish::{NodeReport, Report, SandboxReport};
use crate::sandbox::discover;
use crate::sandbox::load::{LoadTracker, Sample};

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Prometheus,
}

#[derive(clap::Args, Debug, Clone)]
pub struct AgentArgs {
    /// Sample twice, one interval apart, print one report and exit
    #[arg(long)]
    pub once: bool,
    /// The cgroup v2 tree to read (a fake tree works)
    #[arg(long, default_value = schedbe_cgroup::CGROUP_ROOT)]
    pub cgroup_root: PathBuf,
    /// Where pressure/cpu, stat and loadavg are read from
    #[arg(long, default_value = "/proc")]
    pub proc_root: PathBuf,
    /// Sandbox cgroup pattern, a glob relative to the cgroup root (repeatable) [default: every kubelet pod, both drivers]
    #[arg(long = "sandbox")]
    pub sandboxes: Vec<String>,
    /// Seconds between samples
    #[arg(long, default_value_t = 1.0)]
    pub interval_s: f64,
    /// Half-life of the decaying load, seconds (1 s: a ~4 s horizon)
    #[arg(long, default_value_t = 1.0)]
    pub half_life_s: f64,
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
    /// Overload needs PSI cpu some at or above this, percent of the interval
    /// (from its total= counter), with --enter-busy, for 2 intervals in a row
    #[arg(long, default_value_t = 50.0)]
    pub enter_psi: f64,
    /// Overload ends after 3 intervals with PSI cpu some below this, percent, or the CPUs below --exit-busy
    #[arg(long, default_value_t = 25.0)]
    pub exit_psi: f64,
    /// Overload needs the CPUs busy at least this share of the interval
    #[arg(long, default_value_t = 0.9)]
    pub enter_busy: f64,
    /// Overload ends below this busy share (see --exit-psi)
    #[arg(long, default_value_t = 0.8)]
    pub exit_busy: f64,
    /// Utilisation the node and a scaled hotspot should run at
    #[arg(long, default_value_t = 0.8)]
    pub target_util: f64,
    /// CPUs of one replica of a sandbox without cpu.max
    #[arg(long, default_value_t = 1.0)]
    pub replica_cpus: f64,
}

/// The agent's state between samples.
pub struct Agent {
    cgroup_root: PathBuf,
    proc_root: PathBuf,
    patterns: PathPatterns,
    loads: LoadTracker,
    detector: Detector,
    /// Whether "no sandbox matches" was said (once, until one appears).
    said_empty: bool,
    /// The files read each sample, kept open where that is safe.
    files: files::Files,
}

impl Agent {
    pub fn new(a: &AgentArgs) -> Result<Self> {
        if !(a.half_life_s.is_finite() && a.half_life_s > 0.0) {
            bail!("--half-life-s must be a positive number of seconds, got {}", a.half_life_s);
        }
        let th = Thresholds {
            enter_psi: a.enter_psi,
            exit_psi: a.exit_psi,
            enter_busy: a.enter_busy,
            exit_busy: a.exit_busy,
            target_util: a.target_util,
            replica_cpus: a.replica_cpus,
            ..Thresholds::default()
        };
        let loads = LoadTracker::new(Duration::from_secs_f64(a.half_life_s.min(3600.0)))?;
        Ok(Self {
            cgroup_root: a.cgroup_root.clone(),
            proc_root: a.proc_root.clone(),
            patterns: discover::patterns(&a.sandboxes)?,
            detector: Detector::new(th, loads.half_life_s())?,
            loads,
            said_empty: false,
            files: files::Files::new(),
        })
    }

    /// Read everything once at monotonic time `t_ns` and assess the node.
    /// A sandbox that cannot be read (it may have just gone away) is left
    /// out of this sample; a node whose signals cannot be read is an error.
    pub fn sample(&mut self, t_ns: u64) -> Result<Report> {
        self.files.begin_sample();
        let (pressure, rq) = psi::node(&mut self.files, &self.proc_root)?;
        let boxes = discover::discover(&self.cgroup_root, &self.patterns)?;
        if boxes.is_empty() && !self.said_empty {
            eprintln!(
                "schedbe agent: warning: no cgroup under {} matches the sandbox patterns ({}): no loads or hotspots until one appears",
                self.cgroup_root.display(),
                self.patterns.patterns().join(", ")
            );
        }
        self.said_empty = boxes.is_empty();
        let read: Vec<_> =
            boxes.into_iter().filter_map(|b| reading::read(&mut self.files, &self.cgroup_root, &b).ok().map(|r| (b, r))).collect();
        let samples: Vec<Sample> =
            read.iter().map(|(b, r)| Sample { rel: b.cgroup.rel.clone(), id: b.cgroup.id, usage_us: r.usage_us }).collect();
        let loads = self.loads.update(t_ns, &samples);
        let signals = NodeSignals {
            t_ns,
            psi_some_total_us: pressure.some.total_us,
            cpu_ticks: rq.cpu_ticks,
            runnable: rq.runnable,
            cpus: rq.cpus,
        };
        let overloaded = self.detector.step(&signals);
        let sl: Vec<SandboxLoad> = read
            .iter()
            .zip(&loads)
            .map(|((b, r), l)| SandboxLoad { rel: b.cgroup.rel.clone(), load: l.unwrap_or(0.0), limit_cpus: r.limit_cpus })
            .collect();
        let runnable_avg = self.detector.runnable_avg();
        let assessment = hotspot::assess(self.detector.thresholds(), overloaded, rq.cpus, runnable_avg, &sl);
        let sandboxes = read
            .into_iter()
            .zip(loads)
            .map(|((b, r), load_cpus)| SandboxReport {
                suggestion: assessment.hotspots.iter().find(|h| h.rel == b.cgroup.rel).map(|h| h.suggestion.clone()),
                cgroup: b.cgroup.rel,
                pod: b.pod,
                load_cpus,
                usage_us: r.usage_us,
                limit_cpus: r.limit_cpus,
                psi_some_avg10: r.pressure.map(|p| p.some.avg10),
            })
            .collect();
        let node = NodeReport {
            t_s: t_ns as f64 * 1e-9,
            cpus: rq.cpus,
            psi_some_avg10: pressure.some.avg10,
            rates: self.detector.rates(),
            runnable_avg,
            assessment,
        };
        Ok(Report { node, sandboxes })
    }
}

/// The first tick of the schedule `prev + k * interval` (k >= 1) not yet past at `now`.
fn next_tick(prev: Instant, interval: Duration, now: Instant) -> Instant {
    let next = prev + interval;
    if next > now {
        return next;
    }
    let behind = now.duration_since(next).as_nanos() / interval.as_nanos().max(1);
    next + interval * (behind.min(u128::from(u32::MAX - 1)) as u32 + 1)
}

fn render(r: &Report, f: Format) -> Result<String> {
    Ok(match f {
        Format::Json => publish::json_lines(r)?,
        Format::Prometheus => publish::prometheus(r),
    })
}

/// `schedbe agent`: with --once one report after two samples, otherwise a
/// report per interval (from the second sample on) until `stop` is set.
pub fn run(a: &AgentArgs, stop: Option<Arc<AtomicBool>>) -> Result<()> {
    if !(a.interval_s.is_finite() && a.interval_s >= 0.001 && a.interval_s <= 3600.0) {
        bail!("--interval-s must be in [0.001, 3600], got {}", a.interval_s);
    }
    let interval = Duration::from_secs_f64(a.interval_s);
    let mut agent = Agent::new(a)?;
    let start = Instant::now();
    let now = || start.elapsed().as_nanos() as u64;
    agent.sample(now())?;
    let mut next = start;
    loop {
        // Samples on a fixed schedule, not an interval after the last one
        // ended: reading the tree takes time (most under overload, when the
        // reports matter), and that must not stretch every period. A tick
        // missed altogether is skipped, not caught up in a burst.
        next = next_tick(next, interval, Instant::now());
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let r = agent.sample(now())?;
        print!("{}", render(&r, a.format)?);
        if a.once || stop.as_ref().is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::path::Path;
    use crate::testtree::TempTree;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: AgentArgs,
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn ticks_keep_their_schedule_and_skip_what_was_missed() {
        let (t0, i) = (Instant::now(), Duration::from_millis(1000));
        let ms = |n: u64| Duration::from_millis(n);
        // on time: the next tick
        assert_eq!(next_tick(t0, i, t0 + ms(300)), t0 + ms(1000));
        // a sample that overran one tick: the one after, not now
        assert_eq!(next_tick(t0, i, t0 + ms(1000)), t0 + ms(2000));
        assert_eq!(next_tick(t0, i, t0 + ms(1400)), t0 + ms(2000));
        assert_eq!(next_tick(t0, i, t0 + ms(3500)), t0 + ms(4000));
    }

    /// PSI some's total (µs), the CPUs' busy and all ticks, runnable tasks.
    fn proc_files(t: &TempTree, psi_total_us: u64, busy: u64, all: u64, runnable: u64) {
        t.write(Path::new("proc/pressure/cpu"), &format!("some avg10=0.00 avg60=0.00 avg300=0.00 total={psi_total_us}\n"));
        let idle = all - busy;
        t.write(Path::new("proc/stat"), &format!("cpu {busy} 0 0 {idle}\ncpu0 1\ncpu1 1\ncpu2 1\ncpu3 1\nprocs_running {runnable}\n"));
    }

    #[test]
    fn a_fake_node_overloads_and_names_its_hotspot() {
        let t = TempTree::new("agent");
        let (root, proc) = (t.root().join("cg"), t.root().join("proc"));
        let a = Cli::try_parse_from(["x", "--cgroup-root", root.to_str().unwrap(), "--proc-root", proc.to_str().unwrap()]).unwrap().a;
        let hot = "cg/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda_1.slice";
        let cold = "cg/kubepods.slice/kubepods-pods_2.slice";
        proc_files(&t, 0, 0, 0, 4);
        t.write(&Path::new(hot).join("cpu.stat"), "usage_usec 0\n");
        t.write(&Path::new(cold).join("cpu.stat"), "usage_usec 0\n");
        let mut ag = Agent::new(&a).unwrap();
        let r = ag.sample(0).unwrap();
        assert!(!r.node.assessment.overloaded && r.sandboxes.iter().all(|s| s.load_cpus.is_none()));
        // Each second: the hot pod uses 3 CPUs, the cold one 0.5; 8 runnable;
        // some task waited 0.7 s of it (PSI some 70%); the CPUs were 95% busy.
        let mut last = None;
        for k in 1..=2u64 {
            proc_files(&t, k * 700_000, k * 95, k * 100, 8);
            t.write(&Path::new(hot).join("cpu.stat"), &format!("usage_usec {}\n", k * 3_000_000));
            t.write(&Path::new(cold).join("cpu.stat"), &format!("usage_usec {}\n", k * 500_000));
            let r = ag.sample(k * S).unwrap();
            assert_eq!(r.node.rates, hotspot::Rates { psi_some_pct: Some(70.0), busy: Some(0.95) });
            // Overloaded after two such intervals, not one.
            assert_eq!(r.node.assessment.overloaded, k == 2);
            last = Some(r);
        }
        let r = last.unwrap();
        let n = &r.node;
        // Runnable 4 -> 8 -> 8 smooths to 6 then 7 = D; U = 3.5, rho = 2; E = 7 - 3.2 = 3.8.
        assert!(n.assessment.overloaded && (n.runnable_avg - 7.0).abs() < 1e-9, "{n:?}");
        assert!((n.assessment.excess_cpus - 3.8).abs() < 1e-9);
        assert_eq!(r.sandboxes.len(), 2);
        let h = r.sandboxes.iter().find(|s| s.suggestion.is_some()).unwrap();
        assert_eq!((h.pod.as_str(), h.load_cpus), ("a-1", Some(3.0)));
        // Its demand 3 x 2 = 6 CPUs covers the excess alone: 7.5 CPUs at 80%, 8 replicas.
        let sug = h.suggestion.as_ref().unwrap();
        assert_eq!((sug.cpus, sug.replicas), (7.5, 8));
        assert_eq!(r.sandboxes.iter().filter(|s| s.suggestion.is_some()).count(), 1);
        let text = render(&r, Format::Prometheus).unwrap();
        assert!(text.contains("pod=\"a-1\"} 3\n"), "{text}");
        assert_eq!(render(&r, Format::Json).unwrap().lines().count(), 3);
        // A missing /proc file is an error that names it.
        std::fs::remove_file(proc.join("pressure/cpu")).unwrap();
        assert!(format!("{:#}", ag.sample(3 * S).unwrap_err()).contains("pressure/cpu"));
    }
}
