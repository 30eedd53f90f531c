//! Reservations: which cgroups get an entitlement slot in BPF (resv.bpf.h),
//! and what each is entitled to.
//!
//! After every flattening pass, each active cpu group other than the root
//! gets a slot holding its claim and its fair share in milli-CPUs
//! (`Flat::claim`, `Flat::entitled`, x the CPUs), once at least two groups
//! compete. An LC task that wakes to find no CPU idle or running BE, and
//! whose group stays within its claim with one more CPU, preempts a task of
//! a group running above its fair share. On a Kubernetes node that is a pod
//! below its request preempting a pod above its own, at once, where virtual
//! time alone would make it wait for a slice or a vtime lead.
//!
//! A group with no slot (the root, a group alone on the machine) costs its
//! context switches nothing: with no slot at all, BPF skips the lot
//! (`resv_on`). Slots are reused only once no task counts in them.

use std::collections::{HashMap, HashSet};

use anyhow::{Context, Result};
use libbpf_rs::MapCore;
use libbpf_rs::MapFlags;
use log::warn;

use super::bpf::BpfSkel;
use super::flatten::Flat;
use crate::bpf_intf;

const MAX_SLOTS: u32 = bpf_intf::schedbe_consts_SCHEDBE_RESV_MAX_SLOTS;
/// A retired slot's entitlement: no task counted in it preempts or is a victim.
const RETIRED: Ent = Ent { claim_milli: 0, fair_milli: u32::MAX / 2 };

/// One group's entitlement, milli-CPUs (struct resv_ent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ent {
    pub claim_milli: u32,
    pub fair_milli: u32,
}

impl Ent {
    fn bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.claim_milli.to_ne_bytes());
        b[4..].copy_from_slice(&self.fair_milli.to_ne_bytes());
        b
    }
}

fn milli(frac: f64, nr_cpus: u64) -> u32 {
    (frac * nr_cpus as f64 * 1000.0).round().clamp(0.0, f64::from(u32::MAX / 4)) as u32
}

/// What to write: a group's slot and entitlement, and the cgroups that map to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// group id -> entitlement
    pub groups: HashMap<u64, Ent>,
    /// cgroup id -> its group id, for every cgroup whose group has a slot
    pub members: HashMap<u64, u64>,
}

/// The groups that get a slot and the cgroups mapped to them (pure: unit-tested).
pub fn plan(flat: &HashMap<u64, Flat>, root_id: u64, nr_cpus: u64) -> Plan {
    let mut groups = HashMap::new();
    for f in flat.values() {
        if f.group != root_id && f.active {
            groups.insert(f.group, Ent { claim_milli: milli(f.claim, nr_cpus), fair_milli: milli(f.entitled, nr_cpus) });
        }
    }
    // A single group with a slot has nobody to preempt or be preempted by.
    if groups.len() < 2 {
        groups.clear();
    }
    let members = flat.iter().filter(|(_, f)| groups.contains_key(&f.group)).map(|(id, f)| (*id, f.group)).collect();
    Plan { groups, members }
}

#[derive(Default)]
pub struct Reservations {
    /// group id -> slot
    slot_of: HashMap<u64, u32>,
    /// cgroup id -> slot, as written to cgrp_resv
    written: HashMap<u64, u32>,
    /// slot -> entitlement as written
    ent: HashMap<u32, Ent>,
    /// slots no group uses any more, waiting for their counts to drain
    retiring: HashSet<u32>,
    free: Vec<u32>,
    next: u32,
    full_warned: bool,
}

