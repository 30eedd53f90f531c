//! sched_ext schedulers: the kernel's state (/sys/kernel/sched_ext), finding
//! the schedbe binary, and loading a scheduler for a configuration (schedbe's
//! `run`, or a peer binary such as scx_bpfland) and unloading it again. A scheduler counts as loaded once
//! the state reads `enabled` and `root/ops` names it; it is stopped with
//! SIGINT and counts as gone once the state reads `disabled`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::proc::{child_setup, log_file, Proc};
use crate::sys::monotonic_ns;

const SCX: &str = "/sys/kernel/sched_ext";

/// How long a scheduler may take to load (BPF verification takes minutes
/// for the larger peers under software emulation).
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(300);

pub fn sched_ext_state() -> Option<String> {
    std::fs::read_to_string(format!("{SCX}/state")).ok().map(|s| s.trim().to_string())
}

/// The loaded scheduler's ops name (`root/ops`), when one is loaded.
pub fn root_ops() -> Option<String> {
    std::fs::read_to_string(format!("{SCX}/root/ops")).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

pub fn wait_sched_ext(want: &str, timeout: Duration, proc_: Option<&mut Proc>) -> Result<()> {
    let deadline = monotonic_ns() + timeout.as_nanos() as u64;
    let mut proc_ = proc_;
    loop {
        let st = sched_ext_state();
        if st.as_deref() == Some(want) {
            return Ok(());
        }
        if let Some(p) = proc_.as_deref_mut() {
            if !p.running() {
                bail!("{} exited before sched_ext became {want} (state {st:?}); see its log", p.name);
            }
        }
        if monotonic_ns() >= deadline {
            bail!("sched_ext state is {st:?}, not {want:?}, after {:?}", timeout);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A sched_ext scheduler a configuration loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// `schedbe run [--schedbe-arg ...]`
    Schedbe,
    /// A peer scheduler binary by name (crate::peers::KNOWN), default options.
    Peer(&'static str),
}

impl Scheduler {
    /// The name of its process, for logs and messages.
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::Schedbe => "schedbe run",
            Scheduler::Peer(n) => n,
        }
    }

    /// The ops name it registers (`root/ops` starts with it): scx_bpfland -> bpfland.
    pub fn ops_name(self) -> &'static str {
        match self {
            Scheduler::Schedbe => "schedbe",
            Scheduler::Peer(n) => n.strip_prefix("scx_").unwrap_or(n),
        }
    }

    /// Its log files in a run's directory (stdout, stderr).
    fn logs(self) -> (String, String) {
        let stem = match self {
            Scheduler::Schedbe => "schedbe-run".to_string(),
            Scheduler::Peer(n) => n.to_string(),
        };
        (format!("{stem}.log"), format!("{stem}.err"))
    }
}

/// What to say when [`resolve_schedbe_bin`] finds nothing.
pub const NO_SCHEDBE: &str = "no schedbe binary found next to schedbe-bench or on $PATH (--schedbe-bin)";

/// The scheduler binary, for the `schedbe` configurations and `schedbe
/// trace`: @explicit (--schedbe-bin, $SCHEDBE_BIN), else the `schedbe` in this
/// binary's directory (target/release/ in the tree, /usr/local/bin when
/// installed), else `schedbe` on $PATH.
pub fn resolve_schedbe_bin(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    let exe_dir = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf));
    let path = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    exe_dir.into_iter().chain(path).map(|d| d.join("schedbe")).find(|c| is_executable(c))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// The command that runs a scheduler: its binary and arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedCmd {
    pub sched: Scheduler,
    pub bin: PathBuf,
    pub args: Vec<String>,
}

impl SchedCmd {
    /// The command for @sched: `<schedbe_bin> run <schedbe_args>`, or the
    /// peer's binary (crate::peers::find) with no arguments.
    pub fn new(sched: Scheduler, schedbe_bin: Option<&Path>, schedbe_args: &[String], peers_dir: Option<&Path>) -> Result<SchedCmd> {
        Ok(match sched {
            Scheduler::Schedbe => {
                let bin = schedbe_bin.with_context(|| format!("configuration schedbe: {NO_SCHEDBE}"))?;
                let args = std::iter::once("run".to_string()).chain(schedbe_args.iter().cloned()).collect();
                SchedCmd { sched, bin: bin.to_path_buf(), args }
            }
            Scheduler::Peer(n) => SchedCmd { sched, bin: crate::peers::find(n, peers_dir)?, args: vec![] },
        })
    }
}

