//! The paper's Table 1 ("The configurations of VMs", shared/papers/004,
//! section 4): the VM types its experiments use. `type = N` in vms.toml takes
//! a type's budgets and period as defaults.

use super::edfvd::Crit;

/// One row of Table 1, in milliseconds as printed there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VmType {
    pub id: u32,
    pub c_opt_ms: f64,
    /// None for LO types ("-" in the table).
    pub c_pes_ms: Option<f64>,
    pub period_ms: f64,
    pub crit: Crit,
}

/// Table 1. Type 6's C_pes is printed as "50" without a unit; every other
/// entry is in ms, so this one is read as 50 ms too.
pub const TABLE1: [VmType; 6] = [
    VmType { id: 1, c_opt_ms: 5.0, c_pes_ms: Some(25.0), period_ms: 100.0, crit: Crit::Hi },
    VmType { id: 2, c_opt_ms: 25.0, c_pes_ms: None, period_ms: 100.0, crit: Crit::Lo },
    VmType { id: 3, c_opt_ms: 50.0, c_pes_ms: None, period_ms: 100.0, crit: Crit::Lo },
    VmType { id: 4, c_opt_ms: 5.0, c_pes_ms: None, period_ms: 50.0, crit: Crit::Lo },
    VmType { id: 5, c_opt_ms: 10.0, c_pes_ms: None, period_ms: 100.0, crit: Crit::Lo },
    VmType { id: 6, c_opt_ms: 10.0, c_pes_ms: Some(50.0), period_ms: 100.0, crit: Crit::Hi },
];

/// The Table 1 row of type `id`, if there is one.
pub fn vm_type(id: u32) -> Option<&'static VmType> {
    TABLE1.iter().find(|t| t.id == id)
}
