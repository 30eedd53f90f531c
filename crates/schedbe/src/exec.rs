//! `schedbe exec --be -- CMD`: run a command in the BE tier.
//!
//! CMD runs in its own cgroup, /sys/fs/cgroup/schedbe-be/exec-<pid>, under a
//! parent with cpu.idle=1. That makes it BE for schedbe (and SCHED_IDLE-like
//! under plain EEVDF), covers every process CMD forks, and gives the parking
//! logic a cgroup to freeze. Without permission to create cgroups, CMD runs
//! with policy SCHED_IDLE instead, which schedbe also treats as BE.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::{bail, Context, Result};
use schedbe_cgroup::CGROUP_ROOT;

/// Parent of all `schedbe exec --be` cgroups.
pub const BE_PARENT: &str = "schedbe-be";

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Create (idempotently) the BE parent with cpu.idle=1 and a leaf for us.
fn make_cgroup() -> Result<PathBuf> {
    let root = Path::new(CGROUP_ROOT);
    let ctrls = fs::read_to_string(root.join("cgroup.controllers")).context("cgroup v2 is not mounted")?;
    if !ctrls.split_whitespace().any(|c| c == "cpu") {
        bail!("the cpu controller is not available at {CGROUP_ROOT}");
    }
    let sub = fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
    if !sub.split_whitespace().any(|c| c == "cpu") {
        fs::write(root.join("cgroup.subtree_control"), "+cpu").context("cannot enable the cpu controller")?;
    }
    let parent = root.join(BE_PARENT);
    match fs::create_dir(&parent) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", parent.display())),
    }
    fs::write(parent.join("cpu.idle"), "1").with_context(|| format!("cannot set {}/cpu.idle", parent.display()))?;
    let leaf = parent.join(format!("exec-{}", std::process::id()));
    fs::create_dir(&leaf).with_context(|| format!("cannot create {}", leaf.display()))?;
    Ok(leaf)
}

/// Run `cmd` in the BE tier and return its exit code (128+N if killed by signal N).
pub fn exec_be(cmd: &[String]) -> Result<i32> {
    let Some((prog, args)) = cmd.split_first() else {
        bail!("no command given: use `schedbe exec --be -- CMD [ARGS...]`");
    };
    let leaf = match make_cgroup() {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("schedbe: note: cannot use a BE cgroup ({e:#}); running {prog} as SCHED_IDLE instead");
            None
        }
    };

    let mut c = Command::new(prog);
    c.args(args);
    let procs = match &leaf {
        Some(l) => match schedbe_cgroup::spawn_into(&mut c, l) {
            Ok(f) => Some(f),
            Err(e) => {
                let _ = fs::remove_dir(l);
                return Err(e);
            }
        },
        None => None,
    };
    let sched_idle = leaf.is_none();
    // SAFETY: the pre_exec closure only makes async-signal-safe calls
    // (signal, sched_setscheduler) and does not allocate.
    unsafe {
        c.pre_exec(move || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            if sched_idle {
                let param = libc::sched_param { sched_priority: 0 };
                if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = match c.spawn() {
        Ok(ch) => ch,
        Err(e) => {
            if let Some(l) = &leaf {
                let _ = fs::remove_dir(l);
            }
            return Err(e).with_context(|| format!("cannot run {prog}"));
        }
    };
    drop(procs);
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    // The terminal delivers SIGINT/SIGQUIT to CMD itself; forward TERM and HUP.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, forward as *const () as libc::sighandler_t);
        libc::signal(libc::SIGHUP, forward as *const () as libc::sighandler_t);
    }
    let status = child.wait().context("waiting for the command failed")?;
    if let Some(l) = &leaf {
        if let Err(e) = fs::remove_dir(l) {
            eprintln!("schedbe: note: left {} in place ({e}): processes {prog} started are still in it", l.display());
        }
    }
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}
