//! Host helpers: the clock the BPF side uses, CPU lists, privileges, where
//! cgroup v2 is mounted.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use schedbe_cgroup::CGROUP_ROOT;

/// CLOCK_MONOTONIC in nanoseconds: the clock bpf_ktime_get_ns() reads.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Parse a kernel CPU list ("0-3,5,7-8").
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let a: u32 = a
            .trim()
            .parse()
            .with_context(|| format!("bad CPU list {s:?}"))?;
        let b: u32 = b
            .trim()
            .parse()
            .with_context(|| format!("bad CPU list {s:?}"))?;
        if b < a {
            bail!("bad CPU list {s:?}");
        }
        out.extend(a..=b);
    }
    Ok(out)
}

pub(crate) fn check_privileges() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    // Not root: accept CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN) in the effective set.
    let caps = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0);
    const CAP_SYS_ADMIN: u64 = 21;
    const CAP_PERFMON: u64 = 38;
    const CAP_BPF: u64 = 39;
    let has = |c: u64| caps & (1 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    bail!("schedbe trace needs root (CAP_BPF/CAP_PERFMON)")
}

/// Address of kernel text symbol `name` in /proc/kallsyms; None when it is
/// absent or its address is hidden (kptr_restrict shows zeros).
pub fn kallsyms_addr(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
    kallsyms_find(&text, name)
}

fn kallsyms_find(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (addr, kind, sym) = (f.next()?, f.next()?, f.next()?);
        // a text symbol of the kernel itself (no [module])
        (sym == name && kind.eq_ignore_ascii_case("t") && f.next().is_none())
            .then(|| u64::from_str_radix(addr, 16).ok())
            .flatten()
            .filter(|&a| a != 0)
    })
}

/// Is `name` a text symbol of the kernel itself (its address may be hidden)?
pub fn kallsyms_has(name: &str) -> bool {
    std::fs::read_to_string("/proc/kallsyms").is_ok_and(|t| kallsyms_names(&t, name))
}

fn kallsyms_names(text: &str, name: &str) -> bool {
    text.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() == 3 && f[2] == name && f[1].eq_ignore_ascii_case("t")
    })
}

/// The running kernel's tick length, 1e9 / CONFIG_HZ ns, from
/// /boot/config-<release> (the file libbpf reads too).
pub fn tick_ns() -> Result<u64> {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").context("cannot read the kernel release")?;
    let path = format!("/boot/config-{}", rel.trim());
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    config_tick_ns(&text).with_context(|| format!("no valid CONFIG_HZ in {path}"))
}

fn config_tick_ns(config: &str) -> Option<u64> {
    let hz: u64 = config.lines().find_map(|l| l.strip_prefix("CONFIG_HZ="))?.trim().parse().ok()?;
    (hz > 0).then(|| 1_000_000_000 / hz)
}

/// CPUs in nohz_full mode (their tick stops while one task runs); empty
/// when there are none or the kernel does not say.
pub fn nohz_full_cpus() -> Vec<u32> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/nohz_full").unwrap_or_default();
    match s.trim() {
        "" | "(null)" => Vec::new(),
        list => parse_cpu_list(list).unwrap_or_default(),
    }
}

/// Where the cgroup v2 hierarchy is mounted: [`CGROUP_ROOT`] on unified
/// hosts, elsewhere (e.g. /sys/fs/cgroup/unified) on hybrid v1/v2 hosts. The
/// BPF side matches the task's v2 cgroup (cgroups->dfl_cgrp), so patterns
/// must be resolved in that hierarchy.
pub fn cgroup2_root() -> Option<PathBuf> {
    if schedbe_cgroup::cgroup2_mounted() {
        return Some(PathBuf::from(CGROUP_ROOT));
    }
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    cgroup2_mount_in(&mounts)
}

fn cgroup2_mount_in(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 3 && f[2] == "cgroup2").then(|| PathBuf::from(unescape_mount(f[1])))
    })
}

/// /proc/mounts escapes space, tab, newline and backslash as \ooo.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push(((b[i + 1] - b'0') << 6) | ((b[i + 2] - b'0') << 3) | (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup2_mount_discovery() {
        let hybrid =
            "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        assert_eq!(
            cgroup2_mount_in(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            cgroup2_mount_in("cgroup2 /a\\040b cgroup2 rw 0 0"),
            Some(PathBuf::from("/a b"))
        );
        assert_eq!(
            cgroup2_mount_in("cgroup /sys/fs/cgroup/cpu cgroup rw 0 0"),
            None
        );
        assert_eq!(unescape_mount("x\\134y\\"), "x\\y\\");
    }

    #[test]
    fn kallsyms_lookup() {
        let t = "ffffffff81000000 T _text\nffffffff810a1230 t hrtimer_wakeup\nffffffffc0001000 t hrtimer_wakeup_x [mod]\n";
        assert_eq!(kallsyms_find(t, "hrtimer_wakeup"), Some(0xffffffff810a1230));
        assert_eq!(kallsyms_find(t, "hrtimer"), None);
        let hidden = "0000000000000000 t hrtimer_wakeup\n";
        assert_eq!(kallsyms_find(hidden, "hrtimer_wakeup"), None, "kptr_restrict");
        let module = "ffffffffc0001000 t hrtimer_wakeup [mod]\n";
        assert_eq!(kallsyms_find(module, "hrtimer_wakeup"), None);
    }

    #[test]
    fn kallsyms_names_and_hz() {
        let t = "0000000000000000 T sched_tick\nffffffffc0001000 t other [mod]\n";
        assert!(kallsyms_names(t, "sched_tick"), "a hidden address still names the symbol");
        assert!(!kallsyms_names(t, "other"), "a module's");
        assert!(!kallsyms_names(t, "sched"));
        assert_eq!(config_tick_ns("# x\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"), Some(4_000_000));
        assert_eq!(config_tick_ns("CONFIG_HZ=1000"), Some(1_000_000));
        assert_eq!(config_tick_ns("CONFIG_HZ=0\n"), None);
        assert_eq!(config_tick_ns("CONFIG_HZ_250=y\n"), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,5,7-8\n").unwrap(),
            vec![0, 1, 2, 3, 5, 7, 8]
        );
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }
}
