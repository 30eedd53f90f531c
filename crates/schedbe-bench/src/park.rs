//! `schedbe-bench park-resume`: the papers' "Can parked processes resume
//! correctly?" (shared/papers/002, parked-kubernetes). A BE job server is
//! serving a long request to a client over loopback TCP with keepalive; an
//! LC antagonist then takes every CPU for minutes, so schedbe parks the job;
//! when the antagonist stops the job resumes and must return the correct
//! result on the same connection.
//!
//! What is measured comes from outside schedbe: the job's own progress
//! (completion time of every step), the BE cgroup's `cgroup.events` (frozen)
//! sampled every 100 ms, the kernel's TCP keepalive on the client socket, and
//! the result checked against the same computation redone by the orchestrator.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::be::ResizeJob;
use crate::experiment::machine_meta;
use crate::scripts::find_script;
use crate::report::Meta;
use crate::scx::sched_ext_state;
use crate::sys::{monotonic_ns, Policy};

const CG_BASE: &str = "/sys/fs/cgroup/schedbe-park-resume";
// Small images: many short steps draw a finer progress curve.
const SRC: (u32, u32) = (960, 540);
const DST: (u32, u32) = (400, 225);
const SEED: u64 = 7;

#[derive(clap::Args, Debug, Clone)]
pub struct ParkArgs {
    /// How long the LC antagonist (a busy loop per CPU) runs; the job stays parked that long
    #[arg(long, default_value_t = 180.0)]
    antagonist_secs: f64,
    /// Size of the BE job in seconds of one CPU (calibrated here); it must
    /// still be running when the antagonist starts
    #[arg(long, default_value_t = 10.0)]
    job_secs: f64,
    /// The antagonist starts this long after the request is sent
    #[arg(long, default_value_t = 2.0)]
    lead_secs: f64,
    /// TCP keepalive on the client: idle seconds before the first probe
    /// (probes every 2 s, 3 misses drop the connection)
    #[arg(long, default_value_t = 10)]
    keepalive_idle: u32,
    /// Short run for smoke tests: 30 s antagonist, 6 s job
    #[arg(long)]
    quick: bool,
    /// Output directory
    #[arg(long, default_value = "results/tmp/bench/park-resume")]
    out: PathBuf,
    /// The schedbe binary [default: `schedbe` next to this binary, else on $PATH]
    #[arg(long, env = "SCHEDBE_BIN")]
    schedbe_bin: Option<PathBuf>,
    /// Extra arguments for `schedbe run`, e.g. --schedbe-arg=--park-after-ms=500
    #[arg(long = "schedbe-arg", allow_hyphen_values = true)]
    schedbe_args: Vec<String>,
    /// Skip the figure (scripts/plot_park.py)
    #[arg(long)]
    no_plot: bool,
}

/// Hidden helper: the BE job server.
#[derive(clap::Args, Debug, Clone)]
pub struct JobServerArgs {
    /// Write the listening port here
    #[arg(long)]
    port_file: PathBuf,
    /// Write each step's completion time (CLOCK_MONOTONIC ns) here
    #[arg(long)]
    progress: PathBuf,
}

/// `schedbe-bench job-server`: accept one connection, read "STEPS\n", run that many
/// chain steps, answer "VALUE STEPS\n".
pub fn job_server(a: &JobServerArgs) -> Result<()> {
    let l = TcpListener::bind("127.0.0.1:0").context("bind")?;
    fs::write(&a.port_file, l.local_addr()?.port().to_string())?;
    let (conn, _) = l.accept()?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    let steps: u64 = line.trim().parse().context("bad request")?;
    let mut job = ResizeJob::new(SRC, DST, "auto", SEED)?;
    let mut acc = 0u64;
    let mut times = Vec::with_capacity(steps as usize);
    for _ in 0..steps {
        acc = job.chain_step(acc)?;
        times.push(monotonic_ns());
    }
    let mut f = std::io::BufWriter::new(fs::File::create(&a.progress)?);
    for t in &times {
        writeln!(f, "{t}")?;
    }
    f.flush()?;
    (&conn).write_all(format!("{acc:016x} {steps}\n").as_bytes())?;
    Ok(())
}

