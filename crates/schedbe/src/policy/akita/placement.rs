//! Akita's pCPU picker (shared/papers/004, section 3.6): first-fit of vCPUs
//! over CPUs with the EDF-VD test of edfvd.rs.
//!
//! "For each vCPU, our CPU picker assigns the vCPU to the first CPU core that
//! can accommodate the vCPU. If the pCPU picker fails to find an appropriate
//! pCPU for a vCPU, Akita simply notifies the cloud provider, implying that
//! hosting this VM would lead to SLO violations."
//!
//! - Order: the paper runs the picker "when a VM is initially consolidated",
//!   so VMs are placed in arrival order (file order for `akita check`), their
//!   vCPUs in index order, each on the lowest-numbered CPU that passes the
//!   test with it added. The paper sorts nothing, so neither do we.
//! - Admission is all-or-nothing per VM: a VM one of whose vCPUs fits nowhere
//!   is refused and leaves the placement as it was.
//! - vCPUs of one VM may share a CPU: the paper places vCPUs one by one and
//!   does not forbid it.
//! - HI vCPUs are pinned: Akita "does not migrate HI-crit vCPUs" (section
//!   4.3). LO vCPUs get a home CPU here; moving them at runtime (the paper's
//!   RQS) is the daemon's business.
//! - Incremental: `add_vm` and `remove_vm` work against the current
//!   placement; removing a VM never moves the others (HI vCPUs must not
//!   move, and the paper re-places nothing).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::cpus;
use super::edfvd::{self, Crit, Server, Test, Utilisation, Verdict};

/// One vCPU on a CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacedVcpu {
    pub vm: String,
    /// 0-based index within its VM.
    pub index: u32,
    pub server: Server,
    /// HI vCPUs do not migrate.
    pub pinned: bool,
}

/// A CPU and the vCPUs placed on it, in placement order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuSlot {
    pub cpu: u32,
    pub vcpus: Vec<PlacedVcpu>,
}

impl CpuSlot {
    pub fn utilisation(&self) -> Utilisation {
        Utilisation::of(self.vcpus.iter().map(|v| &v.server))
    }

    pub fn test(&self) -> Test {
        edfvd::test(self.utilisation())
    }
}

/// What to admit: a VM's vCPUs all have the same server (section 3.1:
/// "vCPUs inherit these parameters from their corresponding VMs").
#[derive(Debug, Clone)]
pub struct VmRequest<'a> {
    pub name: &'a str,
    pub server: Server,
    pub vcpus: u32,
    /// Restrict the VM to these CPUs; None: all of the placement's.
    pub cpus: Option<&'a [u32]>,
}

/// The test on one candidate CPU, with the refused vCPU added.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    pub cpu: u32,
    #[serde(flatten)]
    pub test: Test,
}

/// A VM one of whose vCPUs fits on no CPU it may use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub vm: String,
    /// 0-based index of the first vCPU that fit nowhere.
    pub vcpu: u32,
    pub vcpus: u32,
    /// Every CPU tried, in order, counting the VM's earlier vCPUs where
    /// they would have gone.
    pub tried: Vec<Candidate>,
}

/// Why `add_vm` did not admit a VM.
#[derive(Debug, Clone, PartialEq)]
pub enum AdmitError {
    /// A VM of that name is placed already.
    Duplicate(String),
    /// The request names CPUs the placement does not have.
    UnknownCpus { vm: String, cpus: Vec<u32> },
    /// The EDF-VD test failed on every CPU for one of its vCPUs.
    Refused(Refusal),
}

/// The vCPUs on a set of CPUs, and which VMs are admitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    slots: Vec<CpuSlot>,
    /// Admitted VM -> the CPU of each of its vCPUs, by index.
    vms: BTreeMap<String, Vec<u32>>,
}

impl Placement {
    /// An empty placement over `cpus`, tried in ascending id order.
    pub fn new(cpus: &[u32]) -> Self {
        let mut ids = cpus.to_vec();
        ids.sort_unstable();
        ids.dedup();
        Self { slots: ids.into_iter().map(|cpu| CpuSlot { cpu, vcpus: Vec::new() }).collect(), vms: BTreeMap::new() }
    }

    pub fn slots(&self) -> &[CpuSlot] {
        &self.slots
    }

    /// CPUs without vCPUs: the ones first-fit leaves to idle states.
    pub fn idle_cpus(&self) -> Vec<u32> {
        self.slots.iter().filter(|s| s.vcpus.is_empty()).map(|s| s.cpu).collect()
    }

    /// The CPU of each vCPU of an admitted VM.
    pub fn vm_cpus(&self, name: &str) -> Option<&[u32]> {
        self.vms.get(name).map(Vec::as_slice)
    }

