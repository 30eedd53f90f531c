//! `schedbe bench lc-server`: the latency-critical server. CPU-bound, one
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
        "lc-server: pid {} listening on {ep}; {} threads ({}); {ipu:.1} spin iterations/us",
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
                if let Err(e) = serve(stream, ipu) {
                    eprintln!("lc-server: {name}: {e:#}");
                }
            })
            .context("spawn worker thread")?;
    }
}

/// One connection: requests are served in order, one at a time.
fn serve(mut s: Stream, iters_per_us: f64) -> Result<()> {
    let mut out = s.try_clone()?;
    while let Some(b) = read_record::<REQUEST_LEN>(&mut s)? {
        let req = Request::decode(&b);
        let start_ns = monotonic_ns();
        let c0 = thread_cpu_ns();
        spin(iters_for_ns(req.service_ns, iters_per_us));
        let cpu_ns = thread_cpu_ns().saturating_sub(c0);
        let end_ns = monotonic_ns();
        let resp = Response { req, start_ns, end_ns, cpu_ns };
        out.write_all(&resp.encode()).context("write response")?;
    }
    Ok(())
}
