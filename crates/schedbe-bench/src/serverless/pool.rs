//! `schedbe-bench fn-pool` (a helper of `schedbe-bench serverless`): the function
//! sandboxes' servers. One process per sandbox, each moved into its
//! sandbox's cgroup, serving requests over UDP on 127.0.0.1.
//!
//! A request is 8 bytes, `index: u32 LE, service_us: u32 LE`; the worker
//! burns `service_us` of its own thread CPU time (CLOCK_THREAD_CPUTIME_ID,
//! so preemption stretches a request's wall time, not its work) and echoes
//! the 4-byte index back to the sender. A sandbox has `--threads` workers on
//! one socket, like a function container serving concurrent invocations.
//!
//! The helper forks its servers before it starts any thread, so a thousand
//! sandboxes share the binary's pages and cost little memory. Each child dies
//! with the helper (PR_SET_PDEATHSIG), and the helper with its parent. It
//! prints `ready` once every child has joined its cgroup and bound its port.

use std::io::{BufRead, Write};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::spin::spin;
use crate::sys::{set_parent_death_signal, stop, thread_cpu_ns};

/// Spin iterations between two reads of the thread CPU clock (tens of µs
/// under emulation, a few natively): the overshoot of a request's demand.
const SPIN_CHUNK: u64 = 1000;
/// Receive buffer of a sandbox's socket: queued requests of an overloaded
/// function wait here instead of being dropped.
const RCVBUF: libc::c_int = 4 << 20;

#[derive(clap::Args, Debug, Clone)]
pub struct PoolArgs {
    /// File of `PORT CGROUP_DIR` lines, one sandbox each
    #[arg(long)]
    pub spec: PathBuf,
    /// Worker threads per sandbox
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
}

/// One sandbox: its UDP port and the cgroup its server runs in.
#[derive(Debug, Clone, PartialEq)]
pub struct Sandbox {
    pub port: u16,
    pub cgroup: PathBuf,
}

/// The spec file's text, as written by [`write_spec`].
pub fn parse_spec(text: &str) -> Result<Vec<Sandbox>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (port, cg) = line.split_once(' ').with_context(|| format!("line {}: expected `PORT CGROUP_DIR`", i + 1))?;
        let port: u16 = port.parse().with_context(|| format!("line {}: {port:?} is not a port", i + 1))?;
        if port == 0 {
            bail!("line {}: port 0", i + 1);
        }
        out.push(Sandbox { port, cgroup: PathBuf::from(cg.trim()) });
    }
    if out.is_empty() {
        bail!("no sandboxes in the spec");
    }
    Ok(out)
}

pub fn write_spec(sandboxes: &[Sandbox]) -> String {
    sandboxes.iter().map(|s| format!("{} {}\n", s.port, s.cgroup.display())).collect()
}

/// Burn `ns` of this thread's CPU time.
pub fn burn_cpu_ns(ns: u64) {
    let start = thread_cpu_ns();
    while thread_cpu_ns().saturating_sub(start) < ns {
        spin(SPIN_CHUNK);
    }
}

fn serve(sock: &UdpSocket) -> ! {
    let mut buf = [0u8; 16];
    loop {
        let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
        if n < 8 {
            continue;
        }
        let svc_us = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
        burn_cpu_ns(svc_us as u64 * 1000);
        // A full sender buffer loses this reply; the bench counts it as missed.
        let _ = sock.send_to(&buf[..4], from);
    }
}

/// The child's life: join the cgroup, bind, tell the parent, serve.
fn child(sb: &Sandbox, threads: usize, ready_fd: libc::c_int) -> Result<()> {
    set_parent_death_signal(libc::SIGKILL);
    std::fs::write(sb.cgroup.join("cgroup.procs"), "0").with_context(|| format!("join {}", sb.cgroup.display()))?;
    let sock = UdpSocket::bind(("127.0.0.1", sb.port)).with_context(|| format!("bind 127.0.0.1:{}", sb.port))?;
    // SAFETY: setsockopt on our socket with an int option.
    unsafe {
        let v = RCVBUF;
        let p = &v as *const libc::c_int as *const libc::c_void;
        let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        if libc::setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, p, len) != 0 {
            libc::setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, p, len);
        }
        libc::write(ready_fd, b"+".as_ptr() as *const libc::c_void, 1);
        libc::close(ready_fd);
    }
    for _ in 1..threads {
        let s = sock.try_clone().context("clone the socket")?;
        std::thread::Builder::new().stack_size(64 << 10).spawn(move || serve(&s)).context("start a worker thread")?;
    }
    serve(&sock)
}

