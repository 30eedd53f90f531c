//! Flattening the cgroup v2 cpu.weight hierarchy into per-cgroup factors.
//!
//! Linux enforces cpu.weight per runqueue; schedbe enforces it across all CPUs
//! by giving every LC task an effective weight `nice_weight x factor(cgroup)`
//! in one global virtual-time order. The factor is the cgroup's hierarchical
//! share divided by the runnable load competing inside it, measured from the
//! BPF side (runnable time x task weight) over the last interval:
//!
//!   share(root) = 1
//!   denom(g)    = direct_load(g) + sum of cpu.weight over active child groups
//!   share(c)    = share(g) * weight(c) / denom(g)
//!   factor(g)   = share(g) / denom(g) * total_load
//!
//! so a group's tasks together receive `share(g)` of the LC CPU time, split
//! among them by nice weight. Loads are in task-weight units (nice 0 = 100,
//! the same unit as cpu.weight 100), so a task directly in a group competes
//! with a child group of weight 100 exactly as CFS does. `total_load`
//! normalizes: with a single group every factor is 1.0.
//!
//! Cgroups without the cpu controller are not scheduling entities: their
//! tasks count as members of the nearest ancestor that has one. Inactive
//! groups get the factor their first nice-0 task is entitled to against the
//! current competitors, so a group that wakes up is fair before the next pass.
//!
//! Compared with scx_flatcg, which maintains the hierarchy in BPF at every
//! runnable/quiescent transition, this is computed in userspace every
//! `flatten_ms` (250 ms) from averaged load, over the cgroup tree cached at
//! the last rescan (`rescan_ms`, 1 s): cheaper on the hot path and
//! exact for steady loads, but it lags bursty load changes by one interval.

use std::collections::HashMap;

/// Fixed-point 1.0, as in intf.h (SCHEDBE_FACTOR_ONE).
pub const FACTOR_ONE: u64 = 1 << 16;
/// Loads below this (1% of one nice-0 task) count as inactive.
const ACTIVE_EPS: f64 = 1.0;

/// One cgroup as seen by the flattener.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: u64,
    /// Path relative to the cgroup root ("" = root).
    pub rel: String,
    /// Has the cpu controller (a cpu.weight file); the root always counts.
    pub has_cpu: bool,
    pub weight: u32,
    /// Average runnable LC load of tasks directly in this cgroup (nice 0 = 100).
    pub load: f64,
}

fn parent_rel(rel: &str) -> Option<&str> {
    if rel.is_empty() {
        None
    } else {
        Some(rel.rfind('/').map(|i| &rel[..i]).unwrap_or(""))
    }
}

