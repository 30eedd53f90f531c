//! Thin, checked wrappers over the Linux calls the harness needs: clocks,
//! scheduling policy, CPU affinity, parent-death signal.

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Context, Result};

/// Seconds (negative as 0) in nanoseconds.
pub fn secs_ns(s: f64) -> u64 {
    (s.max(0.0) * 1e9) as u64
}

/// CLOCK_MONOTONIC in nanoseconds. Every process of a run (client, server, BE
/// workers, tracer) stamps with this clock, so their times line up.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time of the calling thread in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer; these clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleep until CLOCK_MONOTONIC reaches `t_ns` (returns at once if it has).
/// Busy and total jiffies of every CPU (/proc/stat; idle and iowait are not busy).
pub fn cpu_times() -> Result<Vec<(u64, u64)>> {
    let text = std::fs::read_to_string("/proc/stat").context("read /proc/stat")?;
    let mut out = Vec::new();
    for l in text.lines().filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit)) {
        let v: Vec<u64> = l.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        let total: u64 = v.iter().sum();
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        out.push((total - idle, total));
    }
    Ok(out)
}

/// Busy share of all CPUs between two [`cpu_times`] samples, in percent.
pub fn busy_pct(before: &[(u64, u64)], after: &[(u64, u64)]) -> f64 {
    let (mut busy, mut total) = (0u64, 0u64);
    for (a, b) in before.iter().zip(after) {
        busy += b.0.saturating_sub(a.0);
        total += b.1.saturating_sub(a.1);
    }
    if total == 0 {
        0.0
    } else {
        busy as f64 * 100.0 / total as f64
    }
}

pub fn sleep_until_ns(t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: valid timespec; a null remainder is allowed with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// A scheduling policy for a helper's threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Normal,
    Batch,
    Idle,
    Fifo(u8),
}

impl Policy {
    /// Apply to the calling thread only (sched_setscheduler(0) is per thread on
    /// Linux). With `reset_on_fork`, threads and processes it creates start as
    /// SCHED_NORMAL again.
    pub fn apply_to_current_thread(self, reset_on_fork: bool) -> Result<()> {
        let (mut pol, prio) = match self {
            Policy::Normal => (libc::SCHED_OTHER, 0),
            Policy::Batch => (libc::SCHED_BATCH, 0),
            Policy::Idle => (libc::SCHED_IDLE, 0),
            Policy::Fifo(p) => (libc::SCHED_FIFO, p as libc::c_int),
        };
        if reset_on_fork {
            pol |= libc::SCHED_RESET_ON_FORK;
        }
        let param = libc::sched_param { sched_priority: prio };
        // SAFETY: valid pointer to a sched_param.
        let rc = unsafe { libc::sched_setscheduler(0, pol, &param) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            bail!("sched_setscheduler({self}{}): {err}", if reset_on_fork { ", reset-on-fork" } else { "" });
        }
        Ok(())
    }

    pub fn is_rt(self) -> bool {
        matches!(self, Policy::Fifo(_))
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Normal => write!(f, "normal"),
            Policy::Batch => write!(f, "batch"),
            Policy::Idle => write!(f, "idle"),
            Policy::Fifo(p) => write!(f, "fifo:{p}"),
        }
    }
}

impl FromStr for Policy {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "normal" | "other" => Ok(Policy::Normal),
            "batch" => Ok(Policy::Batch),
            "idle" => Ok(Policy::Idle),
            _ => {
                if let Some(p) = s.strip_prefix("fifo:") {
                    let p: u8 = p.parse().with_context(|| format!("policy {s:?}: bad priority"))?;
                    if !(1..=99).contains(&p) {
                        bail!("policy {s:?}: SCHED_FIFO priority must be 1..=99");
                    }
                    Ok(Policy::Fifo(p))
                } else {
                    bail!("unknown policy {s:?} (normal, batch, idle, fifo:PRIO)")
                }
            }
        }
    }
}