/// Steps per second of the chain on this CPU (orchestrator thread).
fn calibrate() -> Result<f64> {
    let mut job = ResizeJob::new(SRC, DST, "auto", SEED)?;
    let (t0, mut n, mut acc) = (Instant::now(), 0u64, 0u64);
    while t0.elapsed() < Duration::from_secs(1) || n < 3 {
        acc = job.chain_step(acc)?;
        n += 1;
    }
    std::hint::black_box(acc);
    Ok(n as f64 / t0.elapsed().as_secs_f64())
}

fn expected(steps: u64) -> Result<u64> {
    let mut job = ResizeJob::new(SRC, DST, "auto", SEED)?;
    let mut acc = 0u64;
    for _ in 0..steps {
        acc = job.chain_step(acc)?;
    }
    Ok(acc)
}

fn set_keepalive(s: &TcpStream, idle: u32) -> Result<()> {
    let fd = s.as_raw_fd();
    for (level, opt, val) in [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, idle as libc::c_int),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 2),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3),
    ] {
        // SAFETY: valid fd and a pointer to a c_int of the given size.
        let rc = unsafe {
            libc::setsockopt(fd, level, opt, &val as *const libc::c_int as *const libc::c_void, std::mem::size_of::<libc::c_int>() as libc::socklen_t)
        };
        if rc != 0 {
            bail!("setsockopt({opt}): {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Start `argv` in cgroup `cg` (joined before exec) with output to `log`.
fn spawn_in(argv: &[&str], cg: &Path, log: Option<&Path>) -> Result<Child> {
    let mut c = Command::new(argv[0]);
    c.args(&argv[1..]).stdin(Stdio::null());
    match log {
        Some(p) => {
            c.stdout(fs::File::create(p)?).stderr(fs::File::create(p.with_extension("err"))?);
        }
        None => {
            c.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
    let procs = schedbe_cgroup::spawn_into(&mut c, cg)?;
    let ch = c.spawn().with_context(|| format!("cannot start {}", argv[0]))?;
    drop(procs);
    Ok(ch)
}

fn frozen(cg: &Path) -> bool {
    fs::read_to_string(cg.join("cgroup.events")).map(|s| s.lines().any(|l| l.trim() == "frozen 1")).unwrap_or(false)
}

fn scx_state() -> String {
    sched_ext_state().unwrap_or_else(|| "absent".into())
}

/// Everything the experiment started, torn down on every exit path.
struct Rig {
    schedbe: Option<Child>,
    job: Option<Child>,
    hogs: Vec<Child>,
}

impl Rig {
    fn stop_hogs(&mut self) {
        for h in &mut self.hogs {
            let _ = h.kill();
            let _ = h.wait();
        }
        self.hogs.clear();
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.stop_hogs();
        if let Some(mut j) = self.job.take() {
            let _ = j.kill();
            let _ = j.wait();
        }
        if let Some(mut s) = self.schedbe.take() {
            crate::sys::kill(s.id(), libc::SIGINT);
            let _ = s.wait();
        }
        let base = Path::new(CG_BASE);
        for sub in ["be", "lc"] {
            let d = base.join(sub);
            let _ = fs::write(d.join("cgroup.kill"), "1");
            for _ in 0..100 {
                if fs::remove_dir(&d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = fs::remove_dir(base);
    }
}

#[derive(Serialize)]
struct Report {
    machine: String,
    nr_cpus: usize,
    job_steps: u64,
    steps_per_s: f64,
    keepalive: String,
    antagonist_s: f64,
    /// Longest stretch the BE cgroup was frozen (100 ms samples).
    parked_s: f64,
    /// Job steps completed while frozen (must be 0).
    steps_while_parked: u64,
    first_frozen_after_antagonist_s: Option<f64>,
    thawed_after_antagonist_stop_s: Option<f64>,
    reply_after_antagonist_stop_s: f64,
    reply: String,
    expected: String,
    correct: bool,
    sched_ext_state_during: Vec<String>,
    schedbe_exit: Option<i32>,
}

fn machine() -> String {
    let mut m = Meta::default();
    machine_meta(&mut m);
    format!("kernel {}{}", m.kernel, if m.hypervisor { ", virtual machine" } else { "" })
}

pub fn run(a: &ParkArgs) -> Result<()> {
    let (ant_s, job_s) = if a.quick { (30.0, 6.0) } else { (a.antagonist_secs, a.job_secs) };
    if !(ant_s > 0.0 && ant_s <= 86400.0 && job_s > 0.0 && job_s <= 3600.0 && a.lead_secs >= 0.0 && a.lead_secs <= 600.0) {
        bail!("--antagonist-secs, --job-secs and --lead-secs must be positive and sane");
    }
    if a.lead_secs * 2.0 > job_s {
        bail!("--lead-secs {} is too long for a {job_s} s job: the job must still be running when the antagonist starts", a.lead_secs);
    }
    if (a.keepalive_idle as f64) + 6.0 >= ant_s {
        bail!("--keepalive-idle {} s: the keepalive must be able to expire within the {} s parked time", a.keepalive_idle, ant_s);
    }
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        bail!("park-resume needs root (cgroups, schedbe run)");
    }
    if scx_state() != "disabled" {
        bail!("sched_ext is {} here; park-resume needs a kernel with sched_ext and no scheduler loaded", scx_state());
    }
    let me = std::env::current_exe().context("cannot find this binary")?;
    let schedbe = crate::scx::resolve_schedbe_bin(a.schedbe_bin.as_deref()).context(crate::scx::NO_SCHEDBE)?;
    fs::create_dir_all(&a.out).with_context(|| format!("cannot create {}", a.out.display()))?;
    let out = a.out.canonicalize()?;

    // The orchestrator (and the client thread it is) must not be starved by
    // the antagonist: SCHED_FIFO, with reset-on-fork for what it starts.
    Policy::Fifo(70).apply_to_current_thread(true)?;
    let rate = calibrate()?;
    let steps = ((job_s * rate).round() as u64).max(3);
    eprintln!("park-resume: job = {steps} resize steps (~{job_s} s at {rate:.1} steps/s); antagonist {ant_s} s");

    let base = Path::new(CG_BASE);
    let _ = fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+cpu");
    fs::create_dir_all(base).with_context(|| format!("cannot create {CG_BASE}"))?;
    fs::write(base.join("cgroup.subtree_control"), "+cpu")?;
    let (lc, be) = (base.join("lc"), base.join("be"));
    fs::create_dir_all(&lc)?;
    fs::create_dir_all(&be)?;
    fs::write(be.join("cpu.idle"), "1")?;
    let mut rig = Rig { schedbe: None, job: None, hogs: Vec::new() };

    let mut cmd = Command::new(&schedbe);
    cmd.arg("run").arg("--stats").arg("1").arg("--json").args(&a.schedbe_args).stdin(Stdio::null())
        .stdout(fs::File::create(out.join("schedbe-stats.jsonl"))?)
        .stderr(fs::File::create(out.join("schedbe.log"))?);
    rig.schedbe = Some(cmd.spawn().context("cannot start schedbe run")?);
    let t = Instant::now();
    while scx_state() != "enabled" {
        if t.elapsed() > Duration::from_secs(120) || rig.schedbe.as_mut().unwrap().try_wait()?.is_some() {
            bail!("schedbe did not load (see {})", out.join("schedbe.log").display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    let port_file = out.join("job.port");
    let _ = fs::remove_file(&port_file);
    let me_s = me.to_string_lossy().to_string();
    let prog_s = out.join("job-progress.txt").to_string_lossy().to_string();
    let port_s = port_file.to_string_lossy().to_string();
    rig.job = Some(spawn_in(&[&me_s, "job-server", "--port-file", &port_s, "--progress", &prog_s], &be, Some(&out.join("job.log")))?);
    let t = Instant::now();
    let port: u16 = loop {
        if let Ok(s) = fs::read_to_string(&port_file) {
            if let Ok(p) = s.trim().parse() {
                break p;
            }
        }
        if t.elapsed() > Duration::from_secs(30) {
            bail!("the job server did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    };

    // Frozen sampler.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (stop, be) = (stop.clone(), be.clone());
        std::thread::spawn(move || {
            let mut v = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                v.push((monotonic_ns(), frozen(&be)));
                std::thread::sleep(Duration::from_millis(100));
            }
            v
        })
    };

    let mut sock = TcpStream::connect(("127.0.0.1", port))?;
    set_keepalive(&sock, a.keepalive_idle)?;
    sock.set_read_timeout(Some(Duration::from_secs_f64(ant_s + job_s * 10.0 + 180.0)))?;
    let t_req = monotonic_ns();
    sock.write_all(format!("{steps}\n").as_bytes())?;
    // The reply is read as soon as it comes (its time is a result).
    let reader = {
        let s = sock.try_clone()?;
        std::thread::spawn(move || -> (std::io::Result<usize>, String, u64) {
            let mut line = String::new();
            let r = BufReader::new(&s).read_line(&mut line);
            (r, line, monotonic_ns())
        })
    };
    std::thread::sleep(Duration::from_secs_f64(a.lead_secs));

    let t_ant0 = monotonic_ns();
    let busy = ["/bin/sh", "-c", "while :; do :; done"];
    let ncpu = crate::sys::allowed_cpus()?.len();
    for _ in 0..ncpu {
        rig.hogs.push(spawn_in(&busy, &lc, None)?);
    }
    let mut states = Vec::new();
    let t = Instant::now();
    let mut next_note = 10.0;
    while t.elapsed().as_secs_f64() < ant_s {
        std::thread::sleep(Duration::from_millis(500));
        let st = scx_state();
        if !states.contains(&st) {
            states.push(st.clone());
        }
        if let Some(s) = rig.schedbe.as_mut().unwrap().try_wait()? {
            bail!("schedbe exited ({s}) during the antagonist (see {})", out.join("schedbe.log").display());
        }
        if t.elapsed().as_secs_f64() >= next_note {
            eprintln!("park-resume: {:>4.0}/{ant_s} s of antagonist; BE cgroup frozen: {}", t.elapsed().as_secs_f64(), frozen(&be));
            next_note += 10.0;
        }
    }
    rig.stop_hogs();
    let t_ant1 = monotonic_ns();

    let (r, reply, t_reply) = reader.join().map_err(|_| anyhow::anyhow!("reader panicked"))?;
    match r {
        Ok(n) if n > 0 => {}
        Ok(_) => bail!("the connection to the parked job was closed without a reply"),
        Err(e) => bail!("no reply from the parked job: {e} (connection lost or timed out)"),
    }
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().map_err(|_| anyhow::anyhow!("sampler panicked"))?;
    if let Some(j) = rig.job.as_mut() {
        j.wait()?;
    }
    let mut s = rig.schedbe.take().unwrap();
    crate::sys::kill(s.id(), libc::SIGINT);
    let schedbe_exit = s.wait()?.code();
    drop(rig);

    eprintln!("park-resume: reply after {:.1} s; recomputing the job to check it", (t_reply - t_req) as f64 / 1e9);
    let want = format!("{:016x} {steps}", expected(steps)?);
    let times: Vec<u64> = fs::read_to_string(out.join("job-progress.txt"))?.lines().filter_map(|l| l.parse().ok()).collect();
    if times.last().is_some_and(|&t| t < t_ant0) {
        bail!("the job finished before the antagonist started: nothing was parked (raise --job-secs)");
    }

    // Longest frozen stretch, and steps completed inside it.
    let (mut best, mut cur): ((u64, u64), Option<u64>) = ((0, 0), None);
    for w in samples.windows(2) {
        match (w[0].1, cur) {
            (true, None) => cur = Some(w[0].0),
            (false, Some(s0)) => {
                if w[0].0 - s0 > best.1 - best.0 {
                    best = (s0, w[0].0);
                }
                cur = None;
            }
            _ => {}
        }
    }
    if let (Some(s0), Some(last)) = (cur, samples.last()) {
        if last.0 - s0 > best.1 - best.0 {
            best = (s0, last.0);
        }
    }
    // Margins of one sample on each side: a step may finish as the freeze lands.
    let inside = times.iter().filter(|&&t| t > best.0 + 100_000_000 && t + 100_000_000 < best.1).count() as u64;
    let first_frozen = samples.iter().find(|(t, f)| *f && *t >= t_ant0).map(|(t, _)| (*t - t_ant0) as f64 / 1e9);
    let thawed = samples.iter().find(|(t, f)| !*f && *t >= t_ant1).map(|(t, _)| (*t - t_ant1) as f64 / 1e9);
    let rep = Report {
        machine: machine(),
        nr_cpus: ncpu,
        job_steps: steps,
        steps_per_s: rate,
        keepalive: format!("idle {} s, interval 2 s, 3 probes (dead after {} s without answers)", a.keepalive_idle, a.keepalive_idle + 6),
        antagonist_s: (t_ant1 - t_ant0) as f64 / 1e9,
        parked_s: (best.1 - best.0) as f64 / 1e9,
        steps_while_parked: inside,
        first_frozen_after_antagonist_s: first_frozen,
        thawed_after_antagonist_stop_s: thawed,
        reply_after_antagonist_stop_s: (t_reply - t_ant1) as f64 / 1e9,
        reply: reply.trim().to_string(),
        expected: want.clone(),
        correct: reply.trim() == want,
        sched_ext_state_during: states,
        schedbe_exit,
    };
    fs::write(out.join("park-resume.json"), serde_json::to_string_pretty(&rep)?)?;
    let mut csv = String::from("t_s,frozen\n");
    for (t, f) in &samples {
        csv += &format!("{:.3},{}\n", (*t as f64 - t_req as f64) / 1e9, *f as u8);
    }
    fs::write(out.join("frozen.csv"), csv)?;
    let mut csv = String::from("t_s\n");
    for t in &times {
        csv += &format!("{:.3}\n", (*t as f64 - t_req as f64) / 1e9);
    }
    fs::write(out.join("steps.csv"), csv)?;
    let meta = format!(
        "{{\"t_antagonist_start\": {:.3}, \"t_antagonist_stop\": {:.3}, \"t_reply\": {:.3}}}",
        (t_ant0 - t_req) as f64 / 1e9, (t_ant1 - t_req) as f64 / 1e9, (t_reply - t_req) as f64 / 1e9
    );
    fs::write(out.join("timeline.json"), meta)?;
    let summary = format!(
        "# park-resume\n\n- {} ({} CPUs); schedbe exit {:?}\n- job: {} image-resize chain steps ({:.1} steps/s), BE cgroup cpu.idle=1\n- client: TCP keepalive {}\n- antagonist (a busy loop per CPU, LC): {:.1} s\n\n| parked (s) | steps while parked | frozen after antagonist start (s) | thawed after it stopped (s) | reply after it stopped (s) | result correct | connection |\n|---|---|---|---|---|---|---|\n| {:.1} | {} | {} | {} | {:.1} | {} | kept |\n",
        rep.machine, ncpu, rep.schedbe_exit, steps, rate, rep.keepalive, rep.antagonist_s, rep.parked_s, rep.steps_while_parked,
        rep.first_frozen_after_antagonist_s.map(|v| format!("{v:.2}")).unwrap_or("never".into()),
        rep.thawed_after_antagonist_stop_s.map(|v| format!("{v:.2}")).unwrap_or("-".into()),
        rep.reply_after_antagonist_stop_s, rep.correct
    );
    fs::write(out.join("summary.md"), &summary)?;
    println!("{summary}");
    if !a.no_plot {
        let script = find_script("plot_park.py").unwrap_or_else(|| PathBuf::from("scripts/plot_park.py"));
        match Command::new("/usr/bin/python3").arg(&script).arg(&out).env("MPLCONFIGDIR", std::env::temp_dir().join("schedbe-mpl")).status() {
            Ok(s) if s.success() => println!("figure: {}", out.join("park-resume.png").display()),
            Ok(s) => eprintln!("park-resume: plotting failed ({s}); data is in {}", out.display()),
            Err(e) => eprintln!("park-resume: cannot run {}: {e}", script.display()),
        }
    }
    if !rep.correct {
        bail!("the parked job returned {:?}, expected {:?}", rep.reply, want);
    }
    Ok(())
}
