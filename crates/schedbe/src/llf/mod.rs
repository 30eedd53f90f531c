//! Least-loaded-first among sandboxes (shared/papers/003), the third policy:
//! `schedbe run --policy llf` (BPF: src/bpf/llf.bpf.c; docs/serverless.md).
//!
//! Userspace finds the sandboxes (cgroups matching the patterns, each
//! kubelet pod by default: the agent's `discover`), measures each one's load
//! (its cgroup CPU usage with a ~4 s horizon: the agent's `LoadTracker`) and
//! writes it as the sandbox's order key; the BPF side runs the least loaded
//! sandbox's work first, with a floor for the heavy ones.

mod bpf;
pub mod runtime;
pub mod stats;
