//! The harness's cgroup v2 tree: /sys/fs/cgroup/schedbe-bench/{lc,be}, made
//! fresh for every run (so no setting leaks from one configuration to the
//! next) and removed at the end.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

pub const ROOT: &str = "/sys/fs/cgroup";
pub const BASE: &str = "schedbe-bench";

pub struct Cgroups {
    pub base: PathBuf,
    /// The cpu controller is enabled for the children (weights, cpu.idle work).
    pub cpu_controller: bool,
}

fn write(p: &Path, v: &str) -> Result<()> {
    std::fs::write(p, v).with_context(|| format!("write {v:?} to {}", p.display()))
}

impl Cgroups {
    /// Set up /sys/fs/cgroup/schedbe-bench. Err when /sys/fs/cgroup is not a
    /// cgroup v2 mount (e.g. a v1/hybrid host).
    pub fn setup() -> Result<Cgroups> {
        let root = Path::new(ROOT);
        let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).map_err(|_| {
            anyhow::anyhow!(
                "{ROOT} is not a cgroup v2 mount (this looks like a cgroup v1 or hybrid host); \
                 run the experiment in the VM (scripts/vm.sh), where cgroup2 is mounted at {ROOT}"
            )
        })?;
        let base = root.join(BASE);
        let mut cpu_controller = controllers.split_whitespace().any(|c| c == "cpu");
        if cpu_controller {
            if let Err(e) = write(&root.join("cgroup.subtree_control"), "+cpu") {
                eprintln!("bench: warning: cannot enable the cpu controller at {ROOT}: {e:#}");
                cpu_controller = false;
            }
        }
        if !base.exists() {
            std::fs::create_dir(&base).with_context(|| format!("mkdir {}", base.display()))?;
        }
        if cpu_controller {
            if let Err(e) = write(&base.join("cgroup.subtree_control"), "+cpu") {
                eprintln!("bench: warning: cannot enable the cpu controller in {}: {e:#}", base.display());
                cpu_controller = false;
            }
        }
        Ok(Cgroups { base, cpu_controller })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    /// A fresh, empty child cgroup with default settings.
    pub fn fresh(&self, name: &str) -> Result<PathBuf> {
        let p = self.path(name);
        if p.exists() {
            remove(&p)?;
        }
        std::fs::create_dir(&p).with_context(|| format!("mkdir {}", p.display()))?;
        Ok(p)
    }

    pub fn set(&self, name: &str, file: &str, value: &str) -> Result<()> {
        if !self.cpu_controller && file.starts_with("cpu.") {
            bail!("cannot set {file}: the cpu controller is not available under {}", self.base.display());
        }
        write(&self.path(name).join(file), value)
    }

    /// Remove the children and the base directory (best effort).
    pub fn cleanup(&self) {
        if let Ok(rd) = std::fs::read_dir(&self.base) {
            for e in rd.flatten() {
                if e.path().is_dir() {
                    if let Err(err) = remove(&e.path()) {
                        eprintln!("bench: warning: {err:#}");
                    }
                }
            }
        }
        let _ = std::fs::remove_dir(&self.base);
    }
}

/// Kill whatever is left in a cgroup and remove it.
fn remove(p: &Path) -> Result<()> {
    for attempt in 0..100 {
        match std::fs::remove_dir(p) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(_) if attempt < 99 => {
                // Nested leftovers first, then kill the members.
                if let Ok(rd) = std::fs::read_dir(p) {
                    for e in rd.flatten() {
                        if e.path().is_dir() {
                            let _ = remove(&e.path());
                        }
                    }
                }
                if attempt == 0 && std::fs::write(p.join("cgroup.kill"), "1").is_err() {
                    if let Ok(s) = std::fs::read_to_string(p.join("cgroup.procs")) {
                        for pid in s.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
                            crate::sys::kill(pid, libc::SIGKILL);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e).with_context(|| format!("rmdir {}", p.display())),
        }
    }
    Ok(())
}
