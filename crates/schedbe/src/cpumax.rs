//! cpu.max, enforced by schedbe (the BPF side is src/bpf/common/cpumax.bpf.h).
//!
//! The kernel's bandwidth control does not apply to sched_ext tasks, so
//! schedbe enforces cpu.max itself. Every cgroup with the cpu controller gets
//! a slot; this module keeps the slots' limits in step with cpu.max and
//! cpu.max.burst, and reads the per-slot counters that `schedbe stats`
//! reports the way cpu.stat does. On v6.17+ ops.cgroup_set_bandwidth applies
//! a write to cpu.max at once; this scan is the ground truth, and the only
//! path on older kernels.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use log::{info, warn};
use scx_stats_derive::{stat_doc, Stats};
use serde::{Deserialize, Serialize};

use crate::bpf_intf;
use schedbe_cgroup::Bandwidth;

const MAX_SLOTS: u32 = bpf_intf::schedbe_consts_SCHEDBE_BW_MAX_SLOTS;

/// A limited cgroup's throttling, as cgroup v2 cpu.stat reports it for CFS.
#[stat_doc]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
pub struct CgroupBw {
    /// cpu.max quota (µs)
    pub quota_us: u64,
    /// cpu.max period (µs)
    pub period_us: u64,
    /// cpu.max.burst (µs)
    pub burst_us: u64,
    /// Periods in which the cgroup ran or stayed throttled.
    pub nr_periods: u64,
    /// Times it was throttled.
    pub nr_throttled: u64,
    /// Time spent throttled (µs), the current span included.
    pub throttled_usec: u64,
    /// CPU time charged against the limit (µs).
    pub usage_usec: u64,
    /// 1 while throttled, else 0
    pub throttled: u64,
    /// Concurrency mode: times one of its tasks was passed over because the
    /// cgroup ran on ceil(quota/period) CPUs already.
    #[serde(default)]
    pub conc_waits: u64,
}

/// cpu.max's maps in a policy's skeleton (cpumax.bpf.h: bw_slot_of, bw_conf, bw_stats).
pub struct BwMaps<'a, M: MapCore> {
    pub slot_of: &'a M,
    pub conf: &'a M,
    pub stats: &'a M,
}

/// What the policy writes to its cpumax.bpf.h globals after a sync.
#[derive(Debug, Clone, Copy)]
pub struct BwGlobals {
    /// bw_on: some cgroup is limited.
    pub on: bool,
    /// bw_gen must be bumped: some task's chain of limited cgroups may have changed.
    pub bump_gen: bool,
}

struct Slot {
    rel: String,
    limit: Option<Bandwidth>,
}

pub struct CpuMax {
    slot_of: HashMap<u64, u32>,
    slots: HashMap<u32, Slot>,
    free: Vec<u32>,
    /// Cgroups whose cpu.max could not be parsed (warned once each).
    warned: HashSet<String>,
    full_warned: bool,
}

impl Default for CpuMax {
    fn default() -> Self {
        Self { slot_of: HashMap::new(), slots: HashMap::new(), free: (0..MAX_SLOTS).rev().collect(), warned: HashSet::new(), full_warned: false }
    }
}

