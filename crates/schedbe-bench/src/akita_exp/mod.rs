//! The Akita paper's experiments (shared/papers/004, section 4), scaled to
//! the VM: `schedbe-bench akita-diff` (Fig. 4, differentiated service),
//! `akita-mc` (Fig. 5, a HI memcached VM next to LO VMs), `akita-share`
//! (Fig. 7, a HI VM's share intact) and `akita-place` (Figs. 8/9, first-fit
//! placement leaves CPUs idle).
//!
//! Every VM is pinned to one CPU (the last, by default) under both
//! configurations: `eevdf` (no sched_ext scheduler, the kernel's fair class
//! with the same pinning, as the paper compares against KVM/CFS) and `akita`
//! (`schedbe run --policy akita` with the VMs' Table 1 types). The load
//! generator and the harness run on the other CPUs. Configurations are
//! interleaved within each repetition.

mod duty;
mod fig4;
mod fig5;
mod fig7;
mod fig8;
mod vms;

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

pub use duty::{run as duty_main, DutyArgs};
pub use fig4::{run as diff, DiffArgs};
pub use fig5::{run as mc, McArgs};
pub use fig7::{run as share, ShareArgs};
pub use fig8::{run as place, PlaceArgs};

use crate::scx::{self, resolve_schedbe_bin, SchedCmd, Scheduler};

/// A configuration of the Akita experiments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Cfg {
    Eevdf,
    Akita,
}

impl Cfg {
    pub fn name(self) -> &'static str {
        match self {
            Cfg::Eevdf => "eevdf",
            Cfg::Akita => "akita",
        }
    }
}

fn parse_configs(s: &str) -> Result<Vec<Cfg>> {
    let mut out = Vec::new();
    for c in s.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        out.push(match c {
            "eevdf" => Cfg::Eevdf,
            "akita" => Cfg::Akita,
            _ => bail!("unknown configuration {c:?}: expected eevdf or akita"),
        });
    }
    if out.is_empty() {
        bail!("--configs is empty");
    }
    Ok(out)
}

/// Options every Akita experiment takes.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Configurations, comma-separated: eevdf, akita
    #[arg(long, default_value = "eevdf,akita")]
    pub configs: String,
    /// Repetitions (configurations interleaved in each)
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// The CPU every VM is pinned to [default: the last CPU]
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Output directory [default: results/tmp/bench/<experiment>-<UTC time>]
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The schedbe binary to run as the scheduler [default: `schedbe` next to this binary, else on $PATH]
    #[arg(long, env = "SCHEDBE_BIN")]
    pub schedbe_bin: Option<PathBuf>,
    /// Do not draw the figure (scripts/plot_akita.py)
    #[arg(long)]
    pub no_plot: bool,
}

/// What a run of an experiment needs, resolved from CommonArgs.
pub struct Setup {
    pub configs: Vec<Cfg>,
    pub reps: usize,
    /// The CPUs the VMs may use (one, `--cpu`, unless an experiment sets more).
    pub vm_cpus: Vec<usize>,
    pub out: PathBuf,
    pub schedbe: Option<PathBuf>,
    /// This binary, for its helper subcommands.
    pub exe: PathBuf,
    pub nr_cpus: usize,
}

impl Setup {
    pub fn new(a: &CommonArgs, experiment: &str) -> Result<Setup> {
        let configs = parse_configs(&a.configs)?;
        if !(1..=100).contains(&a.reps) {
            bail!("--reps must be in [1, 100], got {}", a.reps);
        }
        let nr_cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        if nr_cpus < 2 {
            bail!("the Akita experiments need 2 CPUs or more (the VMs' CPU and one for the load generator)");
        }
        let cpu = a.cpu.unwrap_or(nr_cpus - 1);
        if cpu >= nr_cpus {
            bail!("--cpu {cpu}: this machine has CPUs 0-{}", nr_cpus - 1);
        }
        let schedbe = resolve_schedbe_bin(a.schedbe_bin.as_deref());
        if configs.contains(&Cfg::Akita) && schedbe.is_none() {
            bail!("configuration akita: {}", scx::NO_SCHEDBE);
        }
        if scx::sched_ext_state().is_none() && configs.contains(&Cfg::Akita) {
            bail!("this kernel has no sched_ext (/sys/kernel/sched_ext missing); run in the VM (scripts/vm.sh)");
        }
        let out = a.out.clone().unwrap_or_else(|| PathBuf::from(format!("results/tmp/bench/{experiment}-{}", crate::experiment::utc_stamp())));
        std::fs::create_dir_all(&out).with_context(|| format!("mkdir {}", out.display()))?;
        let exe = std::env::current_exe().context("cannot find this binary")?;
        Ok(Setup { configs, reps: a.reps, vm_cpus: vec![cpu], out, schedbe, exe, nr_cpus })
    }

