//! cpu.max, enforced by schedbe (the BPF side is src/bpf/cpumax.bpf.h).
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
use crate::bpf_skel::BpfSkel;
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
    /// those with the cpu controller, the root excluded).
    pub fn sync(&mut self, skel: &mut BpfSkel, root: &Path, cgroups: &[(u64, &str)]) -> Result<()> {
        let mut chains_changed = false;
        let mut live = HashSet::new();
        for &(id, rel) in cgroups {
            live.insert(id);
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
                    skel.maps.bw_stats.update(&s.to_ne_bytes(), &[0u8; std::mem::size_of::<bpf_intf::bw_stat>()], MapFlags::ANY)?;
                    skel.maps.bw_conf.update(&s.to_ne_bytes(), &conf_bytes(id, None), MapFlags::ANY)?;
                    skel.maps.bw_slot_of.update(&id.to_ne_bytes(), &s.to_ne_bytes(), MapFlags::ANY).context("cannot update bw_slot_of")?;
                    self.slot_of.insert(id, s);
                    self.slots.insert(s, Slot { rel: rel.to_string(), limit: None });
                    s
                }
            };
            let Some(cur) = self.slots.get_mut(&slot) else { continue };
            cur.rel = rel.to_string();
            if cur.limit != limit {
                skel.maps.bw_conf.update(&slot.to_ne_bytes(), &conf_bytes(id, limit), MapFlags::ANY).context("cannot update bw_conf")?;
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
            let _ = skel.maps.bw_slot_of.delete(&id.to_ne_bytes());
            // No limit: the slot's timer releases whatever it still holds.
            skel.maps.bw_conf.update(&slot.to_ne_bytes(), &conf_bytes(0, None), MapFlags::ANY)?;
            if let Some(s) = self.slots.remove(&slot) {
                chains_changed |= s.limit.is_some();
            }
            self.slot_of.remove(&id);
            self.free.push(slot);
        }
        let bss = skel.maps.bss_data.as_mut().context("BPF bss missing")?;
        bss.bw_on = self.limited() > 0;
        if chains_changed {
            bss.bw_gen = bss.bw_gen.wrapping_add(1);
        }
        Ok(())
    }

    /// Did ops.cgroup_set_bandwidth see a cgroup that has no slot yet? (Clears the request.)
    pub fn rescan_requested(skel: &mut BpfSkel) -> bool {
        match skel.maps.bss_data.as_mut() {
            Some(bss) if bss.bw_rescan_req != 0 => {
                bss.bw_rescan_req = 0;
                true
            }
            _ => false,
        }
    }

    /// cpu.stat-like counters of every limited cgroup, by path.
    pub fn stats(&self, skel: &BpfSkel) -> BTreeMap<String, CgroupBw> {
        let now = monotonic_ns();
        let mut out = BTreeMap::new();
        for (slot, s) in &self.slots {
            let Some(l) = s.limit else { continue };
            let Ok(Some(v)) = skel.maps.bw_stats.lookup(&slot.to_ne_bytes(), MapFlags::ANY) else { continue };
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

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns(); every policy's userspace uses it.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
