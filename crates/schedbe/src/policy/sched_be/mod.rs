//! SCHED_BE (shared/papers/000-002), the default policy: one global
//! weighted-fair LC tier across all CPUs, and BE strictly below it
//! (`schedbe run`; BPF: src/bpf/sched_be/; docs/design.md).
//!
//! - `config`: the TOML config file and its flags, validated
//! - `runtime`: load the BPF policy, keep its maps in step with the cgroup
//!   tree, report, unload
//! - `flatten`: cgroup cpu.weight hierarchy -> per-cgroup LC weight factors
//!   and entitlements
//! - `resv`: reservations: entitlement slots (a cgroup within its claim
//!   preempts one above its fair share)
//! - `stats`: live statistics (scx_stats), and `schedbe stats`
//! - `bpf`: the generated skeleton

mod bpf;
pub mod config;
mod flatten;
mod resv;
pub mod runtime;
pub mod stats;
