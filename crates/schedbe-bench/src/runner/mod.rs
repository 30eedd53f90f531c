//! One run: one configuration, one repetition. Starts the helpers (re-exec
//! of this binary: `schedbe-bench lc-server`, `schedbe-bench client`, `schedbe-bench be-worker`),
//! `schedbe run` and `schedbe trace` on the experiment's timeline, stops
//! them, and turns their records into figures.
//!
//! Timeline (t0 = the client's first intended send):
//!   [t0, t0+lc_alone)               LC alone   ("before": from t0+warmup)
//!   [t0+lc_alone, +be_secs)         LC + BE    ("after": from BE start+settle)
//!   then the client stops sending, waits for outstanding answers (drain),
//!   and BE keeps running `tail` seconds more (overload).
//! The tracer covers most of each phase (`--trace both`) so that tracing
//! overhead is the same before and after.
//!
//! params.rs: what a run is given and gives back; figures.rs: its records
//! turned into figures.

mod figures;
mod params;

pub use figures::compute_figures;
#[cfg(test)]
pub use params::tests_params;
pub use params::{LatencyParts, RunOutcome, RunParams, TraceMode, Window};

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::be::read_times;
use crate::cgroup::Cgroups;
use crate::client::read_records;
use crate::configs::{Config, Plan};
use crate::proc::{child_setup, log_file, log_pair, Proc};
use crate::scx::{self, sched_ext_state, SchedCmd};
use crate::sys::{self, monotonic_ns, secs_ns, sleep_until_ns};
use crate::tracer::{finish_tracer, start_tracer, TRACER_STARTUP_NS, TRACE_MARGIN_NS};

fn start_be(p: &RunParams, plan: &Plan, be_cg: Option<&Path>, dir: &Path) -> Result<Proc> {
    let mut c = crate::proc::helper(&p.exe, "be-worker");
    c.arg("--threads")
        .arg(p.be_threads.to_string())
        .arg("--policy")
        .arg(plan.be_policy.to_string())
        .arg("--src")
        .arg(&p.be_src)
        .arg("--dst")
        .arg(&p.be_dst)
        .arg("--simd")
        .arg(&p.be_simd)
        .arg("--duration")
        .arg(format!("{}", p.be_secs + p.tail_secs + p.drain_timeout_secs + 120.0))
        .arg("--out")
        .arg(dir.join("be-iterations.csv"))
        .arg("--summary")
        .arg(dir.join("be.json"));
    if let Some(cg) = be_cg {
        c.arg("--cgroup").arg(cg);
    }
    if let Some(cpus) = &p.cpus {
        c.arg("--cpus").arg(sys::format_cpu_list(cpus));
    }
    c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log_file(dir, "be.log")?);
    child_setup(&mut c, libc::SIGKILL, None);
    Proc::spawn("be-worker", &mut c)
}

/// A run starts only when the spin loop runs at least this fraction of its
/// calibrated speed (else it waits), and is repeated when the speed is below
/// it after the run.
pub const QUIET_SPEED: f64 = 0.9;

/// The spin loop's speed now, relative to the calibration.
pub fn speed_now(p: &RunParams) -> f64 {
    crate::spin::calibrate(5, 20.0).iters_per_us / p.iters_per_us
}

/// Wait (up to `max`) until the spin loop runs at `min` of its calibrated
/// speed; returns the last speed measured.
pub fn wait_for_speed(p: &RunParams, min: f64, max: Duration) -> f64 {
    let deadline = monotonic_ns() + max.as_nanos() as u64;
    let mut said = false;
    loop {
        let s = speed_now(p);
        if s >= min || monotonic_ns() >= deadline {
            return s;
        }
        if !said {
            eprintln!("bench: the machine is busy (spin loop at {:.0}% of its calibrated speed); waiting up to {:.0} s", 100.0 * s, max.as_secs_f64());
            said = true;
        }
        std::thread::sleep(Duration::from_secs(3));
    }
}

/// Run one configuration once. Errors that make the run meaningless are
/// returned in `RunOutcome::error` (the experiment goes on with the others).
pub fn run_one(p: &RunParams, cfg: &Config, rep: usize, run_idx: usize, cgroups: Option<&Cgroups>, out_dir: &Path) -> RunOutcome {
    let raw_rel = format!("raw/{}-r{}", cfg.name, rep + 1);
    let dir = out_dir.join(&raw_rel);
    let mut o = RunOutcome { config: cfg.name.clone(), rep, seed: p.base_seed + rep as u64, raw_dir: raw_rel, ..Default::default() };
    if let Err(e) = std::fs::create_dir_all(&dir).with_context(|| format!("mkdir {}", dir.display())).and_then(|_| run_inner(p, cfg, run_idx, cgroups, &dir, &mut o)) {
        o.ok = false;
        o.error = Some(format!("{e:#}"));
        return o;
    }
    o.ok = true;
    o
}

