//! The periodic servers the BPF side runs (akita.bpf.c), as userspace plans
//! them: server ids, each server's parameters, the servers of each CPU, and
//! which cgroup puts a task on which server. No BPF here, so it is tested
//! like the rest of the offline part.

use std::collections::BTreeMap;

use super::edfvd::{self, Server};
use super::placement::Placement;

/// Limits of the BPF side (src/bpf/akita/intf.h).
pub const MAX_SERVERS: usize = 1024;
pub const MAX_PER_CPU: usize = 32;

/// One server as the BPF side gets it (struct akita_server_conf), in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerConf {
    pub budget_ns: u64,
    pub c_opt_ns: u64,
    pub period_ns: u64,
    pub rel_deadline_ns: u64,
    pub cpu: u32,
    pub vm: u32,
    pub hi: bool,
}

/// Contiguous server ids, one range per VM, so that a VM cgroup maps to
/// `base + tid % n` on the BPF side.
#[derive(Debug, Clone)]
pub struct Ids {
    used: Vec<bool>,
}

impl Default for Ids {
    fn default() -> Self {
        Self { used: vec![false; MAX_SERVERS] }
    }
}

impl Ids {
    /// The lowest free range of `n` ids.
    pub fn alloc(&mut self, n: usize) -> Option<u32> {
        if n == 0 || n > MAX_SERVERS {
            return None;
        }
        let base = (0..=MAX_SERVERS - n).find(|&b| self.used[b..b + n].iter().all(|u| !u))?;
        self.used[base..base + n].iter_mut().for_each(|u| *u = true);
        Some(base as u32)
    }

    pub fn free(&mut self, base: u32, n: usize) {
        let b = base as usize;
        if let Some(s) = self.used.get_mut(b..(b + n).min(MAX_SERVERS)) {
            s.iter_mut().for_each(|u| *u = false);
        }
    }
}

/// The BPF parameters of a VM's vCPU `index` placed on `cpu`, whose EDF-VD
/// factor is `x` (equation 5: a HI server's deadline is x*T after its
/// period starts). A HI server's budget per period is C_pes: it may use all
/// of it, and the mode switch at C_opt decides what the LO servers get.
pub fn server_conf(s: &Server, cpu: u32, vm: u32, x: f64) -> ServerConf {
    let rel = edfvd::relative_deadline_us(s, x).max(1) * 1000;
    match *s {
        Server::Hi { c_opt_us, c_pes_us, period_us } => ServerConf {
            budget_ns: c_pes_us * 1000,
            c_opt_ns: c_opt_us * 1000,
            period_ns: period_us * 1000,
            rel_deadline_ns: rel,
            cpu,
            vm,
            hi: true,
        },
        Server::Lo { c_opt_us, period_us } => ServerConf {
            budget_ns: c_opt_us * 1000,
            c_opt_ns: c_opt_us * 1000,
            period_ns: period_us * 1000,
            rel_deadline_ns: rel,
            cpu,
            vm,
            hi: false,
        },
    }
}

/// Every placed server's parameters, by server id, given the id range of
/// each admitted VM (`bases`: VM name -> (first id, VM index)). x comes from
/// the current placement of each CPU, so adding a VM to a CPU moves the
/// deadlines of the HI servers already there.
pub fn plan(placement: &Placement, bases: &BTreeMap<String, (u32, u32)>) -> (BTreeMap<u32, ServerConf>, BTreeMap<u32, Vec<u32>>) {
    let mut servers = BTreeMap::new();
    let mut per_cpu = BTreeMap::new();
    for slot in placement.slots() {
        let x = slot.test().x.unwrap_or(1.0).clamp(0.0, 1.0);
        let mut ids = Vec::new();
        for v in &slot.vcpus {
            let Some(&(base, vm)) = bases.get(&v.vm) else { continue };
            let sid = base + v.index;
            servers.insert(sid, server_conf(&v.server, slot.cpu, vm, x));
            ids.push(sid);
        }
        per_cpu.insert(slot.cpu, ids);
    }
    (servers, per_cpu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::akita::placement::VmRequest;

    #[test]
    fn ids_are_contiguous_and_reused() {
        let mut ids = Ids::default();
        assert_eq!(ids.alloc(3), Some(0));
        assert_eq!(ids.alloc(2), Some(3));
        ids.free(0, 3);
        assert_eq!(ids.alloc(4), Some(5), "a hole of 3 does not fit 4");
        assert_eq!(ids.alloc(3), Some(0));
        assert_eq!(ids.alloc(0), None);
        assert_eq!(ids.alloc(MAX_SERVERS), None);
    }

    #[test]
    fn paper_example_deadlines() {
        // examples/akita/vms.toml: one type-1 HI VM and three type-2 LO VMs on CPU 0:
        // U1(1) = 0.75, U2(1) = 0.05, x = 0.05 / 0.25 = 0.2.
        let mut p = Placement::new(&[0, 1]);
        let hi = Server::Hi { c_opt_us: 5_000, c_pes_us: 25_000, period_us: 100_000 };
        let lo = Server::Lo { c_opt_us: 25_000, period_us: 100_000 };
        p.add_vm(&VmRequest { name: "mc", server: hi, vcpus: 1, cpus: None }).unwrap();
        for n in ["a", "b", "c"] {
            p.add_vm(&VmRequest { name: n, server: lo, vcpus: 1, cpus: None }).unwrap();
        }
        let bases: BTreeMap<String, (u32, u32)> =
            [("mc", 0), ("a", 1), ("b", 2), ("c", 3)].iter().map(|(n, b)| (n.to_string(), (*b, *b))).collect();
        let (servers, per_cpu) = plan(&p, &bases);
        assert_eq!(per_cpu[&0], vec![0, 1, 2, 3]);
        assert!(per_cpu[&1].is_empty());
        let mc = servers[&0];
        assert!(mc.hi);
        assert_eq!(mc.budget_ns, 25_000_000, "a HI server's budget is C_pes");
        assert_eq!(mc.c_opt_ns, 5_000_000);
        assert_eq!(mc.rel_deadline_ns, 20_000_000, "x*T = 0.2 * 100 ms");
        let a = servers[&1];
        assert!(!a.hi);
        assert_eq!(a.budget_ns, 25_000_000);
        assert_eq!(a.rel_deadline_ns, 100_000_000, "a LO server's deadline is T");
    }
}
