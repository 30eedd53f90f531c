//! Sandboxes: which cgroups they are, and the decaying load of each.

pub mod discover;
pub mod load;