/// A loaded scheduler; unloaded (SIGKILL by Proc's drop, then the kernel
/// disables it) if dropped without [`Loaded::stop`].
pub struct Loaded {
    sched: Scheduler,
    proc_: Proc,
    err_log: PathBuf,
}

/// Start @cmd with its logs in @dir and wait (up to @timeout) until the
/// kernel has it enabled.
pub fn load(cmd: &SchedCmd, dir: &Path, timeout: Duration) -> Result<Loaded> {
    let s = cmd.sched;
    match sched_ext_state() {
        None => bail!("{}: this kernel has no sched_ext ({SCX} missing); run in the VM (scripts/vm.sh)", s.name()),
        Some(st) if st != "disabled" => bail!("{}: a sched_ext scheduler is already {st:?} ({:?})", s.name(), root_ops()),
        _ => {}
    }
    let (out, err) = s.logs();
    let mut c = Command::new(&cmd.bin);
    c.args(&cmd.args).stdin(Stdio::null()).stdout(log_file(dir, &out)?).stderr(log_file(dir, &err)?);
    child_setup(&mut c, libc::SIGINT, None);
    let mut pr = Proc::spawn(s.name(), &mut c)?;
    wait_sched_ext("enabled", timeout, Some(&mut pr))?;
    // root/ops may lag the state by a moment
    let deadline = monotonic_ns() + 5_000_000_000;
    loop {
        let ops = root_ops();
        if ops.as_deref().is_some_and(|o| o.starts_with(s.ops_name())) {
            break;
        }
        if monotonic_ns() >= deadline {
            bail!("{}: sched_ext is enabled but {SCX}/root/ops is {ops:?}, not {:?}", s.name(), s.ops_name());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Loaded { sched: s, proc_: pr, err_log: dir.join(err) })
}

impl Loaded {
    pub fn pid(&self) -> u32 {
        self.proc_.pid()
    }

    pub fn sched(&self) -> Scheduler {
        self.sched
    }

    /// SIGINT, wait for the process and for sched_ext to read `disabled`;
    /// what went wrong (and error lines of its log) as warnings.
    pub fn stop(mut self) -> Vec<String> {
        let name = self.sched.name();
        let mut w = Vec::new();
        let (st, killed) = self.proc_.stop(libc::SIGINT, Duration::from_secs(30));
        if killed || !st.map(|s| s.success()).unwrap_or(false) {
            w.push(format!("{name} did not exit cleanly on SIGINT ({st:?}, killed: {killed})"));
        }
        if let Err(e) = wait_sched_ext("disabled", Duration::from_secs(20), None) {
            w.push(format!("after {name}: {e:#}"));
        }
        let err = std::fs::read_to_string(&self.err_log).unwrap_or_default();
        w.extend(error_lines(&err).into_iter().take(3).map(|l| format!("{name}: {l}")));
        w
    }
}

/// Lines of a scheduler's log that report an error, a stall or an exit
/// (but not the normal exit on SIGINT).
fn error_lines(log: &str) -> Vec<&str> {
    let bad = |l: &str| {
        let l = l.to_ascii_lowercase();
        (l.contains("error") || l.contains("stall") || l.contains("exit")) && !l.contains("unregistered from user space")
    };
    log.lines().filter(|l| bad(l)).collect()
}

/// The ops name and version a peer binary reports (`NAME --version`), for the record.
pub fn version_of(bin: &Path) -> Result<String> {
    let out = Command::new(bin).arg("--version").stdin(Stdio::null()).output().with_context(|| format!("run {} --version", bin.display()))?;
    if !out.status.success() {
        bail!("{} --version failed ({})", bin.display(), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(Scheduler::Peer("scx_bpfland").ops_name(), "bpfland");
        assert_eq!(Scheduler::Schedbe.ops_name(), "schedbe");
        assert_eq!(Scheduler::Schedbe.logs().1, "schedbe-run.err");
        assert_eq!(Scheduler::Peer("scx_lavd").logs().0, "scx_lavd.log");
    }

    #[test]
    fn log_errors() {
        let log = "starting\nEXIT: unregistered from user space\nERROR: runnable task stall\nfine\n";
        assert_eq!(error_lines(log), vec!["ERROR: runnable task stall"]);
    }
}