/// Compute fixed-point factors for every node id.
pub fn flatten(nodes: &[Node]) -> HashMap<u64, u64> {
    let by_rel: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.rel.as_str(), i)).collect();
    let Some(&root) = by_rel.get("") else { return HashMap::new() };

    // The cpu group each node belongs to (nearest ancestor-or-self with cpu).
    let group_of = |mut i: usize| -> usize {
        loop {
            if nodes[i].has_cpu || nodes[i].rel.is_empty() {
                return i;
            }
            match parent_rel(&nodes[i].rel).and_then(|p| by_rel.get(p)) {
                Some(&p) => i = p,
                None => return root,
            }
        }
    };
    let group: Vec<usize> = (0..nodes.len()).map(group_of).collect();
    // Parent cpu group of each cpu group (None for root).
    let parent_group = |g: usize| -> Option<usize> {
        parent_rel(&nodes[g].rel).and_then(|p| by_rel.get(p)).map(|&p| group[p])
    };

    let mut direct = vec![0.0f64; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        direct[group[i]] += n.load.max(0.0);
    }
    let total: f64 = direct.iter().sum::<f64>().max(100.0);

    // Subtree load per cpu group, and children lists. Process deepest first.
    let groups: Vec<usize> = (0..nodes.len()).filter(|&i| group[i] == i).collect();
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    for &g in &groups {
        if let Some(p) = parent_group(g) {
            children.entry(p).or_default().push(g);
        }
    }
    let depth = |g: usize| nodes[g].rel.matches('/').count() + usize::from(!nodes[g].rel.is_empty());
    let mut order = groups.clone();
    order.sort_by_key(|&g| std::cmp::Reverse(depth(g)));
    let mut subtree = direct.clone();
    for &g in &order {
        if let Some(p) = parent_group(g) {
            subtree[p] += subtree[g];
        }
    }

    // Shares top-down.
    let mut share = vec![0.0f64; nodes.len()];
    let mut factor = vec![1.0f64; nodes.len()];
    share[root] = 1.0;
    order.reverse();
    for &g in &order {
        let kids = children.get(&g).map(Vec::as_slice).unwrap_or(&[]);
        let active_w: f64 = kids.iter().filter(|&&c| subtree[c] > ACTIVE_EPS).map(|&c| nodes[c].weight as f64).sum();
        let denom = direct[g] + active_w;
        // An idle group is costed as if one nice-0 task were about to run in it.
        let denom_self = if direct[g] > ACTIVE_EPS { denom } else { denom + 100.0 };
        factor[g] = share[g] / denom_self * total;
        for &c in kids {
            let w = nodes[c].weight as f64;
            // An inactive child is priced against the current competitors
            // (whose factors do not change until the next pass), so its first
            // task gets the weight it is entitled to relative to them.
            share[c] = share[g] * w / if denom > ACTIVE_EPS { denom } else { w };
        }
    }

    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let f = (factor[group[i]] * FACTOR_ONE as f64).clamp((FACTOR_ONE >> 10) as f64, (FACTOR_ONE << 10) as f64);
            (n.id, f as u64)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u64, rel: &str, has_cpu: bool, weight: u32, load: f64) -> Node {
        Node { id, rel: rel.into(), has_cpu, weight, load }
    }

    fn f(m: &HashMap<u64, u64>, id: u64) -> f64 {
        m[&id] as f64 / FACTOR_ONE as f64
    }

    #[test]
    fn single_group_is_neutral() {
        let m = flatten(&[node(1, "", true, 100, 0.0), node(2, "a", true, 100, 400.0)]);
        assert!((f(&m, 2) - 1.0).abs() < 1e-3, "{}", f(&m, 2));
    }

    #[test]
    fn weights_split_cpu_regardless_of_thread_counts() {
        // 4 hogs at weight 100 vs 6 hogs at weight 300: groups should get 1:3.
        let m = flatten(&[
            node(1, "", true, 100, 0.0),
            node(2, "a", true, 100, 400.0),
            node(3, "b", true, 300, 600.0),
        ]);
        let (fa, fb) = (f(&m, 2), f(&m, 3));
        let (ga, gb) = (4.0 * 100.0 * fa, 6.0 * 100.0 * fb);
        assert!((gb / ga - 3.0).abs() < 1e-3, "group weight ratio {}", gb / ga);
    }

    #[test]
    fn nested_groups_multiply_and_non_cpu_children_inherit() {
        // root -> x (w100, 1 hog) ; y (w100) -> y/z (w300, 1 hog), y/w (w100, 1 hog)
        // y/z/leaf has no cpu controller: its task is a member of y/z.
        let m = flatten(&[
            node(1, "", true, 100, 0.0),
            node(2, "x", true, 100, 100.0),
            node(3, "y", true, 100, 0.0),
            node(4, "y/z", true, 300, 0.0),
            node(5, "y/z/leaf", false, 100, 100.0),
            node(6, "y/w", true, 100, 100.0),
        ]);
        // Shares: x 1/2, y/z 3/8, y/w 1/8 -> per-task effective weights in that ratio.
        let (x, z, w) = (f(&m, 2), f(&m, 5), f(&m, 6));
        assert_eq!(m[&4], m[&5]);
        assert!((z / x - 0.75).abs() < 1e-3, "z/x {}", z / x);
        assert!((w / x - 0.25).abs() < 1e-3, "w/x {}", w / x);
    }

    #[test]
    fn idle_group_gets_a_fair_entry_factor() {
        let m = flatten(&[node(1, "", true, 100, 0.0), node(2, "a", true, 100, 400.0), node(3, "b", true, 100, 0.0)]);
        // b's first task must weigh as much as all four of a's (equal cpu.weight).
        assert!((f(&m, 3) / f(&m, 2) - 4.0).abs() < 0.3, "{}", f(&m, 3) / f(&m, 2));
    }
}
