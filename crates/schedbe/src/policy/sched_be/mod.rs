//! SCHED_BE: a global weighted-fair LC tier, BE strictly below.

mod bpf;
pub mod config;
mod flatten;
mod resv;
pub mod runtime;
pub mod stats;
