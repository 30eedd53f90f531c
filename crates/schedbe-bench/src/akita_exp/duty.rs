//! `schedbe-bench duty`: a periodic CPU demand, the LO VMs of the Akita
//! experiments ("each burning 25% of the core") and the HI VM whose demand
//! steps up. It asks for `burn_ms` of CPU time (CLOCK_THREAD_CPUTIME_ID, so
//! time spent waiting for the CPU does not count) per period, periods being
//! multiples of the period on the monotonic clock: whenever it has had less
//! than that rate since it started it burns, otherwise it sleeps to the next
//! boundary. What it is owed is capped at two periods' worth, so a demand
//! above what the scheduler gives is a steady backlog (it is always
//! runnable), and a demand below it is met period by period.

use anyhow::{bail, Result};

use crate::sys::monotonic_ns;

#[derive(clap::Args, Debug, Clone)]
pub struct DutyArgs {
    /// Period in ms
    #[arg(long, default_value_t = 100.0)]
    pub period_ms: f64,
    /// CPU time to burn per period, in ms (>= period: always busy)
    #[arg(long)]
    pub burn_ms: f64,
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn run(a: &DutyArgs) -> Result<()> {
    if !(a.period_ms.is_finite() && a.period_ms >= 1.0 && a.period_ms <= 10_000.0) {
        bail!("--period-ms must be in [1, 10000], got {}", a.period_ms);
    }
    if !(a.burn_ms.is_finite() && a.burn_ms > 0.0) {
        bail!("--burn-ms must be positive, got {}", a.burn_ms);
    }
    let period = (a.period_ms * 1e6) as u64;
    let burn = (a.burn_ms * 1e6) as u64;
    let mut x = 0u64;
    let t0 = monotonic_ns();
    let start = t0 - t0 % period;
    let cpu0 = thread_cpu_ns();
    let mut forgiven = 0u64;
    loop {
        let now = monotonic_ns();
        let periods = (now - start) / period + 1;
        let want = periods * burn;
        let had = thread_cpu_ns() - cpu0 + forgiven;
        if had + 2 * burn < want {
            // more than two periods behind: forget the excess
            forgiven += want - had - 2 * burn;
            continue;
        }
        if had >= want {
            let next = start + periods * period;
            std::thread::sleep(std::time::Duration::from_nanos(next.saturating_sub(now).max(1)));
            continue;
        }
        // burn in slices of at most 1 ms, then look again
        let end = thread_cpu_ns() + (want - had).min(1_000_000);
        while thread_cpu_ns() < end {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
}
