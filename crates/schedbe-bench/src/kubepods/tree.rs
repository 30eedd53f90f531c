//! The cgroupfs side: check the root, create the plan's cgroups and write
//! their values (`apply`), remove them again (`delete`), and the xattr that
//! marks the shared levels `apply` created.

use std::ffi::CString;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::plan::{Level, LevelKind, Plan};

/// The xattrs marking a shared level (kubepods, QoS) as created by `apply`.
/// `trusted.*` works on every cgroupfs for root; `user.*` (cgroup2 since
/// Linux 5.7) is the fallback.
const OWNER_XATTRS: [&str; 2] = ["trusted.schedbe.kubepods", "user.schedbe.kubepods"];
/// How long `delete` waits for killed container processes to exit.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// What `apply` did with one level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Created,
    /// Existed (an earlier apply), values written again
    Updated,
    /// A shared level that existed before and is not ours: used, not written
    Existing,
}

/// What `delete` did with one level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    Removed,
    AlreadyGone,
    /// A shared level that existed before apply
    KeptExisting,
    /// A shared level ours, but other cgroups are still under it
    KeptInUse,
}

/// What `apply` built: every level, and the container cgroups.
#[derive(Debug, Clone)]
pub struct AppliedTree {
    pub levels: Vec<(Level, Applied)>,
    /// Where a caller starts the "containers'" processes
    pub containers: Vec<ContainerCgroup>,
}

/// A container cgroup, for a caller that starts processes in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCgroup {
    pub pod: String,
    pub container: String,
    pub path: PathBuf,
}

fn write(p: &Path, v: &str) -> Result<()> {
    std::fs::write(p, v).with_context(|| format!("write {v:?} to {}", p.display()))
}

fn read(p: &Path) -> Result<String> {
    std::fs::read_to_string(p).with_context(|| format!("read {}", p.display()))
}

/// The root must be a cgroup v2 directory whose children can have the cpu
/// controller.
pub fn check_root(root: &Path) -> Result<()> {
    if !root.is_dir() {
        bail!("cgroup root {} does not exist (create it first, e.g. mkdir {})", root.display(), root.display());
    }
    let ctl = root.join("cgroup.controllers");
    let controllers = std::fs::read_to_string(&ctl).map_err(|e| {
        anyhow::anyhow!("{} is not a cgroup v2 directory (cannot read {}: {e})", root.display(), ctl.display())
    })?;
    if !controllers.split_whitespace().any(|c| c == "cpu") {
        let parent = root.parent().unwrap_or(root);
        bail!(
            "the cpu controller is not available in {} ({} lists {:?}); enable it in the parent: \
             echo +cpu > {}/cgroup.subtree_control",
            root.display(),
            ctl.display(),
            controllers.trim(),
            parent.display()
        );
    }
    Ok(())
}

/// Enable +cpu for the children of `dir` (a no-op when already on).
fn enable_cpu(dir: &Path) -> Result<()> {
    let ctl = dir.join("cgroup.subtree_control");
    if read(&ctl)?.split_whitespace().any(|c| c == "cpu") {
        return Ok(());
    }
    std::fs::write(&ctl, "+cpu").map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::EBUSY) {
            " (the cgroup has processes of its own; cgroup v2 only enables controllers for children of cgroups without any)"
        } else {
            ""
        };
        anyhow::anyhow!("write \"+cpu\" to {}: {e}{hint}", ctl.display())
    })
}

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes()).with_context(|| format!("path {} has a NUL byte", p.display()))
}

/// Mark a shared level as created by `apply`; false when no xattr works.
fn mark_created(p: &Path) -> bool {
    let Ok(path) = cpath(p) else { return false };
    OWNER_XATTRS.iter().any(|name| {
        let name = CString::new(*name).expect("constant without NUL");
        // SAFETY: valid NUL-terminated strings and a 1-byte buffer.
        unsafe { libc::setxattr(path.as_ptr(), name.as_ptr(), b"1".as_ptr().cast(), 1, 0) == 0 }
    })
}