fn run_inner(p: &RunParams, cfg: &Config, run_idx: usize, cgroups: Option<&Cgroups>, dir: &Path, o: &mut RunOutcome) -> Result<()> {
    let mut plan: Plan = cfg.plan(p.lc_fifo_prio);
    if p.pods.is_some() {
        // service2 runs under every configuration, as the pods' load.
        (plan.has_be, plan.be_policy) = (true, crate::sys::Policy::Normal);
    }
    let has_be = plan.has_be && p.with_be;
    let tag = format!("[{} r{}]", cfg.name, o.rep + 1);
    let say = |msg: &str| eprintln!("bench: {tag} {msg}");

    // Has the machine's speed drifted since the calibration? (Same thread,
    // same policy as the calibration: this orchestrator.) Wait a while for
    // a busy host (e.g. a build next to the VM) to calm down.
    let speed = wait_for_speed(p, QUIET_SPEED, Duration::from_secs(180));
    o.speed_vs_calibration = Some(speed);
    if !(0.8..=1.25).contains(&speed) {
        o.warnings.push(format!(
            "spin loop runs at {:.0}% of its calibrated speed just before this run: the machine (or the VM's host) is busier or idler than at calibration",
            100.0 * speed
        ));
    }

    // cgroups
    let (lc_cg, be_cg) = match (cgroups, &p.pods) {
        (_, Some(pods)) => (Some(pods.service1_container.clone()), Some(pods.service2_container.clone())),
        (Some(cg), None) => {
            if plan.needs_cpu_controller && !cg.cpu_controller {
                bail!("configuration {} needs the cgroup v2 cpu controller, which is not available", cfg.name);
            }
            let lc = cg.fresh(plan.lc_cgroup)?;
            let be = if plan.be_cgroup != plan.lc_cgroup { cg.fresh(plan.be_cgroup)? } else { lc.clone() };
            if let Some(w) = plan.lc_weight {
                cg.set(plan.lc_cgroup, "cpu.weight", &w.to_string())?;
            }
            if has_be || plan.be_cgroup != plan.lc_cgroup {
                if let Some(w) = plan.be_weight {
                    cg.set(plan.be_cgroup, "cpu.weight", &w.to_string())?;
                }
                if plan.be_cpu_idle {
                    cg.set(plan.be_cgroup, "cpu.idle", "1")?;
                }
            }
            (Some(lc), Some(be))
        }
        (None, None) => {
            if plan.needs_cpu_controller {
                bail!("configuration {} needs cgroup v2 (weights / cpu.idle); not available here", cfg.name);
            }
            (None, None)
        }
    };

    // the sched_ext scheduler, if any
    let state0 = sched_ext_state();
    let mut sched = None;
    if let Some(s) = plan.scheduler {
        let args: Vec<String> = p.schedbe_args.iter().cloned().chain(plan.sched_args.iter().map(|a| a.to_string())).collect();
        let cmd = SchedCmd::new(s, p.schedbe_bin.as_deref(), &args, p.peers_dir.as_deref()).with_context(|| format!("configuration {}", cfg.name))?;
        say(&format!("starting {}", s.name()));
        sched = Some(scx::load(&cmd, dir, scx::LOAD_TIMEOUT).with_context(|| format!("configuration {}", cfg.name))?);
    } else if matches!(state0.as_deref(), Some(s) if s != "disabled") {
        o.warnings.push(format!("a sched_ext scheduler is {:?} during configuration {} (which loads none)", state0, cfg.name));
    }
    o.sched_ext_state = sched_ext_state();

    // server
    let ep = match p.transport.as_str() {
        "tcp" => format!("tcp:127.0.0.1:{}", 20_000 + (std::process::id() as usize * 7 + run_idx) % 40_000),
        _ => format!("unix:@schedbe-bench-{}-{run_idx}", std::process::id()),
    };
    let mut c = crate::proc::helper(&p.exe, "lc-server");
    c.arg("--listen").arg(&ep).arg("--iters-per-us").arg(format!("{}", p.iters_per_us)).arg("--policy").arg(plan.lc_policy.to_string()).arg("--burn").arg(&p.burn);
    if let Some(cg) = &lc_cg {
        c.arg("--cgroup").arg(cg);
    }
    if let Some(cpus) = &p.cpus {
        c.arg("--cpus").arg(sys::format_cpu_list(cpus));
    }
    let (so, se) = log_pair(dir, "server.log")?;
    c.stdin(Stdio::null()).stdout(so).stderr(se);
    child_setup(&mut c, libc::SIGKILL, None);
    let mut server = Proc::spawn("lc-server", &mut c)?;

    // client; the tracers load before t0 (see start_tracer)
    let lead = if p.trace == TraceMode::Off { 1_000_000_000 } else { 1_000_000_000 + TRACER_STARTUP_NS.load(Ordering::Relaxed) + TRACE_MARGIN_NS };
    let t0 = monotonic_ns() + lead;
    let be_start = t0 + secs_ns(p.lc_alone_secs);
    let send_end = be_start + secs_ns(p.be_secs);
    o.t0_ns = t0;
    o.send_end_ns = send_end;
    let mut c = crate::proc::helper(&p.exe, "client");
    c.arg("--connect")
        .arg(&ep)
        .arg("--conns")
        .arg(p.conns.to_string())
        .arg("--util")
        .arg(p.util.to_string())
        .arg("--server-cpus")
        .arg(p.ncpus.to_string())
        .arg("--service")
        .arg(p.service.to_string())
        .arg("--duration")
        .arg(format!("{}", p.lc_alone_secs + p.be_secs))
        .arg("--start-at-ns")
        .arg(t0.to_string())
        .arg("--seed")
        .arg(o.seed.to_string())
        .arg("--repeat-every-secs")
        .arg(p.repeat_arrivals_secs.to_string())
        .arg("--records")
        .arg(dir.join("requests.csv"))
        .arg("--summary")
        .arg(dir.join("client.json"))
        .arg("--rt-prio")
        .arg(p.client_rt_prio.to_string())
        .arg("--drain-timeout")
        .arg(p.drain_timeout_secs.to_string())
        .arg("--progress-secs")
        .arg(p.progress_secs.to_string())
        .arg("--label")
        .arg(format!("bench: {tag} client"))
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Some(cc) = &p.client_cpus {
        c.arg("--cpus").arg(cc);
    }
    child_setup(&mut c, libc::SIGKILL, None);
    let mut client = Proc::spawn("client", &mut c)?;
    let pods_at = |when: u64| {
        sleep_until_ns(when);
        p.pods.as_ref().and_then(crate::kube_exp::snapshot)
    };

    say(&format!(
        "{}: {} alone {:.0} s, then {} {:.0} s (util {:.2}, {} conns, service {})",
        if p.pods.is_some() { cfg.name.clone() } else { cfg.describe() },
        if p.pods.is_some() { "service1" } else { "LC" },
        p.lc_alone_secs,
        match (has_be, p.pods.is_some()) {
            (_, true) => "service1 + service2",
            (true, false) => "LC + BE",
            (false, false) => "LC (no BE)",
        },
        p.be_secs,
        p.util,
        p.conns,
        p.service
    ));

    // Tracers: launched now, tracing from the start of each measurement window.
    let lc_from = t0 + secs_ns(p.warmup_secs);
    let be_from = be_start + secs_ns(p.settle_secs);
    let tr_lc = if p.trace == TraceMode::Both { start_tracer(&p.tracer(), dir, "lc", lc_from, be_start, &mut o.warnings) } else { None };
    let tr_be = if p.trace != TraceMode::Off { start_tracer(&p.tracer(), dir, "be", be_from, send_end, &mut o.warnings) } else { None };
    let mut be = None;
    let stat_t0 = if p.pods.is_some() { pods_at(t0) } else { None };
    let bpf_window = match (p.bpf_stats, sched.as_ref()) {
        (true, Some(s)) => {
            sleep_until_ns(lc_from);
            Some(crate::bpf_stats::Window::open(s.pid()))
        }
        _ => None,
    };
    sleep_until_ns(be_start);
    // the pods' snapshot first: it marks the phase boundary, and BE starts right after
    let stat_be = if p.pods.is_some() { pods_at(be_start) } else { None };
    match bpf_window.map(|w| w.and_then(|w| w.close())) {
        Some(Ok(c)) => o.bpf_lc_phase = Some(c),
        Some(Err(e)) => o.warnings.push(format!("BPF stats: {e:#}")),
        None => {}
    }
    if has_be {
        be = Some(start_be(p, &plan, be_cg.as_deref(), dir)?);
        o.be_start_ns = Some(monotonic_ns());
        let what = if p.pods.is_some() { "service2" } else { "BE" };
        say(&format!("{what} started ({} threads, policy {})", p.be_threads, plan.be_policy));
    } else {
        o.be_start_ns = Some(be_start);
        say("second phase (no BE in this configuration)");
    }
    let tr_lc_fig = finish_tracer(tr_lc, "lc", dir, &mut o.warnings);

    // client end (it drains outstanding requests itself)
    let client_budget = Duration::from_secs_f64((send_end.saturating_sub(monotonic_ns())) as f64 / 1e9 + p.drain_timeout_secs + 60.0);
    let st = client.wait_timeout(client_budget)?;
    if let (Some(a), Some(b), Some(c)) = (stat_t0, stat_be, if p.pods.is_some() { pods_at(0) } else { None }) {
        o.pods_cpu_stat = Some(crate::kube_exp::PodsCpuStat { service1_before: b.0.since(&a.0), service1_after: c.0.since(&b.0), service2_after: c.1.since(&b.1) });
    }
    let tr_be_fig = finish_tracer(tr_be, "be", dir, &mut o.warnings);
    match st {
        Some(st) if st.success() => {}
        Some(st) => o.warnings.push(format!("client exited with {st}")),
        None => {
            client.stop(libc::SIGKILL, Duration::from_secs(1));
            o.warnings.push("client did not finish in time; killed".into());
        }
    }
    if p.tail_secs > 0.0 && be.is_some() {
        say(&format!("client done; BE keeps running {:.0} s", p.tail_secs));
        std::thread::sleep(Duration::from_secs_f64(p.tail_secs));
    }
    if let Some(b) = be.as_mut() {
        let (st, killed) = b.stop(libc::SIGTERM, Duration::from_secs(30));
        if killed {
            o.warnings.push("BE worker did not stop on SIGTERM within 30 s; killed (its iterations are lost)".into());
        } else if let Some(st) = st {
            if !st.success() {
                o.warnings.push(format!("BE worker exited with {st}"));
            }
        }
    }
    server.stop(libc::SIGTERM, Duration::from_secs(5));
    if let Some(s) = sched.take() {
        o.warnings.extend(s.stop());
    }
    let _ = server.pid();
    if let Some(t) = &tr_lc_fig {
        if t.window_end_ns > be_start {
            o.warnings.push(format!("trace lc: window ran {:.2} s into the BE phase (slow tracer start)", (t.window_end_ns - be_start) as f64 / 1e9));
        }
    }
    if let Some(t) = &tr_be_fig {
        if t.window_end_ns > send_end {
            o.warnings.push(format!("trace be: window ran {:.2} s past the end of sending", (t.window_end_ns - send_end) as f64 / 1e9));
        }
    }

    // results
    o.trace_lc = tr_lc_fig;
    o.trace_be = tr_be_fig;
    o.client = Some(
        std::fs::read_to_string(dir.join("client.json"))
            .context("client summary missing (client failed?)")
            .and_then(|s| serde_json::from_str(&s).context("client summary"))?,
    );
    if let Some(c) = &o.client {
        o.warnings.extend(c.warnings.iter().map(|w| format!("client: {w}")));
    }
    o.records = read_records(&dir.join("requests.csv"))?;
    let be_times = if has_be {
        o.be = std::fs::read_to_string(dir.join("be.json")).ok().and_then(|s| serde_json::from_str(&s).ok());
        match read_times(&dir.join("be-iterations.csv")) {
            Ok(t) => t,
            Err(e) => {
                o.warnings.push(format!("BE iterations: {e:#}"));
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    let be_actual = o.be_start_ns.unwrap_or(be_start);
    compute_figures(p, o, &be_times, has_be, be_actual);
    say(&format!(
        "done: LC mean {:.2} -> {:.2} ms (x{}), p99 {:.2} -> {:.2} ms (x{}){}{}",
        o.before.mean_us / 1000.0,
        o.after.mean_us / 1000.0,
        fmt_opt(o.mean_ratio),
        o.before.p99_us / 1000.0,
        o.after.p99_us / 1000.0,
        fmt_opt(o.p99_ratio),
        o.be_iters_per_s.map(|b| format!(", BE {b:.1} it/s")).unwrap_or_default(),
        o.trace_be.as_ref().map(|t| format!(", inversion {:.4}% of CPU", 100.0 * t.inversion_frac)).unwrap_or_default()
    ));
    Ok(())
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into())
}