/// The calling thread's policy, as a human string (for reports).
pub fn current_policy_desc() -> String {
    // SAFETY: plain syscalls on the calling thread.
    let pol = unsafe { libc::sched_getscheduler(0) };
    let mut param = libc::sched_param { sched_priority: 0 };
    unsafe { libc::sched_getparam(0, &mut param) };
    let reset = pol & libc::SCHED_RESET_ON_FORK != 0;
    let name = match pol & !libc::SCHED_RESET_ON_FORK {
        libc::SCHED_OTHER => "SCHED_NORMAL".to_string(),
        libc::SCHED_BATCH => "SCHED_BATCH".to_string(),
        libc::SCHED_IDLE => "SCHED_IDLE".to_string(),
        libc::SCHED_FIFO => format!("SCHED_FIFO prio {}", param.sched_priority),
        libc::SCHED_RR => format!("SCHED_RR prio {}", param.sched_priority),
        other => format!("policy {other}"),
    };
    if reset {
        format!("{name} | SCHED_RESET_ON_FORK")
    } else {
        name
    }
}

pub use schedbe_cgroup::parse_cpu_list;

pub fn format_cpu_list(cpus: &[usize]) -> String {
    cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

/// CPUs the calling thread may run on.
pub fn allowed_cpus() -> Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            bail!("sched_getaffinity: {}", std::io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

/// The kernel's CPU set of `cpus` (built before a fork, so that a child's
/// pre_exec only has to apply it).
pub fn cpu_set(cpus: &[usize]) -> Result<libc::cpu_set_t> {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c >= libc::CPU_SETSIZE as usize {
                bail!("CPU {c} out of range");
            }
            libc::CPU_SET(c, &mut set);
        }
        Ok(set)
    }
}

/// Restrict the calling thread to `set`; async-signal-safe, for pre_exec.
pub fn apply_cpu_set(set: &libc::cpu_set_t) -> std::io::Result<()> {
    // SAFETY: a valid set and its size.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Restrict the calling thread (and threads it creates later) to `cpus`.
pub fn set_affinity(cpus: &[usize]) -> Result<()> {
    apply_cpu_set(&cpu_set(cpus)?).with_context(|| format!("sched_setaffinity({})", format_cpu_list(cpus)))
}

/// Ask the kernel to send `sig` to this process when its parent thread dies,
/// so helpers never outlive an interrupted orchestrator.
pub fn set_parent_death_signal(sig: libc::c_int) {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) };
}

/// Send a signal to a process; errors (already gone) are ignored.
pub fn kill(pid: u32, sig: libc::c_int) {
    // SAFETY: plain syscall.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Process-wide "stop" flag set by SIGINT/SIGTERM (helpers poll it).
pub mod stop {
    use std::sync::atomic::{AtomicBool, Ordering};

    static STOP: AtomicBool = AtomicBool::new(false);

    extern "C" fn on_signal(_: libc::c_int) {
        STOP.store(true, Ordering::SeqCst);
    }

    /// Install handlers for SIGINT and SIGTERM that only set the flag.
    pub fn install() {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe {
            libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
            libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        }
    }

    pub fn requested() -> bool {
        STOP.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_share_of_all_cpus() {
        // CPU 0 busy 30 of 100 jiffies, CPU 1 busy 70 of 100
        assert_eq!(busy_pct(&[(10, 100), (0, 100)], &[(40, 200), (70, 200)]), 50.0);
        assert_eq!(busy_pct(&[(1, 1)], &[(1, 1)]), 0.0, "no time passed");
        let now = cpu_times().unwrap();
        assert!(!now.is_empty() && now.iter().all(|(b, t)| b <= t), "{now:?}");
    }

    #[test]
    fn policies_parse_and_print() {
        for s in ["normal", "batch", "idle", "fifo:1", "fifo:99"] {
            assert_eq!(s.parse::<Policy>().unwrap().to_string(), s);
        }
        assert_eq!("other".parse::<Policy>().unwrap(), Policy::Normal);
        for bad in ["fifo:0", "fifo:100", "fifo:x", "rr:5", ""] {
            assert!(bad.parse::<Policy>().is_err(), "{bad}");
        }
    }

    #[test]
    fn cpu_lists_format() {
        assert_eq!(format_cpu_list(&[0, 1]), "0,1");
    }

    #[test]
    fn clocks_move_forward() {
        let a = monotonic_ns();
        sleep_until_ns(a + 1_000_000);
        assert!(monotonic_ns() >= a + 1_000_000);
        assert!(!allowed_cpus().unwrap().is_empty());
    }
}
