//! Scheduler configuration: a TOML file (`--config`) overridden by flags.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// How a cgroup's `cpu.max` is read (docs/kubernetes.md, "CPU limits").
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LimitMode {
    /// The kernel's semantics: quota CPU time per period, on any number of CPUs
    #[default]
    Quota,
    /// The paper's reading: a limit of N CPUs also means at most ceil(N)
    /// CPUs at any instant; the fraction is a quota per period
    Concurrency,
}

/// Everything `schedbe run` can be told. Every field has a default, so an
/// empty file is a valid config; unknown keys are rejected.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Extra BE cgroup path patterns (globs relative to /sys/fs/cgroup).
    pub be_cgroups: Vec<String>,
    /// Include the kubelet BestEffort patterns (both cgroup drivers).
    pub default_be_cgroups: bool,
    /// LC time slice.
    pub lc_slice_us: u64,
    /// An LC task that wakes at least this far (virtual time) behind the LC
    /// task on a busy CPU preempts it; 0: LC never preempts LC.
    pub lc_preempt_us: u64,
    /// ... once that task has run this long (at once if the woken task runs
    /// less than this per wakeup on average).
    pub lc_preempt_min_us: u64,
    /// The most virtual-time credit a sleeping LC task keeps when it wakes,
    /// i.e. how far ahead of tasks that kept running it may be queued
    /// (default: one LC slice).
    pub lc_wake_credit_us: Option<u64>,
    /// Reservations (resv.rs): an LC wakeup of a cgroup that one more CPU
    /// keeps within its claim preempts, at once, a task of a cgroup running
    /// on more CPUs than its fair share.
    pub reservations: bool,
    /// BE time slice (LC preempts BE anyway, so it can be long).
    pub be_slice_us: u64,
    /// A BE task queued longer than this gets one guard slice.
    pub starvation_limit_ms: u64,
    /// Length of a guard slice.
    pub guard_slice_us: u64,
    /// How often to rescan the cgroup tree (new BE-pattern cgroups, cpu.max,
    /// cpu.weight). Cgroup moves and cpu.idle writes need no rescan: the BPF
    /// side sees them at the next decision (tier_cache.bpf.h).
    pub rescan_ms: u64,
    /// How often to recompute the flattened LC cgroup weights.
    pub flatten_ms: u64,
    /// Park (freeze) BE cgroups whose tasks starve under LC overload.
    pub park: bool,
    /// A BE task runnable for this long that got less than 1/32 of it on a
    /// CPU gets its cgroup parked, if the cgroup as a whole then also gets
    /// less than 1/32 of a CPU for half as long again.
    pub park_after_ms: u64,
    /// Parked cgroups are thawed once LC has left idle capacity this long.
    pub unpark_after_ms: u64,
    /// Idle capacity, in percent of one CPU, that counts for unparking.
    pub unpark_idle_pct: u64,
    /// Where schedbe records the cgroups it froze (thawed at the next start).
    pub state_file: String,
    /// cpu.max: quota (kernel-compatible) or concurrency.
    pub limit_mode: LimitMode,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            be_cgroups: Vec::new(),
            default_be_cgroups: true,
            lc_slice_us: 5_000,
            lc_preempt_us: 400,
            lc_preempt_min_us: 200,
            lc_wake_credit_us: None,
            reservations: true,
            be_slice_us: 20_000,
            starvation_limit_ms: 5_000,
            guard_slice_us: 2_000,
            rescan_ms: 1000,
            flatten_ms: 250,
            park: true,
            park_after_ms: 3000,
            unpark_after_ms: 500,
            unpark_idle_pct: 10,
            state_file: crate::park::DEFAULT_STATE_FILE.to_string(),
            limit_mode: LimitMode::Quota,
        }
    }
}

/// The sched_ext watchdog ejects a scheduler whose runnable task waits 30 s;
/// the guard must fire well before that, including its own interval.
pub const MAX_STARVATION_LIMIT_MS: u64 = 20_000;

