//! Checks made before anything is changed, each failing with one clear line.

use std::path::Path;

use anyhow::{bail, Result};

const SCX_SYSFS: &str = "/sys/kernel/sched_ext";

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// Does the running kernel have sched_ext?
pub fn has_sched_ext() -> bool {
    Path::new(SCX_SYSFS).join("state").exists()
}

/// The loaded sched_ext scheduler, if any ("" when state is disabled).
pub fn loaded_scheduler() -> Option<String> {
    let state = std::fs::read_to_string(Path::new(SCX_SYSFS).join("state")).ok()?;
    if state.trim() == "disabled" {
        return None;
    }
    let ops = std::fs::read_to_string(Path::new(SCX_SYSFS).join("root/ops")).unwrap_or_default();
    Some(format!("{} ({})", ops.trim(), state.trim()))
}

/// Everything `schedbe run` needs from the machine.
pub fn check_run() -> Result<()> {
    if !has_sched_ext() {
        bail!(
            "kernel {} has no sched_ext (CONFIG_SCHED_CLASS_EXT); boot a kernel >= 6.12 with it, or try it in a VM with `schedbe vm -- schedbe run`",
            kernel_release()
        );
    }
    if unsafe { libc::geteuid() } != 0 {
        bail!("schedbe run needs root (it loads a BPF scheduler)");
    }
    if !schedbe_cgroup::cgroup2_mounted() {
        bail!("cgroup v2 is not mounted at {}; schedbe classifies tasks by cgroup v2", schedbe_cgroup::CGROUP_ROOT);
    }
    if let Some(other) = loaded_scheduler() {
        bail!("another sched_ext scheduler is loaded: {other}");
    }
    Ok(())
}
