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

/// What the flattening pass gives one cgroup.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flat {
    /// LC weight factor, fixed point (FACTOR_ONE = 1.0)
    pub factor: u64,
    /// The cpu group the cgroup's tasks belong to (itself, or the nearest
    /// ancestor with the cpu controller); the root's id for the root
    pub group: u64,
    /// The share of all LC CPU time the group's own tasks are entitled to
    /// against the groups active now (an inactive group: what its first
    /// nice-0 task would be entitled to). Times the CPUs, it is the group's
    /// entitlement in CPUs (resv.rs).
    pub entitled: f64,
    /// The share of the machine the group's own tasks could claim were they
    /// to want every CPU, the other groups wanting what they used in the
    /// last interval (water-filling by weight, level by level): what it may
    /// take by preemption (resv.rs).
    pub claim: f64,
    /// The group's own tasks were runnable in the last interval
    pub active: bool,
}

/// Compute fixed-point factors for every node id.
#[cfg(test)]
pub fn flatten(nodes: &[Node]) -> HashMap<u64, u64> {
    flatten_full(nodes, 1).into_iter().map(|(id, f)| (id, f.factor)).collect()
}

/// What a participant of weight `w` gets of `cap` if it wants all of it
/// while the others (weight, demand; sorted by demand / weight) want their
/// demands: the others that want less than their weight's part of what is
/// left get their demand, and the rest is split by weight.
fn water_fill(cap: f64, w: f64, others: &[(f64, f64)]) -> f64 {
    let (mut rem, mut tw) = (cap, w + others.iter().map(|o| o.0).sum::<f64>());
    for &(wj, dj) in others {
        if dj > rem * wj / tw {
            break;
        }
        rem -= dj;
        tw -= wj;
    }
    if tw > 0.0 {
        rem * w / tw
    } else {
        rem
    }
}

/// Each participant's claim (water_fill with it greedy) of `cap`.
///
/// A part that wants nothing gives its turn up in water_fill before any
/// demand is weighed (it sorts first, and 0 is never more than its part), so
/// it counts as absent: each part is filled against the parts that want
/// something, and the idle ones, alike but for their weight, once per
/// weight. A cgroup of 1000 mostly idle pods costs about 1000 steps, not
/// the 1000 x 1000 of filling each against all the others, four times a
/// second.
fn claims(cap: f64, parts: &[(f64, f64)]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..parts.len()).filter(|&j| parts[j].1 > 0.0).collect();
    order.sort_by(|&a, &b| (parts[a].1 / parts[a].0.max(1e-9)).total_cmp(&(parts[b].1 / parts[b].0.max(1e-9))));
    let wanting: Vec<(f64, f64)> = order.iter().map(|&j| parts[j]).collect();
    let mut idle: HashMap<u64, f64> = HashMap::new();
    (0..parts.len())
        .map(|i| {
            if parts[i].1 > 0.0 {
                let others: Vec<(f64, f64)> = order.iter().filter(|&&j| j != i).map(|&j| parts[j]).collect();
                water_fill(cap, parts[i].0, &others)
            } else {
                *idle.entry(parts[i].0.to_bits()).or_insert_with(|| water_fill(cap, parts[i].0, &wanting))
            }
        })
        .collect()
}