impl Config {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config {}", path.display()))?;
        let cfg: Config = toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}", e.message()))
            .with_context(|| format!("invalid config {}", path.display()))?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<()> {
        check_range("lc_slice_us", self.lc_slice_us, 100, 100_000)?;
        check_range("lc_preempt_us", self.lc_preempt_us, 0, 100_000)?;
        check_range("lc_preempt_min_us", self.lc_preempt_min_us, 0, 100_000)?;
        if let Some(c) = self.lc_wake_credit_us {
            check_range("lc_wake_credit_us", c, 0, 100_000)?;
        }
        check_range("be_slice_us", self.be_slice_us, 100, 1_000_000)?;
        check_range("guard_slice_us", self.guard_slice_us, 100, 20_000)?;
        check_range("starvation_limit_ms", self.starvation_limit_ms, 100, MAX_STARVATION_LIMIT_MS)?;
        check_range("rescan_ms", self.rescan_ms, 10, 10_000)?;
        check_range("flatten_ms", self.flatten_ms, 10, 10_000)?;
        self.validate_park()?;
        if self.park && self.park_after_ms >= self.starvation_limit_ms {
            bail!(
                "park_after_ms ({}) must be below starvation_limit_ms ({}): the guard slice would keep resetting the wait, so nothing would ever park",
                self.park_after_ms,
                self.starvation_limit_ms
            );
        }
        self.rules()?;
        Ok(())
    }

    /// The parking settings alone (every policy with a BE tier parks).
    pub fn validate_park(&self) -> Result<()> {
        check_range("park_after_ms", self.park_after_ms, 100, MAX_STARVATION_LIMIT_MS)?;
        check_range("unpark_after_ms", self.unpark_after_ms, 100, 3_600_000)?;
        check_range("unpark_idle_pct", self.unpark_idle_pct, 1, 100)?;
        if !self.state_file.starts_with('/') {
            bail!("state_file must be an absolute path, got {:?}", self.state_file);
        }
        Ok(())
    }

    /// Parking as a policy's daemon runs it (park.rs).
    pub fn park_options(&self) -> crate::park::ParkOptions {
        let state_file = std::path::PathBuf::from(&self.state_file);
        crate::park::ParkOptions {
            settings: self.park.then(|| crate::park::ParkSettings {
                unpark_after: std::time::Duration::from_millis(self.unpark_after_ms),
                unpark_idle_cpus: self.unpark_idle_pct as f64 / 100.0,
                confirm: std::time::Duration::from_millis(self.park_after_ms / 2),
                state_file: state_file.clone(),
            }),
            state_file,
            window_ns: if self.park { self.park_after_ms * 1_000_000 } else { 0 },
        }
    }

    /// The BE path patterns, compiled.
    pub fn rules(&self) -> Result<schedbe_cgroup::BeRules> {
        let mut pats: Vec<String> = Vec::new();
        if self.default_be_cgroups {
            pats.extend(schedbe_cgroup::DEFAULT_BE_PATTERNS.iter().map(|s| s.to_string()));
        }
        pats.extend(self.be_cgroups.iter().cloned());
        schedbe_cgroup::BeRules::new(&pats)
    }
}

fn check_range(name: &str, v: u64, lo: u64, hi: u64) -> Result<()> {
    if v < lo || v > hi {
        bail!("{name} = {v} is out of range [{lo}, {hi}]");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_defaults() {
        let c: Config = toml::from_str("").unwrap();
        assert_eq!(c, Config::default());
        c.validate().unwrap();
    }

    #[test]
    fn unknown_key_and_bad_values_are_rejected() {
        assert!(toml::from_str::<Config>("lc_slice = 5").is_err());
        let c: Config = toml::from_str("starvation_limit_ms = 40000").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("starvation_limit_ms"), "{e}");
        let c: Config = toml::from_str("be_cgroups = [\"a/[b\"]").unwrap();
        assert!(c.validate().is_err());
        let c: Config = toml::from_str("park_after_ms = 6000").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("starvation_limit_ms"));
        let c: Config = toml::from_str("park = false\npark_after_ms = 6000").unwrap();
        c.validate().unwrap();
        let c: Config = toml::from_str("state_file = \"rel/x\"").unwrap();
        assert!(c.validate().is_err());
    }

    #[test]
    fn lc_preemption_settings() {
        // 0 turns LC wakeup preemption off; it is a valid setting, not an error
        let c: Config = toml::from_str("lc_preempt_us = 0\nlc_preempt_min_us = 0").unwrap();
        c.validate().unwrap();
        let c: Config = toml::from_str("lc_preempt_us = 200000").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("lc_preempt_us"));
        let c: Config = toml::from_str("lc_preempt_min_us = 200000").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("lc_preempt_min_us"));
        let c: Config = toml::from_str("lc_wake_credit_us = 1000").unwrap();
        assert_eq!((c.lc_wake_credit_us, c.validate().is_ok()), (Some(1000), true));
        assert_eq!(Config::default().lc_wake_credit_us, None, "one LC slice unless set");
        let c: Config = toml::from_str("lc_wake_credit_us = 200000").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("lc_wake_credit_us"));
    }

    #[test]
    fn limit_mode() {
        assert_eq!(Config::default().limit_mode, LimitMode::Quota);
        let c: Config = toml::from_str("limit_mode = \"concurrency\"").unwrap();
        assert_eq!(c.limit_mode, LimitMode::Concurrency);
        let e = toml::from_str::<Config>("limit_mode = \"cores\"").unwrap_err().to_string();
        assert!(e.contains("quota") && e.contains("concurrency"), "{e}");
    }
}
