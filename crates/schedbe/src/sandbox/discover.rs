//! Sandbox discovery: the cgroups under a cgroup root whose path matches
//! glob patterns (schedbe-cgroup's [`PathPatterns`], the same matcher as the
//! BE rules). By default a sandbox is a
//! kubelet pod cgroup, for both cgroup drivers and every QoS class, at the
//! root or nested under another cgroup (the names are those of
//! schedbe-bench's kubepods emulation and of kubelet). Only the outermost
//! match counts: a pattern that also matches a pod's containers does not
//! split the pod.

use std::collections::HashSet;
use std::path::Path;

use anyhow::Result;
use schedbe_cgroup::{Cgroup, PathPatterns};


/// Every kubelet pod cgroup: cgroupfs then systemd driver; Guaranteed,
/// Burstable, BestEffort; at the root, then nested.
pub const DEFAULT_SANDBOX_PATTERNS: &[&str] = &[
    "kubepods/pod*",
    "kubepods/burstable/pod*",
    "kubepods/besteffort/pod*",
    "kubepods.slice/kubepods-pod*.slice",
    "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod*.slice",
    "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod*.slice",
    "**/kubepods/pod*",
    "**/kubepods/burstable/pod*",
    "**/kubepods/besteffort/pod*",
    "**/kubepods.slice/kubepods-pod*.slice",
    "**/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod*.slice",
    "**/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod*.slice",
];

/// Compile sandbox patterns; none given means the kubelet pod defaults.
pub fn patterns(given: &[String]) -> Result<PathPatterns> {
    if given.is_empty() {
        PathPatterns::new("sandbox", DEFAULT_SANDBOX_PATTERNS)
    } else {
        PathPatterns::new("sandbox", given)
    }
}

/// One sandbox cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    pub cgroup: Cgroup,
    /// The pod UID when the name is a kubelet pod's, else the last path component.
    pub pod: String,
}

/// The pod UID in a kubelet pod cgroup's name: `pod<UID>` (cgroupfs) or
/// `kubepods[-QOS]-pod<UID with _ for ->.slice` (systemd).
pub fn pod_uid(name: &str) -> Option<String> {
    if let Some(uid) = name.strip_prefix("pod") {
        return (!uid.is_empty()).then(|| uid.to_string());
    }
    let inner = name.strip_prefix("kubepods")?.strip_suffix(".slice")?;
    let (_, uid) = inner.rsplit_once("-pod")?;
    (!uid.is_empty()).then(|| uid.replace('_', "-"))
}

/// The sandboxes under `root`, outermost matches only, in path order. The
/// walk does not go below a match (a pod's containers are never read).
pub fn discover(root: &Path, pats: &PathPatterns) -> Result<Vec<Sandbox>> {
    Ok(select(&schedbe_cgroup::walk_until(root, |rel| pats.matches(rel))?, pats))
}

/// [`discover`] over the cgroups of an earlier walk (a caller that also
/// needs the whole tree walks it once).
pub fn select(all: &[Cgroup], pats: &PathPatterns) -> Vec<Sandbox> {
    let mut found: Vec<&Cgroup> = pats.select(all).collect();
    found.sort_by(|a, b| a.rel.cmp(&b.rel));
    let mut taken: HashSet<&str> = HashSet::new();
    let mut out: Vec<Sandbox> = Vec::new();
    for c in found {
        // Sorted by path, ancestors come first; skip anything inside one taken.
        let inside = c.rel.match_indices('/').any(|(i, _)| taken.contains(&c.rel[..i]));
        if inside {
            continue;
        }
        taken.insert(&c.rel);
        let name = c.rel.rsplit('/').next().unwrap_or(&c.rel);
        out.push(Sandbox { pod: pod_uid(name).unwrap_or_else(|| name.to_string()), cgroup: c.clone() });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testtree::TempTree;
    use schedbe_bench::kubepods::{container_path, pod_path, Driver, Qos};

    #[test]
    fn pod_uids_from_both_drivers() {
        let uid = "0f1e2d3c-aaaa-4bbb-8ccc-000011112222";
        for driver in [Driver::Cgroupfs, Driver::Systemd] {
            for qos in [Qos::Guaranteed, Qos::Burstable, Qos::BestEffort] {
                let p = pod_path(driver, qos, uid);
                let name = p.file_name().unwrap().to_str().unwrap();
                assert_eq!(pod_uid(name).as_deref(), Some(uid), "{}", p.display());
                let rel = p.to_str().unwrap();
                assert!(patterns(&[]).unwrap().matches(rel), "{rel}");
                assert!(patterns(&[]).unwrap().matches(&format!("custom.slice/{rel}")), "{rel} nested");
            }
        }
        assert_eq!(pod_uid("pod"), None);
        assert_eq!(pod_uid("kubepods-burstable.slice"), None);
        assert_eq!(pod_uid("system.slice"), None);
    }

    #[test]
    fn discover_a_fake_tree() {
        let t = TempTree::new("discover");
        let (a, b) = ("aaaa-1", "bbbb-2");
        let pa = pod_path(Driver::Cgroupfs, Qos::Burstable, a);
        let pb = pod_path(Driver::Cgroupfs, Qos::BestEffort, b);
        t.write(&pa.join("cpu.stat"), "usage_usec 1500\nuser_usec 1000\n");
        t.write(&container_path(Driver::Cgroupfs, Qos::Burstable, a, "c1").join("cpu.stat"), "usage_usec 1\n");
        t.write(&pb.join("cpu.stat"), "usage_usec 7\n");
        t.write(Path::new("kubepods/burstable/cpu.stat"), "usage_usec 9\n");
        let found = discover(t.root(), &patterns(&[]).unwrap()).unwrap();
        let rels: Vec<&str> = found.iter().map(|s| s.cgroup.rel.as_str()).collect();
        assert_eq!(rels, ["kubepods/besteffort/podbbbb-2", "kubepods/burstable/podaaaa-1"]);
        assert_eq!(found[1].pod, a);
        // A pattern matching pods and their containers keeps the pods only.
        let wide = patterns(&["kubepods/burstable/pod*".to_string(), "kubepods/burstable/pod*/*".to_string()]).unwrap();
        let found = discover(t.root(), &wide).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].cgroup.rel, "kubepods/burstable/podaaaa-1");
        assert!(patterns(&["a/[b".to_string()]).is_err());
    }
}