    /// Admit a VM, placing all its vCPUs first-fit, or none of them.
    /// Returns the CPU of each vCPU.
    pub fn add_vm(&mut self, req: &VmRequest) -> Result<Vec<u32>, AdmitError> {
        if self.vms.contains_key(req.name) {
            return Err(AdmitError::Duplicate(req.name.to_string()));
        }
        let allowed = self.allowed_slots(req)?;
        // Tentative sums per CPU; nothing changes until every vCPU has a place.
        let mut load: Vec<Utilisation> = self.slots.iter().map(CpuSlot::utilisation).collect();
        let mut chosen = Vec::with_capacity(req.vcpus as usize);
        for index in 0..req.vcpus {
            let mut tried = Vec::new();
            let fit = allowed.iter().copied().find(|&i| {
                let test = edfvd::test(load[i].with(&req.server));
                tried.push(Candidate { cpu: self.slots[i].cpu, test });
                test.fits()
            });
            let Some(i) = fit else {
                let refusal = Refusal { vm: req.name.to_string(), vcpu: index, vcpus: req.vcpus, tried };
                return Err(AdmitError::Refused(refusal));
            };
            load[i] = load[i].with(&req.server);
            chosen.push(i);
        }
        Ok(self.commit(req, &chosen))
    }

    /// Remove an admitted VM's vCPUs; the others stay where they are.
    /// Returns the CPUs it occupied, or None if no such VM is placed.
    pub fn remove_vm(&mut self, name: &str) -> Option<Vec<u32>> {
        let cpus = self.vms.remove(name)?;
        for slot in &mut self.slots {
            slot.vcpus.retain(|v| v.vm != name);
        }
        Some(cpus)
    }

    /// Indices into `slots` the VM may use, in first-fit order.
    fn allowed_slots(&self, req: &VmRequest) -> Result<Vec<usize>, AdmitError> {
        let Some(want) = req.cpus else {
            return Ok((0..self.slots.len()).collect());
        };
        let unknown: Vec<u32> = want.iter().copied().filter(|c| !self.slots.iter().any(|s| s.cpu == *c)).collect();
        if !unknown.is_empty() {
            return Err(AdmitError::UnknownCpus { vm: req.name.to_string(), cpus: unknown });
        }
        Ok((0..self.slots.len()).filter(|&i| want.contains(&self.slots[i].cpu)).collect())
    }

    fn commit(&mut self, req: &VmRequest, chosen: &[usize]) -> Vec<u32> {
        let pinned = req.server.crit() == Crit::Hi;
        let mut cpus = Vec::with_capacity(chosen.len());
        for (index, &i) in (0u32..).zip(chosen) {
            let vcpu = PlacedVcpu { vm: req.name.to_string(), index, server: req.server, pinned };
            self.slots[i].vcpus.push(vcpu);
            cpus.push(self.slots[i].cpu);
        }
        self.vms.insert(req.name.to_string(), cpus.clone());
        cpus
    }
}

/// A number of the test, or "-" where it is undefined.
pub fn num(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.4}"))
}

/// Why one candidate CPU failed, with the test's numbers.
impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = &self.test.util;
        write!(
            f,
            "cpu {}: U1(1) = {:.4}, U2(1) = {:.4}, U2(2) = {:.4}, x = {}, x*U1(1)+U2(2) = {}",
            self.cpu,
            u.u1_1,
            u.u2_1,
            u.u2_2,
            num(self.test.x),
            num(self.test.value)
        )?;
        match self.test.verdict {
            Verdict::Fits => Ok(()),
            Verdict::LoModeOverload => write!(f, ": U1(1)+U2(1) = {:.4} > 1", u.u1_1 + u.u2_1),
            Verdict::Condition6 => f.write_str(": > 1, condition 6 fails"),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpus: Vec<u32> = self.tried.iter().map(|c| c.cpu).collect();
        write!(
            f,
            "vm {:?} refused: its vCPU {} (of {}) fits on no CPU in {} (EDF-VD test, with that vCPU added):",
            self.vm,
            self.vcpu,
            self.vcpus,
            cpus::format(&cpus)
        )?;
        for c in &self.tried {
            write!(f, "\n  {c}")?;
        }
        Ok(())
    }
}

impl fmt::Display for AdmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdmitError::Duplicate(vm) => write!(f, "vm {vm:?} is placed already"),
            AdmitError::UnknownCpus { vm, cpus: c } => {
                write!(f, "vm {vm:?} asks for CPU {} that the placement does not have", cpus::format(c))
            }
            AdmitError::Refused(r) => r.fmt(f),
        }
    }
}

impl std::error::Error for AdmitError {}