fn kill_all(pids: &[libc::pid_t]) {
    for &p in pids {
        // SAFETY: plain syscalls on our own children.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    for &p in pids {
        // SAFETY: reaping our own children.
        unsafe { libc::waitpid(p, std::ptr::null_mut(), 0) };
    }
}

pub fn run(a: &PoolArgs) -> Result<()> {
    if !(1..=64).contains(&a.threads) {
        bail!("--threads must be in [1, 64], got {}", a.threads);
    }
    let text = std::fs::read_to_string(&a.spec).with_context(|| format!("read {}", a.spec.display()))?;
    let sandboxes = parse_spec(&text).with_context(|| format!("sandbox spec {}", a.spec.display()))?;
    set_parent_death_signal(libc::SIGKILL);
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe into a valid array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        bail!("pipe: {}", std::io::Error::last_os_error());
    }
    let mut pids = Vec::with_capacity(sandboxes.len());
    for sb in &sandboxes {
        // SAFETY: this process has not started a thread, so the child may
        // run anything.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            kill_all(&pids);
            bail!("fork: {e}");
        }
        if pid == 0 {
            // SAFETY: closing the pipe's read end in the child.
            unsafe { libc::close(fds[0]) };
            let code = match child(sb, a.threads, fds[1]) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("fn-pool: sandbox {}: {e:#}", sb.cgroup.display());
                    1
                }
            };
            // SAFETY: leave without running the parent's atexit handlers.
            unsafe { libc::_exit(code) };
        }
        pids.push(pid);
    }
    // SAFETY: closing our copy of the write end, so a dead child shows as EOF.
    unsafe { libc::close(fds[1]) };
    stop::install();
    let t0 = Instant::now();
    let mut ready = 0usize;
    let mut buf = [0u8; 256];
    while ready < sandboxes.len() {
        if t0.elapsed() > Duration::from_secs(120) || stop::requested() {
            kill_all(&pids);
            bail!("only {ready} of {} sandboxes started within 120 s", sandboxes.len());
        }
        // SAFETY: read into a valid buffer from our pipe.
        let n = unsafe { libc::read(fds[0], buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n <= 0 {
            kill_all(&pids);
            bail!("a sandbox server failed to start ({ready} of {} ready)", sandboxes.len());
        }
        ready += n as usize;
    }
    println!("ready");
    std::io::stdout().flush().ok();
    // Wait for a stop signal, or for a server to die (a bug: fail loudly).
    loop {
        if stop::requested() {
            kill_all(&pids);
            return Ok(());
        }
        let mut st = 0;
        // SAFETY: non-blocking reap of any child.
        let p = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
        if p > 0 {
            pids.retain(|&x| x != p);
            kill_all(&pids);
            bail!("sandbox server {p} exited (status {st:#x})");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Wait for a started pool's `ready` line on its stdout.
pub fn wait_ready(stdout: impl std::io::Read + Send + 'static, timeout: Duration) -> Result<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let r = std::io::BufReader::new(stdout).read_line(&mut line).map(|_| line);
        let _ = tx.send(r);
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(l)) if l.trim() == "ready" => Ok(()),
        Ok(Ok(l)) => bail!("the sandbox pool did not start (it said {:?}; see fn-pool.err)", l.trim()),
        Ok(Err(e)) => Err(e).context("read the sandbox pool's output"),
        Err(_) => bail!("the sandbox pool was not ready within {timeout:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trip_and_errors() {
        let s = vec![Sandbox { port: 20000, cgroup: "/sys/fs/cgroup/a b".into() }, Sandbox { port: 20001, cgroup: "/x".into() }];
        assert_eq!(parse_spec(&write_spec(&s)).unwrap(), s);
        assert!(parse_spec("").unwrap_err().to_string().contains("no sandboxes"));
        assert!(parse_spec("x /a").unwrap_err().to_string().contains("line 1"));
        assert!(parse_spec("0 /a").is_err());
        assert!(parse_spec("20000").is_err());
    }

    #[test]
    fn burn_takes_cpu_time() {
        let t = thread_cpu_ns();
        burn_cpu_ns(2_000_000);
        assert!(thread_cpu_ns() - t >= 2_000_000);
    }
}