/// Factors, groups, entitlements and claims for every node id, on a
/// machine of `nr_cpus` CPUs.
pub fn flatten_full(nodes: &[Node], nr_cpus: u64) -> HashMap<u64, Flat> {
    let nr_cpus = nr_cpus.max(1);
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
    let mut entitled = vec![0.0f64; nodes.len()];
    // Claims as fractions of the machine: the group's (greedy) and its own tasks'.
    let mut claim = vec![0.0f64; nodes.len()];
    let mut claim_direct = vec![0.0f64; nodes.len()];
    claim[root] = 1.0;
    // An inactive group's share were its first task to join its competitors.
    let mut entry_share = vec![1.0f64; nodes.len()];
    share[root] = 1.0;
    order.reverse();
    for &g in &order {
        let kids = children.get(&g).map(Vec::as_slice).unwrap_or(&[]);
        let active_w: f64 = kids.iter().filter(|&&c| subtree[c] > ACTIVE_EPS).map(|&c| nodes[c].weight as f64).sum();
        let denom = direct[g] + active_w;
        // An idle group is costed as if one nice-0 task were about to run in it.
        let denom_self = if direct[g] > ACTIVE_EPS { denom } else { denom + 100.0 };
        factor[g] = share[g] / denom_self * total;
        // The group's own tasks' part of its share; idle, its first task's.
        entitled[g] = if direct[g] > ACTIVE_EPS { share[g] * direct[g] / denom } else { entry_share[g] * 100.0 / (active_w + 100.0) };
        // Claims: the own tasks (weighing their load, at least one nice-0
        // task's) and every child, each greedy against the others' demands
        // (loads in the same unit: a nice-0 task always runnable is 100).
        let mut parts: Vec<(f64, f64)> = vec![(direct[g].max(100.0), direct[g])];
        parts.extend(kids.iter().map(|&c| (nodes[c].weight as f64, subtree[c])));
        // Demands as fractions of the machine (nr_cpus nice-0 loads wide).
        let parts_scaled: Vec<(f64, f64)> = parts.iter().map(|&(w, d)| (w, d / (100.0 * nr_cpus as f64))).collect();
        let cl = claims(claim[g], &parts_scaled);
        claim_direct[g] = cl[0];
        for (k, &c) in kids.iter().enumerate() {
            claim[c] = cl[k + 1];
        }
        for &c in kids {
            let w = nodes[c].weight as f64;
            // An inactive child is priced against the current competitors
            // (whose factors do not change until the next pass), so its first
            // task gets the weight it is entitled to relative to them.
            share[c] = share[g] * w / if denom > ACTIVE_EPS { denom } else { w };
            entry_share[c] = if subtree[c] > ACTIVE_EPS { share[c] } else { entry_share[g] * w / (denom + w) };
        }
    }

    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let g = group[i];
            let f = (factor[g] * FACTOR_ONE as f64).clamp((FACTOR_ONE >> 10) as f64, (FACTOR_ONE << 10) as f64);
            let flat = Flat {
                factor: f as u64,
                group: nodes[g].id,
                entitled: entitled[g].clamp(0.0, 1.0),
                claim: claim_direct[g].clamp(0.0, 1.0),
                active: direct[g] > ACTIVE_EPS,
            };
            (n.id, flat)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// claims() as defined: each part filled against all the others.
    fn claims_direct(cap: f64, parts: &[(f64, f64)]) -> Vec<f64> {
        let mut order: Vec<usize> = (0..parts.len()).collect();
        order.sort_by(|&a, &b| (parts[a].1 / parts[a].0.max(1e-9)).total_cmp(&(parts[b].1 / parts[b].0.max(1e-9))));
        (0..parts.len())
            .map(|i| {
                let others: Vec<(f64, f64)> = order.iter().filter(|&&j| j != i).map(|&j| parts[j]).collect();
                water_fill(cap, parts[i].0, &others)
            })
            .collect()
    }

    #[test]
    fn claims_skipping_idle_parts_match_the_definition() {
        // a small LCG: many mixes of idle and busy parts, weights 1-10000
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut next = move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) as f64 / (1u64 << 31) as f64
        };
        for case in 0..500 {
            let n = 1 + case % 40;
            let parts: Vec<(f64, f64)> = (0..n)
                .map(|_| {
                    let w = [1.0, 100.0, 100.0, 39.0, 10000.0][(next() * 5.0) as usize % 5];
                    let d = if next() < 0.6 { 0.0 } else { next() * 0.7 };
                    (w, d)
                })
                .collect();
            let cap = 0.2 + next() * 0.8;
            for (a, b) in claims(cap, &parts).iter().zip(claims_direct(cap, &parts)) {
                assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "case {case}: {a} vs {b} for {parts:?}, cap {cap}");
            }
        }
    }

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

    /// Kubelet's layout on 2 CPUs: a Guaranteed pod (weight 39, 1 CPU
    /// requested) with a server using 0.6 CPU, a Burstable pod (weight 20,
    /// 0.5 CPU) under its QoS slice (weight 20) with two burners, and a
    /// system daemon at the root with weight 100 and 1% of a CPU.
    fn kubelet_node() -> Vec<Node> {
        vec![
            node(1, "", true, 100, 0.0),
            node(2, "kubepods", true, 79, 0.0),
            node(3, "kubepods/podg", true, 39, 0.0),
            node(4, "kubepods/podg/c", true, 39, 60.0),
            node(5, "kubepods/burstable", true, 20, 0.0),
            node(6, "kubepods/burstable/podb", true, 20, 0.0),
            node(7, "kubepods/burstable/podb/c", true, 20, 200.0),
            node(8, "system.slice", true, 100, 1.5),
        ]
    }

    #[test]
    fn entitlements_follow_weights_not_thread_counts() {
        let m = flatten_full(&kubelet_node(), 2);
        let (g, b) = (m[&4], m[&7]);
        // Fair shares among the active groups: the daemon's weight counts whole.
        let kube = 79.0 / 179.0;
        assert!((g.entitled - kube * 39.0 / 59.0).abs() < 1e-6, "{g:?}");
        assert!((b.entitled - kube * 20.0 / 59.0).abs() < 1e-6, "{b:?}");
        assert!(g.active && b.active);
        assert_eq!((g.group, b.group), (4, 7));
        // Alone, a group is entitled to everything.
        let m = flatten_full(&[node(1, "", true, 100, 0.0), node(2, "a", true, 100, 400.0)], 4);
        assert!((m[&2].entitled - 1.0).abs() < 1e-6);
        // A cgroup without the cpu controller belongs to its parent's group.
        let m = flatten_full(&[node(1, "", true, 100, 0.0), node(2, "a", true, 100, 0.0), node(3, "a/x", false, 100, 100.0), node(4, "b", true, 300, 100.0)], 4);
        assert_eq!(m[&3].group, 2);
        assert!((m[&3].entitled - 0.25).abs() < 1e-6, "{:?}", m[&3]);
        // An idle group is priced as one nice-0 task joining.
        let m = flatten_full(&[node(1, "", true, 100, 0.0), node(2, "a", true, 100, 400.0), node(3, "b", true, 100, 0.0)], 4);
        assert!(!m[&3].active);
        assert!((m[&3].entitled - 0.5).abs() < 1e-6, "{:?}", m[&3]);
    }

    #[test]
    fn claims_ignore_what_others_leave_unused() {
        let m = flatten_full(&kubelet_node(), 2);
        // The daemon wants 0.0075 of the machine: kubepods may claim the
        // rest. In it the burners want everything, so the Guaranteed pod
        // claims its weight's part, 39/59 of it: 1.31 CPUs of 2, more than
        // its 1-CPU request; the burners may claim what the server leaves.
        let kube = 1.0 - 1.5 / 200.0;
        assert!((m[&4].claim - kube * 39.0 / 59.0).abs() < 1e-6, "{:?}", m[&4]);
        assert!((m[&7].claim - (kube - 60.0 / 200.0)).abs() < 1e-6, "{:?}", m[&7]);
        // A group of weight 1 next to one of 10000 that wants every CPU
        // claims 1/10001 of the machine, whatever its own demand.
        let m = flatten_full(&[node(1, "", true, 100, 0.0), node(2, "lo", true, 1, 80.0), node(3, "hi", true, 10000, 800.0)], 4);
        assert!((m[&2].claim - 1.0 / 10001.0).abs() < 1e-9, "{:?}", m[&2]);
    }

    #[test]
    fn water_fill_gives_light_users_their_demand() {
        // 1.0 split between a greedy weight-1 part and two others of weight 1:
        // one wants 0.1 (gets it), the other 0.6 (more than its half of 0.9).
        assert!((water_fill(1.0, 1.0, &[(1.0, 0.1), (1.0, 0.6)]) - 0.45).abs() < 1e-9);
        assert!((water_fill(1.0, 1.0, &[(1.0, 0.1), (1.0, 0.2)]) - 0.7).abs() < 1e-9);
        assert!((water_fill(2.0, 1.0, &[]) - 2.0).abs() < 1e-9);
        let c = claims(1.0, &[(1.0, 0.1), (3.0, 2.0)]);
        assert!((c[0] - 0.25).abs() < 1e-9 && (c[1] - 0.9).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn idle_group_gets_a_fair_entry_factor() {
        let m = flatten(&[node(1, "", true, 100, 0.0), node(2, "a", true, 100, 400.0), node(3, "b", true, 100, 0.0)]);
        // b's first task must weigh as much as all four of a's (equal cpu.weight).
        assert!((f(&m, 3) / f(&m, 2) - 4.0).abs() < 0.3, "{}", f(&m, 3) / f(&m, 2));
    }
}
