//! Least-loaded-first among sandboxes (shared/papers/003), the third policy:
//! `schedbe run llf` (BPF: src/bpf/llf/; docs/serverless.md).
//!
//! Userspace finds the sandboxes (cgroups matching the patterns, each
//! kubelet pod by default: sandbox::discover), measures each one's load
//! (the CPU time the BPF side sums per sandbox, with a ~4 s horizon:
//! sandbox::load, as `schedbe agent` does) and writes it as the sandbox's
//! order key; the BPF side runs the least loaded sandbox's work first, with
//! a floor for the heavy ones.
//!
//! - `runtime`: load the BPF policy, keep the keys, cgroups and cpu.max in
//!   step, print stats, unload
//! - `stats`: its statistics, served over scx_stats
//! - `bpf`: the generated skeleton

mod bpf;
pub mod runtime;
pub mod stats;
