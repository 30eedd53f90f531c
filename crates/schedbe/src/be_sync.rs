//! The BE cgroups of every policy: the cgroups that match the BE path
//! patterns (tier.bpf.h's rule 3) written into a policy's `be_cgroups` map.

use std::path::Path;

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};

use schedbe_cgroup::{BeRules, Cgroup, IdSet};

/// Bring `map` in step with the cgroups of `all` that `rules` select;
/// whether it changed (the policy then bumps its tier generation).
pub fn sync(map: &impl MapCore, all: &[Cgroup], rules: &BeRules, ids: &mut IdSet) -> Result<bool> {
    let found: Vec<u64> = schedbe_cgroup::be_matches(all, rules).map(|c| c.id).collect();
    let (add, del) = ids.update(found);
    for id in &add {
        map.update(&id.to_ne_bytes(), &[1u8], MapFlags::ANY).context("cannot update be_cgroups")?;
    }
    for id in &del {
        let _ = map.delete(&id.to_ne_bytes());
    }
    Ok(!add.is_empty() || !del.is_empty())
}

/// [`sync`] against the whole tree under `root`.
pub fn sync_tree(map: &impl MapCore, root: &Path, rules: &BeRules, ids: &mut IdSet) -> Result<bool> {
    sync(map, &schedbe_cgroup::walk(root)?, rules, ids)
}
