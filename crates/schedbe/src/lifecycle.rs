//! What every policy's `schedbe run` does around loading: run until
//! SIGINT/SIGTERM, reload when the kernel asks for a restart, and fail with
//! a clear message when the kernel ejected the scheduler.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Result};
use libbpf_rs::OpenObject;
use log::info;
use scx_utils::UserExitInfo;

/// Call `load_and_run` (load the policy into the BPF object storage it is
/// given, run it until it stops) until the user asks to stop; the exit
/// status for `schedbe run`. Each load gets storage of its own.
pub fn run_until_stopped(
    shutdown: &AtomicBool,
    mut load_and_run: impl FnMut(&mut MaybeUninit<OpenObject>) -> Result<UserExitInfo>,
) -> Result<i32> {
    loop {
        let uei = load_and_run(&mut MaybeUninit::uninit())?;
        if shutdown.load(Ordering::Relaxed) {
            info!("unloaded; the kernel is back on its default scheduler");
            return Ok(0);
        }
        if uei.should_restart() {
            info!("the kernel asked for a restart; reloading");
            continue;
        }
        // The BPF side exited on its own: uei_report! has printed the kernel's reason.
        bail!("the scheduler was unloaded by the kernel (see the reason above); tasks are back on the default scheduler");
    }
}