fn conf_bytes(cgid: u64, l: Option<Bandwidth>) -> Vec<u8> {
    let c = bpf_intf::bw_conf {
        cgid,
        quota_ns: l.map_or(0, |l| l.quota_us * 1000),
        period_ns: l.map_or(0, |l| l.period_us * 1000),
        burst_ns: l.map_or(0, |l| l.burst_us * 1000),
    };
    [c.cgid, c.quota_ns, c.period_ns, c.burst_ns].iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn describe(l: &Bandwidth) -> String {
    let cpus = l.quota_us as f64 / l.period_us as f64;
    format!("{} {} (= {cpus:.2} CPUs), burst {} us", l.quota_us, l.period_us, l.burst_us)
}

impl CpuMax {
    /// Number of cgroups with a limit.
    pub fn limited(&self) -> usize {
        self.slots.values().filter(|s| s.limit.is_some()).count()
    }

    /// Bring the slots in step with `cgroups` (id, path relative to `root`;
    /// those with the cpu controller, the root excluded), in the maps of
    /// any policy that includes cpumax.bpf.h. The caller writes the result
    /// to its BPF globals: bw_on, and a bump of bw_gen when chains changed.
    ///
    /// `reread`: read the cpu.max of every cgroup; otherwise only of those
    /// without a slot yet, the others keeping what was read last
    /// (cgrp_watch.bpf.h says when the files must be read again).
    pub fn sync<M: MapCore>(&mut self, maps: &BwMaps<'_, M>, root: &Path, cgroups: &[(u64, &str)], reread: bool) -> Result<BwGlobals> {
        let mut chains_changed = false;
        let mut live = HashSet::new();
        for &(id, rel) in cgroups {
            live.insert(id);
            if !reread && self.slot_of.get(&id).and_then(|s| self.slots.get(s)).is_some_and(|s| s.rel == rel) {
                continue;
            }
            let limit = match schedbe_cgroup::bandwidth(root, rel) {
                Ok(l) => {
                    self.warned.remove(rel);
                    l
                }
                Err(e) => {
                    if self.warned.insert(rel.to_string()) {
                        warn!("cgroup /{rel}: {e:#}; not limited until it is fixed");
                    }
                    None
                }
            };
            let slot = match self.slot_of.get(&id) {
                Some(s) => *s,
                None => {
                    let Some(s) = self.free.pop() else {
                        if !self.full_warned {
                            warn!("more than {MAX_SLOTS} cgroups with the cpu controller: cpu.max of the rest is NOT enforced");
                            self.full_warned = true;
                        }
                        continue;
                    };
                    // A reused slot starts with zero counters.
                    maps.stats.update(&s.to_ne_bytes(), &[0u8; std::mem::size_of::<bpf_intf::bw_stat>()], MapFlags::ANY)?;
                    maps.conf.update(&s.to_ne_bytes(), &conf_bytes(id, None), MapFlags::ANY)?;
                    maps.slot_of.update(&id.to_ne_bytes(), &s.to_ne_bytes(), MapFlags::ANY).context("cannot update bw_slot_of")?;
                    self.slot_of.insert(id, s);
                    self.slots.insert(s, Slot { rel: rel.to_string(), limit: None });
                    s
                }
            };
            let Some(cur) = self.slots.get_mut(&slot) else { continue };
            cur.rel = rel.to_string();
            if cur.limit != limit {
                maps.conf.update(&slot.to_ne_bytes(), &conf_bytes(id, limit), MapFlags::ANY).context("cannot update bw_conf")?;
                chains_changed |= cur.limit.is_some() != limit.is_some();
                match &limit {
                    Some(l) => info!("cpu.max of /{rel}: {} enforced", describe(l)),
                    None => info!("cpu.max of /{rel}: no limit"),
                }
                cur.limit = limit;
            }
        }
        let gone: Vec<(u64, u32)> = self.slot_of.iter().filter(|(id, _)| !live.contains(id)).map(|(i, s)| (*i, *s)).collect();
        for (id, slot) in gone {
            let _ = maps.slot_of.delete(&id.to_ne_bytes());
            // No limit: the slot's timer releases whatever it still holds.
            maps.conf.update(&slot.to_ne_bytes(), &conf_bytes(0, None), MapFlags::ANY)?;
            if let Some(s) = self.slots.remove(&slot) {
                chains_changed |= s.limit.is_some();
            }
            self.slot_of.remove(&id);
            self.free.push(slot);
        }
        Ok(BwGlobals { on: self.limited() > 0, bump_gen: chains_changed })
    }

    /// cpu.stat-like counters of every limited cgroup, by path (`stats`: the policy's bw_stats map).
    pub fn stats(&self, stats: &impl MapCore) -> BTreeMap<String, CgroupBw> {
        let now = monotonic_ns();
        let mut out = BTreeMap::new();
        for (slot, s) in &self.slots {
            let Some(l) = s.limit else { continue };
            let Ok(Some(v)) = stats.lookup(&slot.to_ne_bytes(), MapFlags::ANY) else { continue };
            if v.len() < std::mem::size_of::<bpf_intf::bw_stat>() {
                continue;
            }
            // SAFETY: bw_stat is plain u64 fields; the slice is at least that long.
            let st: bpf_intf::bw_stat = unsafe { std::ptr::read_unaligned(v.as_ptr() as *const _) };
            let open = if st.throttled_since != 0 { now.saturating_sub(st.throttled_since) } else { 0 };
            out.insert(
                format!("/{}", s.rel),
                CgroupBw {
                    quota_us: l.quota_us,
                    period_us: l.period_us,
                    burst_us: l.burst_us,
                    nr_periods: st.nr_periods,
                    nr_throttled: st.nr_throttled,
                    throttled_usec: (st.throttled_ns + open) / 1000,
                    usage_usec: st.usage_ns / 1000,
                    throttled: u64::from(st.throttled_since != 0),
                    conc_waits: st.conc_waits,
                },
            );
        }
        out
    }
}

/// A policy's bw_rescan_req (cpumax.bpf.h): set when ops.cgroup_set_bandwidth
/// saw a limit on a cgroup that has no slot yet. True once per request.
pub fn take_rescan_request(req: &mut u32) -> bool {
    std::mem::replace(req, 0) != 0
}

/// The rescan step of every policy's loop: @rescan runs when the period is
/// @due, and at once when the BPF side saw a cpu.max written on a cgroup
/// created since the last rescan (@bw_written, passed on to @rescan). A failed
/// rescan is logged and the loop goes on; the next one tries again.
/// Returns @due, for the caller to set the next period.
pub fn rescan_step(due: bool, bw_written: bool, rescan: impl FnOnce(bool) -> Result<()>) -> bool {
    if due || bw_written {
        if let Err(e) = rescan(bw_written) {
            warn!("cgroup rescan failed: {e:#}");
        }
    }
    due
}

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns(); every policy's userspace uses it.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How often a policy that does not enforce cpu.max looks for limits again
/// (a file read per cgroup: on a node of 1000 pods, not every second).
const UNENFORCED_RECHECK: std::time::Duration = std::time::Duration::from_secs(30);
/// Cgroups named per warning; the count says how many more.
const UNENFORCED_NAMED: usize = 5;

/// For a policy that does not enforce cpu.max (Akita): sched_ext
/// tasks are outside the kernel's bandwidth control, so while such a policy
/// is loaded every cpu.max limit is lifted. Say so, once per limited cgroup,
/// at start and as limits appear.
pub struct UnenforcedLimits {
    policy: &'static str,
    warned: HashSet<String>,
    next: std::time::Instant,
}

impl UnenforcedLimits {
    pub fn new(policy: &'static str) -> Self {
        Self { policy, warned: HashSet::new(), next: std::time::Instant::now() }
    }

    /// Look for limited cgroups not warned about yet (at most every UNENFORCED_RECHECK).
    pub fn check(&mut self) {
        let now = std::time::Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + UNENFORCED_RECHECK;
        let root = Path::new(schedbe_cgroup::CGROUP_ROOT);
        let Ok(tree) = schedbe_cgroup::walk(root) else { return };
        let mut new = Vec::new();
        for cg in tree.iter().filter(|c| !c.rel.is_empty()) {
            if self.warned.contains(&cg.rel) {
                continue;
            }
            if let Ok(Some(b)) = schedbe_cgroup::bandwidth(root, &cg.rel) {
                new.push(format!("/{} ({} of {} us)", cg.rel, b.quota_us, b.period_us));
                self.warned.insert(cg.rel.clone());
            }
        }
        if new.is_empty() {
            return;
        }
        let more = new.len().saturating_sub(UNENFORCED_NAMED);
        new.truncate(UNENFORCED_NAMED);
        warn!(
            "cpu.max is not enforced under --policy {} (the kernel's bandwidth control skips sched_ext tasks; --policy sched-be enforces it): {}{} run without their limit",
            self.policy,
            new.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        );
    }
}
