//! Sandboxes, for the LLF policy and `schedbe agent` alike: which cgroups
//! they are, and the decaying load of each.
//!
//! - `discover`: sandboxes from cgroup path patterns (kubelet pods by default)
//! - `load`: a sandbox's CPU usage rate, decayed with a ~4 s horizon

pub mod discover;
pub mod load;
