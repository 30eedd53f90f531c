//! Helper processes: spawning with a parent-death signal (and optionally
//! SCHED_FIFO), waiting with a timeout, stopping with a signal then SIGKILL,
//! and their log files.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::sys::{self, monotonic_ns};

/// A helper process that is killed if still running when dropped.
pub struct Proc {
    pub name: String,
    child: Option<Child>,
}

impl Proc {
    pub fn spawn(name: &str, cmd: &mut Command) -> Result<Proc> {
        let child = cmd.spawn().with_context(|| format!("start {name} ({:?})", cmd.get_program()))?;
        Ok(Proc { name: name.to_string(), child: Some(child) })
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Its stdout, if it was spawned with `Stdio::piped()`.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.as_mut().and_then(|c| c.stdout.take())
    }

    pub fn wait_timeout(&mut self, d: Duration) -> Result<Option<ExitStatus>> {
        let deadline = monotonic_ns() + d.as_nanos() as u64;
        let Some(c) = self.child.as_mut() else { return Ok(None) };
        loop {
            if let Some(st) = c.try_wait().with_context(|| format!("wait for {}", self.name))? {
                self.child = None;
                return Ok(Some(st));
            }
            if monotonic_ns() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Signal, wait up to `grace`, then SIGKILL. Returns the exit status and
    /// whether it had to be killed.
    pub fn stop(&mut self, sig: libc::c_int, grace: Duration) -> (Option<ExitStatus>, bool) {
        let Some(c) = self.child.as_mut() else { return (None, false) };
        if let Ok(Some(st)) = c.try_wait() {
            self.child = None;
            return (Some(st), false);
        }
        sys::kill(c.id(), sig);
        if let Ok(Some(st)) = self.wait_timeout(grace) {
            return (Some(st), false);
        }
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let st = c.wait().ok();
            self.child = None;
            return (st, true);
        }
        (None, true)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Command for a helper subcommand of this binary.
pub fn helper(exe: &Path, sub: &str) -> Command {
    let mut c = Command::new(exe);
    c.arg(sub);
    c
}

/// Make the child die with us, optionally at SCHED_FIFO `rt` (inherited by its threads).
pub fn child_setup(c: &mut Command, death_sig: libc::c_int, rt: Option<u8>) {
    // SAFETY: only async-signal-safe syscalls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, death_sig as libc::c_ulong, 0, 0, 0);
            if let Some(p) = rt {
                let param = libc::sched_param { sched_priority: p as libc::c_int };
                libc::sched_setscheduler(0, libc::SCHED_FIFO, &param);
            }
            Ok(())
        });
    }
}

/// The child joins cgroup v2 directory `cgroup` between fork and exec, so
/// every thread it starts is in it from the first.
pub fn join_cgroup_on_exec(c: &mut Command, cgroup: &Path) -> Result<()> {
    let procs = cgroup.join("cgroup.procs");
    let procs_c = std::ffi::CString::new(procs.as_os_str().as_encoded_bytes()).context("cgroup path")?;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            let fd = libc::open(procs_c.as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let r = libc::write(fd, b"0".as_ptr() as *const libc::c_void, 1);
            libc::close(fd);
            if r != 1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

pub fn log_file(dir: &Path, name: &str) -> Result<Stdio> {
    let p = dir.join(name);
    Ok(Stdio::from(std::fs::File::create(&p).with_context(|| format!("create {}", p.display()))?))
}

/// stdout and stderr into one file (one open file description, one offset).
pub fn log_pair(dir: &Path, name: &str) -> Result<(Stdio, Stdio)> {
    let p = dir.join(name);
    let f = std::fs::File::create(&p).with_context(|| format!("create {}", p.display()))?;
    let g = f.try_clone().with_context(|| format!("dup {}", p.display()))?;
    Ok((Stdio::from(f), Stdio::from(g)))
}
