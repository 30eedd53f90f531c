//! The scheduling policies `schedbe run --policy` offers, one folder each
//! with the policy's whole userspace side.

pub mod akita;
pub mod llf;
pub mod sched_be;