impl Reservations {
    /// Apply a flattening pass's result. True when cgroup -> slot entries
    /// changed (the caller bumps factor_gen so tasks look theirs up again).
    pub fn update(&mut self, skel: &mut BpfSkel, flat: &HashMap<u64, Flat>, root_id: u64, nr_cpus: u64) -> Result<bool> {
        let p = plan(flat, root_id, nr_cpus);
        let mut changed = false;

        // Groups that lost their slot: unmap, retire (never a victim), free once drained.
        for (group, slot) in self.slot_of.clone() {
            if !p.groups.contains_key(&group) {
                self.slot_of.remove(&group);
                self.write_ent(skel, slot, RETIRED)?;
                self.retiring.insert(slot);
            }
        }
        for slot in self.retiring.clone() {
            if self.running(skel, slot)? <= 0 {
                self.retiring.remove(&slot);
                self.ent.remove(&slot);
                self.free.push(slot);
            }
        }
        for (&group, &ent) in &p.groups {
            let slot = match self.slot_of.get(&group) {
                Some(&s) => s,
                None => match self.alloc() {
                    Some(s) => {
                        self.slot_of.insert(group, s);
                        s
                    }
                    None => continue,
                },
            };
            if self.ent.get(&slot) != Some(&ent) {
                self.write_ent(skel, slot, ent)?;
            }
        }
        // cgroup id -> slot
        let want: HashMap<u64, u32> =
            p.members.iter().filter_map(|(id, g)| self.slot_of.get(g).map(|&s| (*id, s))).collect();
        for (id, _) in self.written.clone() {
            if !want.contains_key(&id) {
                let _ = skel.maps.cgrp_resv.delete(&id.to_ne_bytes());
                self.written.remove(&id);
                changed = true;
            }
        }
        for (&id, &slot) in &want {
            if self.written.get(&id) != Some(&slot) {
                skel.maps.cgrp_resv.update(&id.to_ne_bytes(), &slot.to_ne_bytes(), MapFlags::ANY).context("writing cgrp_resv")?;
                self.written.insert(id, slot);
                changed = true;
            }
        }
        let bss = skel.maps.bss_data.as_mut().context("BPF bss missing")?;
        bss.resv_on = !self.slot_of.is_empty();
        Ok(changed)
    }

    /// Groups with a slot now.
    pub fn len(&self) -> usize {
        self.slot_of.len()
    }

    fn alloc(&mut self) -> Option<u32> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        if self.next + 1 >= MAX_SLOTS {
            if !self.full_warned {
                warn!("reservations: more than {} competing cgroups; the rest get no entitlement slot", MAX_SLOTS - 1);
                self.full_warned = true;
            }
            return None;
        }
        self.next += 1; // slot 0 means "none"
        Some(self.next)
    }

    fn write_ent(&mut self, skel: &mut BpfSkel, slot: u32, ent: Ent) -> Result<()> {
        skel.maps.resv_ents.update(&slot.to_ne_bytes(), &ent.bytes(), MapFlags::ANY).context("writing resv_ents")?;
        self.ent.insert(slot, ent);
        Ok(())
    }

    /// CPUs the slot's tasks run on now (BPF's count; userspace never writes it).
    fn running(&self, skel: &BpfSkel, slot: u32) -> Result<i32> {
        let v = skel.maps.resv_running.lookup(&slot.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_else(|| vec![0; 4]);
        Ok(i32::from_ne_bytes(v[..4].try_into()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(group: u64, entitled: f64, claim: f64, active: bool) -> Flat {
        Flat { factor: 1 << 16, group, entitled, claim, active }
    }

    #[test]
    fn two_pods_get_slots_in_milli_cpus() {
        let flat: HashMap<u64, Flat> = [
            (1, f(1, 0.0, 0.0, false)),
            (4, f(4, 39.0 / 59.0, 0.65, true)),
            (7, f(7, 20.0 / 59.0, 0.7, true)),
            (8, f(7, 20.0 / 59.0, 0.7, true)),
        ]
        .into();
        let p = plan(&flat, 1, 2);
        let e = |c, f| Ent { claim_milli: c, fair_milli: f };
        assert_eq!(p.groups, [(4, e(1300, 1322)), (7, e(1400, 678))].into());
        assert_eq!(p.members, [(4, 4), (7, 7), (8, 7)].into());
    }

    #[test]
    fn no_slots_for_a_lone_group_the_root_or_idle_groups() {
        let lone: HashMap<u64, Flat> = [(1, f(1, 0.2, 0.2, true)), (2, f(2, 0.8, 0.8, true)), (3, f(3, 0.5, 0.5, false))].into();
        assert!(plan(&lone, 1, 4).groups.is_empty(), "one non-root active group: nothing to preempt");
    }
}
