//! The kernel's sched_ext state (/sys/kernel/sched_ext): what is loaded,
//! and waiting for a scheduler to be enabled or disabled.

use std::time::Duration;

use anyhow::{bail, Result};

use crate::proc::Proc;
use crate::sys::monotonic_ns;

pub fn sched_ext_state() -> Option<String> {
    std::fs::read_to_string("/sys/kernel/sched_ext/state").ok().map(|s| s.trim().to_string())
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