fn is_marked(p: &Path) -> bool {
    let Ok(path) = cpath(p) else { return false };
    OWNER_XATTRS.iter().any(|name| {
        let name = CString::new(*name).expect("constant without NUL");
        // SAFETY: a size query (no buffer) on valid NUL-terminated strings.
        unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) >= 0 }
    })
}

/// Build the tree under `root` (which must exist): create what is missing,
/// enable +cpu down the path, write cpu.weight and cpu.max.
pub fn apply(root: &Path, plan: &Plan) -> Result<AppliedTree> {
    check_root(root)?;
    enable_cpu(root)?;
    let mut out = Vec::new();
    for level in &plan.levels {
        let dir = root.join(&level.rel);
        let status = match std::fs::create_dir(&dir) {
            Ok(()) => {
                if level.kind.shared() && !mark_created(&dir) {
                    eprintln!(
                        "bench pods: warning: cannot mark {} as created here (no xattr support); \
                         `pods delete` will leave it in place",
                        dir.display()
                    );
                }
                Applied::Created
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                if !dir.is_dir() {
                    bail!("{} exists and is not a directory", dir.display());
                }
                if level.kind.shared() && !is_marked(&dir) {
                    Applied::Existing
                } else {
                    Applied::Updated
                }
            }
            Err(e) => return Err(e).with_context(|| format!("mkdir {}", dir.display())),
        };
        if status != Applied::Existing {
            write(&dir.join("cpu.weight"), &level.weight.to_string())?;
            write(&dir.join("cpu.max"), &level.max.to_string())?;
        }
        if level.kind != LevelKind::Container {
            enable_cpu(&dir)?;
        }
        out.push((level.clone(), status));
    }
    Ok(AppliedTree { levels: out, containers: container_cgroups(root, plan) })
}

/// The container cgroups of a plan, for starting processes in them.
pub fn container_cgroups(root: &Path, plan: &Plan) -> Vec<ContainerCgroup> {
    plan.levels
        .iter()
        .filter(|l| l.kind == LevelKind::Container)
        .map(|l| ContainerCgroup {
            pod: l.pod.clone().unwrap_or_default(),
            container: l.container.clone().unwrap_or_default(),
            path: root.join(&l.rel),
        })
        .collect()
}

/// Kill everything in the cgroup tree at `dir` and remove it, children first.
/// A tree that is already gone is not an error.
fn remove_tree(dir: &Path) -> Result<Removed> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Removed::AlreadyGone),
        Err(e) => return Err(e).with_context(|| format!("read directory {}", dir.display())),
    };
    for e in rd {
        let e = e.with_context(|| format!("read directory {}", dir.display()))?;
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&e.path())?;
        }
    }
    let deadline = Instant::now() + KILL_WAIT;
    let mut killed = false;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(Removed::Removed),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Removed::AlreadyGone),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                if !killed {
                    kill_members(dir);
                    killed = true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("rmdir {} (processes still in it after cgroup.kill and {KILL_WAIT:?}?)", dir.display())
                })
            }
        }
    }
}

/// cgroup.kill (Linux >= 5.14), else SIGKILL to each member.
fn kill_members(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    if let Ok(s) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        for pid in s.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
            crate::sys::kill(pid, libc::SIGKILL);
        }
    }
}

/// Remove a shared level if `apply` created it and nothing else is under it.
fn remove_shared(dir: &Path) -> Result<Removed> {
    if !dir.exists() {
        return Ok(Removed::AlreadyGone);
    }
    if !is_marked(dir) {
        return Ok(Removed::KeptExisting);
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(Removed::Removed),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Removed::AlreadyGone),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::ENOTEMPTY)) => Ok(Removed::KeptInUse),
        Err(e) => Err(e).with_context(|| format!("rmdir {}", dir.display())),
    }
}

/// Remove the plan's tree under `root`, children first. Pod and container
/// cgroups go (with their processes); shared levels go only when `apply`
/// created them and they are empty.
pub fn delete(root: &Path, plan: &Plan) -> Result<Vec<(Level, Removed)>> {
    let mut out = Vec::new();
    for level in plan.levels.iter().rev() {
        let dir = root.join(&level.rel);
        let r = if level.kind.shared() { remove_shared(&dir)? } else { remove_tree(&dir)? };
        out.push((level.clone(), r));
    }
    Ok(out)
}
