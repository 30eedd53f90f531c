//! `schedbe-bench lc-server`: the latency-critical server. CPU-bound, one
//! worker thread per client connection (the papers' threading model: many
//! more threads than cores), each request burns its service demand with the
//! calibrated spin loop and is answered with the server's timestamps.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::endpoint::{Endpoint, Stream};
use crate::proto::{read_record, Request, Response, REQUEST_LEN};
use crate::spin::{calibrate, iters_for_ns, spin};
use crate::sys::{self, monotonic_ns, thread_cpu_ns, Policy};

#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// Where to listen: tcp:127.0.0.1:PORT, unix:/path or unix:@abstract-name
    #[arg(long, default_value = "unix:@schedbe-bench-lc")]
    pub listen: String,
    /// Spin-loop speed from an earlier calibration (default: calibrate now, at
    /// the server's policy, and report it)
    #[arg(long)]
    pub iters_per_us: Option<f64>,
    /// Scheduling policy of every server thread: normal, batch, idle, fifo:PRIO
    #[arg(long, default_value = "normal")]
    pub policy: String,
    /// Join this cgroup (v2 directory) before starting any thread
    #[arg(long)]
    pub cgroup: Option<PathBuf>,
    /// Restrict the server to these CPUs (e.g. 0-1)
    #[arg(long)]
    pub cpus: Option<String>,
    /// Refuse connections beyond this many (each gets a thread)
    #[arg(long, default_value_t = 1024)]
    pub max_conns: usize,
    /// What a request's demand means: cpu-time (burn until the thread has used
    /// that much CPU time, checked every ~50 us of spinning) or iterations (a
    /// fixed number of spin iterations from the calibration)
    #[arg(long, default_value = "cpu-time")]
    pub burn: String,
}

/// How a worker turns a service demand into CPU work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Burn {
    /// Spin until the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) has grown by
    /// the demand: the LC load is exactly the requested CPU time, whatever
    /// the environment charges to the thread (interrupts, context switches,
    /// tracing under emulation).
    CpuTime,
    /// A fixed amount of work: demand x calibrated iterations per us.
    Iterations,
}

impl std::str::FromStr for Burn {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "cpu-time" => Ok(Burn::CpuTime),
            "iterations" => Ok(Burn::Iterations),
            _ => anyhow::bail!("--burn {s:?}: expected cpu-time or iterations"),
        }
    }
}

/// Spin between CPU-time checks (a clock_gettime syscall each).
const CHECK_NS: u64 = 50_000;

/// Burn `service_ns` as `burn` says. Returns the thread CPU time used.
pub fn burn(service_ns: u64, iters_per_us: f64, how: Burn) -> u64 {
    let c0 = thread_cpu_ns();
    match how {
        Burn::Iterations => {
            spin(iters_for_ns(service_ns, iters_per_us));
        }
        Burn::CpuTime => {
            let target = c0 + service_ns;
            loop {
                let now = thread_cpu_ns();
                if now >= target {
                    break;
                }
                spin(iters_for_ns((target - now).min(CHECK_NS), iters_per_us).max(1));
            }
        }
    }
    thread_cpu_ns().saturating_sub(c0)
}

/// Move the calling process into a cgroup v2 directory.
pub fn join_cgroup(dir: &std::path::Path) -> Result<()> {
    let procs = dir.join("cgroup.procs");
    std::fs::write(&procs, std::process::id().to_string())
        .with_context(|| format!("join cgroup: write {}", procs.display()))
}

pub fn run(a: &ServerArgs) -> Result<()> {
    let ep: Endpoint = a.listen.parse()?;
    let policy: Policy = a.policy.parse()?;
    let how: Burn = a.burn.parse()?;
    if let Some(cg) = &a.cgroup {
        join_cgroup(cg)?;
    }
    if let Some(c) = &a.cpus {
        sys::set_affinity(&sys::parse_cpu_list(c)?)?;
    }
    policy.apply_to_current_thread(false).context("lc-server policy")?;
    let ipu = match a.iters_per_us {
        Some(v) if v.is_finite() && v > 0.0 => v,
        Some(v) => anyhow::bail!("--iters-per-us must be positive, got {v}"),
        None => {
            let c = calibrate(7, 50.0);
            eprintln!("lc-server: {}", c.describe());
            c.iters_per_us
        }
    };
    let listener = ep.bind()?;
    eprintln!(
        "lc-server: pid {} listening on {ep}; {} threads ({}); {ipu:.1} spin iterations/us; burn {how:?}",
        std::process::id(),
        policy,
        sys::current_policy_desc()
    );
    let mut n = 0usize;
    loop {
        let stream = match listener.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("accept"),
        };
        if n >= a.max_conns {
            eprintln!("lc-server: refusing connection {n}: --max-conns {}", a.max_conns);
            continue;
        }
        let name = format!("lc-worker-{n}");
        n += 1;
        std::thread::Builder::new()
            .name(name.clone())
            .stack_size(256 << 10)
            .spawn(move || {
                if let Err(e) = policy.apply_to_current_thread(false) {
                    eprintln!("lc-server: {name}: {e:#}");
                }
                if let Err(e) = serve(stream, ipu, how) {
                    eprintln!("lc-server: {name}: {e:#}");
                }
            })
            .context("spawn worker thread")?;
    }
}

/// One connection: requests are served in order, one at a time.
fn serve(mut s: Stream, iters_per_us: f64, how: Burn) -> Result<()> {
    let mut out = s.try_clone()?;
    while let Some(b) = read_record::<REQUEST_LEN>(&mut s)? {
        let req = Request::decode(&b);
        let start_ns = monotonic_ns();
        let cpu_ns = burn(req.service_ns, iters_per_us, how);
        let end_ns = monotonic_ns();
        let resp = Response { req, start_ns, end_ns, cpu_ns };
        out.write_all(&resp.encode()).context("write response")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burn_modes() {
        assert_eq!("cpu-time".parse::<Burn>().unwrap(), Burn::CpuTime);
        assert!("x".parse::<Burn>().is_err());
        // A wildly wrong calibration still burns the requested CPU time.
        let used = burn(5_000_000, 1.0, Burn::CpuTime);
        assert!((5_000_000..50_000_000).contains(&used), "{used}");
    }
}