    /// The CPUs other than the VMs' (the load generator's).
    pub fn other_cpus(&self) -> Vec<usize> {
        (0..self.nr_cpus).filter(|c| !self.vm_cpus.contains(c)).collect()
    }

    /// Run `body` under `cfg` with the VMs' cgroups fresh and, for akita,
    /// schedbe loaded with their vms.toml; everything is torn down after.
    pub fn with_config<T>(&self, cfg: Cfg, vmset: &[vms::Vm], run_dir: &Path, body: impl FnOnce() -> Result<T>) -> Result<T> {
        std::fs::create_dir_all(run_dir).with_context(|| format!("mkdir {}", run_dir.display()))?;
        vms::make_cgroups(vmset)?;
        let toml = run_dir.join("vms.toml");
        std::fs::write(&toml, vms::vms_toml(vmset, &self.vm_cpus)).with_context(|| format!("write {}", toml.display()))?;
        let loaded = match cfg {
            Cfg::Eevdf => None,
            Cfg::Akita => {
                let args: Vec<String> =
                    ["--policy", "akita", "--vms", &toml.to_string_lossy(), "--stats", "1", "--json"].iter().map(|s| s.to_string()).collect();
                let cmd = SchedCmd::new(Scheduler::Schedbe, self.schedbe.as_deref(), &args, None)?;
                Some(scx::load(&cmd, run_dir, scx::LOAD_TIMEOUT)?)
            }
        };
        let r = body();
        if let Some(l) = loaded {
            for w in l.stop() {
                eprintln!("bench: warning: {w}");
            }
        }
        // the body's processes are gone (Proc kills on drop); give the kernel a moment
        std::thread::sleep(Duration::from_millis(200));
        vms::remove_tree(&Path::new(vms::ROOT).join(vms::BASE));
        r
    }

    /// A helper subcommand of this binary.
    pub fn helper(&self, sub: &str) -> Command {
        crate::proc::helper(&self.exe, sub)
    }

    pub fn plot(&self, no_plot: bool) {
        if no_plot {
            return;
        }
        match crate::scripts::find_script("plot_akita.py") {
            Some(s) => match crate::scripts::run_plot_script(&s, &self.out) {
                Ok(pngs) => pngs.iter().for_each(|p| println!("figure: {p}")),
                Err(e) => eprintln!("bench: warning: no figure: {e:#}"),
            },
            None => eprintln!("bench: warning: scripts/plot_akita.py not found: no figure"),
        }
    }
}

/// Wait until a server listens on 127.0.0.1:`port`.
pub fn wait_port(port: u16, timeout: Duration) -> Result<()> {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("memcached did not listen on 127.0.0.1:{port} within {timeout:?}")
}

/// Start `schedbe-bench mc-client` against 127.0.0.1:`port` on the CPUs the VMs do
/// not use; its JSON goes to `dir/name.json`, read by [`mc_result`].
pub fn mc_client(s: &Setup, port: u16, rate: f64, secs: f64, preload: bool, dir: &Path, name: &str) -> Result<(Child, PathBuf)> {
    let mut c = s.helper("mc-client");
    c.args(["--connect", &format!("127.0.0.1:{port}"), "--rate", &rate.to_string(), "--duration-s", &secs.to_string(), "--json"]);
    if preload {
        c.arg("--preload");
    }
    let set = crate::sys::cpu_set(&s.other_cpus())?;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(move || crate::sys::apply_cpu_set(&set));
    }
    let out = dir.join(format!("{name}.json"));
    let f = std::fs::File::create(&out).with_context(|| format!("create {}", out.display()))?;
    c.stdin(Stdio::null()).stdout(f).stderr(crate::proc::log_file(dir, &format!("{name}.err"))?);
    Ok((c.spawn().context("start the memcached client")?, out))
}

/// Wait for a client [`mc_client`] started: its latency and error count.
pub fn mc_result((mut child, out): (Child, PathBuf)) -> Result<(crate::stats::LatencySummary, u64)> {
    let st = child.wait().context("wait for the memcached client")?;
    if !st.success() {
        bail!("the memcached client failed ({st}); see {}", out.with_extension("err").display());
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out)?).with_context(|| format!("the memcached client's JSON in {}", out.display()))?;
    let lat = serde_json::from_value(v["latency"].clone()).context("the memcached client's latency")?;
    Ok((lat, v["errors"].as_u64().unwrap_or(0)))
}

pub use crate::stats::fmt_spread as med;
