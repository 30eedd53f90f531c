//! `--cgroup`: the requested cgroups, and which cgroup ids are in them.
//!
//! The BPF side records the raw cgroup v2 id of each task it sees start
//! running. On cgroup v2 a cgroup's id is its directory's inode number
//! (kernfs node id), so walking a requested cgroup's directory tree gives the
//! ids of it and of all its descendants; an id in the subtree of requested
//! cgroup `i` is mapped to bit `i` (hierarchical: a task in a descendant
//! counts for every requested ancestor). The subtrees are walked at start,
//! and again whenever an event carries an id never seen before (a cgroup
//! created since, or one outside every requested subtree), at most once per
//! [`REWALK_MIN_NS`]. An id still not found by a complete walk is outside
//! every requested cgroup and remembered as such: cgroups never move to
//! another parent and ids are not reused, so it is never walked for again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::args::{BudgetArg, CgroupArg};
use crate::replay::{BudgetSpec, CgroupSet, CgroupStats, LatencyStats, MAX_CGROUPS};
use crate::report::{BudgetReport, CgroupCpuTime, CgroupReport, LatencyUs, PeriodRow};
use crate::timeline::Label;

/// Walks for unknown ids are at least this far apart (the ring buffer is
/// drained every 10 ms, so in practice: at most one walk per drain).
pub(crate) const REWALK_MIN_NS: u64 = 5_000_000;

/// One `--cgroup`.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// As given on the command line: the key in the report.
    pub(crate) key: String,
    /// Its directory (canonical).
    pub(crate) path: PathBuf,
    /// Its own cgroup id.
    pub(crate) id: u64,
    /// Its CPU request (`PATH=REQ`), in milli-CPUs.
    pub(crate) request_milli: Option<u64>,
    /// Cgroups in its subtree, itself included, at the last walk.
    pub(crate) nr_cgroups: usize,
    /// Removed since: no longer walked (nothing new can appear under it).
    pub(crate) gone: bool,
}

#[derive(Debug)]
pub(crate) struct CgroupWatch {
    pub(crate) targets: Vec<Target>,
    /// Every id looked at: the requested cgroups it is in (0: none).
    known: HashMap<u64, CgroupSet>,
    /// When `resolve` last walked (the walk at start does not count: the
    /// first batch of events, full of ids never seen, is resolved at once).
    last_walk: u64,
    /// Walks of the requested subtrees (the one at start included).
    pub(crate) walks: u64,
    /// Subtree walks that failed (a requested cgroup removed counts once).
    pub(crate) walk_errors: u64,
}

/// Where `--cgroup arg` is: relative to the cgroup v2 mount `root`, or
/// absolute under it; any other absolute path is taken relative to the mount
/// too (the form /proc/PID/cgroup shows: `/kubepods.slice/...`).
fn locate(arg: &str, root: &Path) -> Result<PathBuf> {
    let p = Path::new(arg);
    let cand = if p.is_absolute() && p.starts_with(root) {
        p.to_path_buf()
    } else {
        root.join(arg.trim_start_matches('/'))
    };
    let canon_root = root
        .canonicalize()
        .with_context(|| format!("cannot resolve the cgroup v2 mount {}", root.display()))?;
    let path = match cand.canonicalize() {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "--cgroup {arg}: no cgroup at {} (give a path relative to the cgroup v2 mount {}, or absolute under it)",
            cand.display(),
            root.display()
        ),
        Err(e) => bail!("--cgroup {arg}: cannot resolve {}: {e}", cand.display()),
    };
    if !path.starts_with(&canon_root) {
        bail!(
            "--cgroup {arg}: {} is outside the cgroup v2 hierarchy at {}",
            path.display(),
            root.display()
        );
    }
    if !path.is_dir() || !path.join("cgroup.procs").exists() {
        bail!(
            "--cgroup {arg}: {} is not a cgroup v2 directory (no cgroup.procs)",
            path.display()
        );
    }
    Ok(path)
}

impl CgroupWatch {
    /// Check the `--cgroup` arguments and walk their subtrees once. `None`
    /// without `--cgroup`. Errors name the offending argument.
    pub(crate) fn new(args: &[CgroupArg], root: Option<&Path>) -> Result<Option<Self>> {
        if args.is_empty() {
            return Ok(None);
        }
        let Some(root) = root else {
            bail!("--cgroup needs the cgroup v2 hierarchy, which is not mounted");
        };
        let mut targets: Vec<Target> = Vec::new();
        for arg in args {
            if let Some(t) = targets.iter().find(|t| t.key == arg.path) {
                if t.request_milli != arg.request_milli {
                    bail!("--cgroup {} is given twice with different CPU requests", arg.path);
                }
                continue; // the same key twice: one entry
            }
            let path = locate(&arg.path, root)?;
            targets.push(Target {
                key: arg.path.clone(),
                path,
                id: 0,
                request_milli: arg.request_milli,
                nr_cgroups: 0,
                gone: false,
            });
        }
        if targets.len() > MAX_CGROUPS {
            bail!(
                "at most {MAX_CGROUPS} --cgroup are supported, got {}",
                targets.len()
            );
        }
        let mut w = CgroupWatch {
            targets,
            known: HashMap::new(),
            last_walk: 0,
            walks: 0,
            walk_errors: 0,
        };
        w.walk();
        if w.walk_errors > 0 {
            // locate() just saw every one of them: only a cgroup removed in
            // between (or unreadable) gets here
            let bad: Vec<&str> = w
                .targets
                .iter()
                .filter(|t| t.id == 0)
                .map(|t| t.key.as_str())
                .collect();
            bail!("--cgroup {}: cannot walk its directory tree", bad.join(", "));
        }
        Ok(Some(w))
    }

    /// Walk every requested subtree. Returns the ids whose set changed, with
    /// their new set, and whether every walk was complete (a removed
    /// requested cgroup is: nothing can appear under it any more).
    fn walk(&mut self) -> (Vec<(u64, CgroupSet)>, bool) {
        self.walks += 1;
        let mut changed = BTreeSet::new();
        let mut ok = true;
        for (i, t) in self.targets.iter_mut().enumerate() {
            if t.gone {
                continue;
            }
            let cgs = match schedbe_cgroup::walk(&t.path) {
                Ok(c) => c,
                Err(e) => {
                    self.walk_errors += 1;
                    if t.path.exists() {
                        log::warn!("walking --cgroup {} failed: {e:#}", t.key);
                        ok = false;
                    } else {
                        log::warn!("--cgroup {}: {} was removed", t.key, t.path.display());
                        t.gone = true;
                    }
                    continue;
                }
            };
            t.nr_cgroups = cgs.len();
            if let Some(c) = cgs.iter().find(|c| c.rel.is_empty()) {
                t.id = c.id;
            }
            for c in cgs {
                let set = self.known.entry(c.id).or_insert(0);
                if *set & (1 << i) == 0 {
                    *set |= 1 << i;
                    changed.insert(c.id);
                }
            }
        }
        let changed = changed
            .into_iter()
            .map(|id| (id, self.known[&id]))
            .collect();
        (changed, ok)
    }

    /// Every id known to be in a requested cgroup, with its set.
    pub(crate) fn mapped(&self) -> impl Iterator<Item = (u64, CgroupSet)> + '_ {
        self.known
            .iter()
            .filter(|(_, &s)| s != 0)
            .map(|(&id, &s)| (id, s))
    }

    /// Look at the ids of newly read events: if some were never seen, walk
    /// again (unless the last walk was less than [`REWALK_MIN_NS`] ago: they
    /// are retried with the next batch) and return the ids whose set
    /// changed. Ids a complete walk did not find are remembered as outside.
    pub(crate) fn resolve(
        &mut self,
        ids: impl IntoIterator<Item = u64>,
        now: u64,
    ) -> Vec<(u64, CgroupSet)> {
        let mut unknown: Vec<u64> = ids
            .into_iter()
            .filter(|id| *id != 0 && !self.known.contains_key(id))
            .collect();
        if unknown.is_empty() || now < self.last_walk.saturating_add(REWALK_MIN_NS) {
            return Vec::new();
        }
        unknown.sort_unstable();
        unknown.dedup();
        self.last_walk = now;
        let (changed, ok) = self.walk();
        if ok {
            for id in unknown {
                self.known.entry(id).or_insert(0);
            }
        }
        changed
    }

    /// The CPU requests, by target (for the replay).
    pub(crate) fn requests(&self) -> Vec<Option<u64>> {
        self.targets.iter().map(|t| t.request_milli).collect()
    }

    /// The CPU budgets, by target (for the replay): each `--budget` goes to
    /// the target of its PATH (as given).
    pub(crate) fn budgets(&self, budgets: &[BudgetArg]) -> Vec<Option<BudgetSpec>> {
        self.targets
            .iter()
            .map(|t| {
                budgets.iter().find(|b| b.path == t.key).map(|b| BudgetSpec {
                    budget_ns: b.budget_ns,
                    period_ns: b.period_ns,
                })
            })
            .collect()
    }

    /// The targets as the timeline names them.
    pub(crate) fn labels(&self) -> Vec<Label> {
        self.targets
            .iter()
            .map(|t| Label {
                key: t.key.clone(),
                depth: t.path.components().count(),
            })
            .collect()
    }

    /// The report's `cgroups` section, from the replay's figures (one per
    /// target, in order).
    pub(crate) fn report(&self, stats: &[CgroupStats]) -> BTreeMap<String, CgroupReport> {
        let ms = |ns: u64| ns as f64 / 1e6;
        // non-zero entries of a per-other-cgroup vector, by key
        let by = |v: &[u64]| -> BTreeMap<String, f64> {
            self.targets
                .iter()
                .zip(v)
                .filter(|(_, &ns)| ns > 0)
                .map(|(b, &ns)| (b.key.clone(), ms(ns)))
                .collect()
        };
        self.targets
            .iter()
            .zip(stats)
            .map(|(t, s)| {
                let r = s.reservation.as_ref();
                let report = CgroupReport {
                    path: t.path.clone(),
                    id: t.id,
                    max_cpus: s.max_cpus,
                    cpu_time_ms: CgroupCpuTime {
                        lc: ms(s.lc_ns),
                        be: ms(s.be_ns),
                        other: ms(s.other_ns),
                        total: ms(s.lc_ns + s.be_ns + s.other_ns),
                    },
                    time_at_cpus_ms: s.time_at_cpus_ns.iter().map(|&ns| ms(ns)).collect(),
                    nr_cgroups: t.nr_cgroups,
                    request_cpus: r.map(|r| r.request_milli as f64 / 1000.0),
                    reservation_inversion_ms: r.map(|r| ms(r.inversion_ns)),
                    reservation_inversion_longest_ms: r.map(|r| ms(r.longest_ns)),
                    reservation_inversion_by_ms: r.map(|r| by(&r.by_ns)).unwrap_or_default(),
                    wakeup_latency: latency_us(&s.wakeup_latency),
                    timer_latency: latency_us(&s.timer_latency),
                    periods: s.periods.as_ref().map(|p| {
                        p.iter()
                            .map(|r| PeriodRow {
                                start_ns: r.start_ns,
                                cpu_ms: ms(r.cpu_ns),
                                wait_ms: ms(r.wait_ns),
                            })
                            .collect()
                    }),
                    budget: s.budget.as_ref().map(|b| BudgetReport {
                        budget_ms: ms(b.budget_ns),
                        period_ms: ms(b.period_ns),
                        periods: b.periods,
                        periods_over: b.periods_over,
                        max_period_ms: ms(b.max_period_ns),
                        over_budget_ms: ms(b.over_budget_ns),
                        over_budget_while_waiting_ms: ms(b.over_budget_while_waiting_ns),
                        over_budget_while_waiting_by: by(&b.by_ns),
                        longest_ms: ms(b.longest_ns),
                    }),
                };
                (t.key.clone(), report)
            })
            .collect()
    }
}

/// A replay distribution (ns) as the report gives it (us).
pub(crate) fn latency_us(l: &LatencyStats) -> LatencyUs {
    let us = |ns: u64| ns as f64 / 1e3;
    LatencyUs {
        n: l.n,
        mean_us: us(l.mean_ns),
        p50_us: us(l.p50_ns),
        p99_us: us(l.p99_ns),
        max_us: us(l.max_ns),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::replay::{BudgetStats, LatencyStats, PeriodStats, ReservationStats};

    /// A fake cgroup tree in a temporary directory (removed on drop).
    struct Tree(PathBuf);

    impl Tree {
        fn new() -> Tree {
            static N: AtomicU32 = AtomicU32::new(0);
            let d = std::env::temp_dir().join(format!(
                "schedbe-trace-cg-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&d);
            let t = Tree(d);
            t.mk("");
            t
        }
        /// A cgroup: a directory with a cgroup.procs file.
        fn mk(&self, rel: &str) -> u64 {
            let d = self.0.join(rel);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cgroup.procs"), "").unwrap();
            self.id(rel)
        }
        fn id(&self, rel: &str) -> u64 {
            std::fs::metadata(self.0.join(rel)).unwrap().ino()
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn args(a: &[&str]) -> Vec<CgroupArg> {
        a.iter()
            .map(|s| crate::args::parse_cgroup_arg(s).unwrap())
            .collect()
    }

    fn err(a: &[&str], root: Option<&Path>) -> String {
        format!("{:#}", CgroupWatch::new(&args(a), root).unwrap_err())
    }

    #[test]
    fn paths_are_checked_before_anything_runs() {
        let t = Tree::new();
        t.mk("a");
        t.mk("a/b");
        std::fs::create_dir_all(t.0.join("plain")).unwrap();
        assert!(CgroupWatch::new(&[], None).unwrap().is_none());
        assert!(err(&["a"], None).contains("not mounted"));
        let e = err(&["a", "nope/x"], Some(&t.0));
        assert!(
            e.contains("--cgroup nope/x") && e.contains("no cgroup at"),
            "{e}"
        );
        let e = err(&["plain"], Some(&t.0));
        assert!(e.contains("not a cgroup"), "{e}");
        let e = err(&["a/../.."], Some(&t.0));
        assert!(e.contains("outside"), "{e}");
        // distinct keys, one directory
        let many: Vec<CgroupArg> = (0..=MAX_CGROUPS)
            .map(|i| CgroupArg {
                path: format!("a{}", "/.".repeat(i)),
                request_milli: None,
            })
            .collect();
        let e = format!("{:#}", CgroupWatch::new(&many, Some(&t.0)).unwrap_err());
        assert!(e.contains("at most 64"), "{e}");
    }

    #[test]
    fn relative_absolute_and_proc_forms_name_the_same_cgroup() {
        let t = Tree::new();
        let id = t.mk("k.slice/pod1.slice");
        let abs = t.0.join("k.slice/pod1.slice");
        let a = args(&[
            "k.slice/pod1.slice",
            abs.to_str().unwrap(),
            "/k.slice/pod1.slice",
            "k.slice/pod1.slice",
        ]);
        let w = CgroupWatch::new(&a, Some(&t.0)).unwrap().unwrap();
        assert_eq!(w.targets.len(), 3, "the repeated key is one entry");
        assert!(w.targets.iter().all(|x| x.id == id && x.nr_cgroups == 1));
    }

    #[test]
    fn requests_labels_and_the_reservation_report() {
        let t = Tree::new();
        t.mk("k");
        t.mk("k/pod1");
        t.mk("k/pod2");
        t.mk("k/pod3");
        let e = err(&["k/pod1=2", "k/pod1=1"], Some(&t.0));
        assert!(e.contains("--cgroup k/pod1 is given twice with different CPU requests"), "{e}");
        let w = CgroupWatch::new(&args(&["k/pod1=2", "k/pod1=2", "k/pod2=1.5", "k/pod3", "k"]), Some(&t.0))
            .unwrap()
            .unwrap();
        assert_eq!(w.targets.len(), 4, "the same path and request twice: one entry");
        assert_eq!(w.requests(), vec![Some(2000), Some(1500), None, None]);
        let l = w.labels();
        assert_eq!(l[0].key, "k/pod1");
        assert_eq!(l[0].depth, l[3].depth + 1, "k/pod1 is one level below k");
        let stats = |reservation| CgroupStats {
            time_at_cpus_ns: vec![MS],
            reservation,
            ..Default::default()
        };
        const MS: u64 = 1_000_000;
        let r = w.report(&[
            stats(Some(ReservationStats {
                request_milli: 2000,
                inversion_ns: 3 * MS,
                longest_ns: 2 * MS,
                by_ns: vec![0, 3 * MS, 0, 0],
            })),
            stats(Some(ReservationStats {
                request_milli: 1500,
                ..Default::default()
            })),
            stats(None),
            stats(None),
        ]);
        let p1 = &r["k/pod1"];
        assert_eq!(p1.request_cpus, Some(2.0));
        assert_eq!(p1.reservation_inversion_ms, Some(3.0));
        assert_eq!(p1.reservation_inversion_longest_ms, Some(2.0));
        assert_eq!(p1.reservation_inversion_by_ms, BTreeMap::from([("k/pod2".to_string(), 3.0)]));
        let p2 = &r["k/pod2"];
        assert_eq!((p2.request_cpus, p2.reservation_inversion_ms), (Some(1.5), Some(0.0)));
        assert!(p2.reservation_inversion_by_ms.is_empty());
        let p3 = &r["k/pod3"];
        assert_eq!((p3.request_cpus, p3.reservation_inversion_ms), (None, None));
    }

    #[test]
    fn budgets_by_target_and_in_the_report() {
        let t = Tree::new();
        t.mk("vm1");
        t.mk("vm2");
        t.mk("host");
        let w = CgroupWatch::new(&args(&["vm1", "host", "vm2", "vm1"]), Some(&t.0))
            .unwrap()
            .unwrap();
        let budgets: Vec<BudgetArg> = ["vm2=2.5/10", "vm1=5/100"]
            .iter()
            .map(|a| crate::args::parse_budget_arg(a).unwrap())
            .collect();
        let spec = |c, t| {
            Some(BudgetSpec {
                budget_ns: c,
                period_ns: t,
            })
        };
        const MS: u64 = 1_000_000;
        assert_eq!(w.budgets(&budgets), vec![spec(5 * MS, 100 * MS), None, spec(2_500_000, 10 * MS)]);
        let stats = |budget| CgroupStats {
            time_at_cpus_ns: vec![MS],
            budget,
            ..Default::default()
        };
        let r = w.report(&[
            stats(Some(BudgetStats {
                budget_ns: 5 * MS,
                period_ns: 100 * MS,
                periods: 3,
                periods_over: 1,
                max_period_ns: 7 * MS,
                over_budget_ns: 2 * MS,
                over_budget_while_waiting_ns: 1_500_000,
                by_ns: vec![0, 0, 1_500_000],
                longest_ns: MS,
            })),
            stats(None),
            stats(Some(BudgetStats {
                budget_ns: 2_500_000,
                period_ns: 10 * MS,
                by_ns: vec![0; 3],
                ..Default::default()
            })),
        ]);
        assert_eq!(
            r["vm1"].budget,
            Some(BudgetReport {
                budget_ms: 5.0,
                period_ms: 100.0,
                periods: 3,
                periods_over: 1,
                max_period_ms: 7.0,
                over_budget_ms: 2.0,
                over_budget_while_waiting_ms: 1.5,
                over_budget_while_waiting_by: BTreeMap::from([("vm2".to_string(), 1.5)]),
                longest_ms: 1.0,
            })
        );
        assert_eq!(r["host"].budget, None);
        let vm2 = r["vm2"].budget.as_ref().unwrap();
        assert_eq!((vm2.budget_ms, vm2.period_ms), (2.5, 10.0));
        assert!(vm2.over_budget_while_waiting_by.is_empty(), "non-zero entries only");
    }

    #[test]
    fn descendants_map_to_every_requested_ancestor() {
        let t = Tree::new();
        let a = t.mk("a");
        let ab = t.mk("a/b");
        let abc = t.mk("a/b/c");
        let ad = t.mk("a/d");
        let x = t.mk("x");
        let w = CgroupWatch::new(&args(&["a", "a/b"]), Some(&t.0))
            .unwrap()
            .unwrap();
        let m: HashMap<u64, CgroupSet> = w.mapped().collect();
        assert_eq!(m.get(&a), Some(&0b01));
        assert_eq!(m.get(&ab), Some(&0b11));
        assert_eq!(m.get(&abc), Some(&0b11));
        assert_eq!(m.get(&ad), Some(&0b01));
        assert_eq!(m.get(&x), None);
        assert_eq!(w.targets[0].nr_cgroups, 4);
        assert_eq!(w.targets[1].nr_cgroups, 2);
    }

    #[test]
    fn unknown_ids_trigger_a_rate_limited_walk() {
        let t = Tree::new();
        t.mk("a");
        let x = t.mk("x");
        let mut w = CgroupWatch::new(&args(&["a"]), Some(&t.0))
            .unwrap()
            .unwrap();
        assert_eq!(w.walks, 1);
        let known = w.targets[0].id;
        // known ids: no walk
        assert!(w.resolve([known, 0], REWALK_MIN_NS).is_empty());
        assert_eq!(w.walks, 1);
        // a cgroup created under a: found by the walk its first event triggers
        let e = t.mk("a/e");
        assert_eq!(w.resolve([e, x], REWALK_MIN_NS), vec![(e, 0b1)]);
        assert_eq!(w.walks, 2);
        // x was not found: outside, never walked for again
        assert!(w.resolve([x], 10 * REWALK_MIN_NS).is_empty());
        assert_eq!(w.walks, 2);
        // a burst of new ids: one walk per REWALK_MIN_NS; the rest wait
        let f = t.mk("a/f");
        let g = t.mk("a/g");
        let mut fg = w.resolve([f], 10 * REWALK_MIN_NS);
        fg.sort_unstable();
        let mut want = vec![(f, 0b1), (g, 0b1)];
        want.sort_unstable();
        assert_eq!(fg, want, "everything new in the subtree");
        let h = t.mk("a/h");
        assert!(
            w.resolve([h], 10 * REWALK_MIN_NS + 1).is_empty(),
            "rate-limited"
        );
        assert_eq!(
            w.resolve([h], 11 * REWALK_MIN_NS),
            vec![(h, 0b1)],
            "retried"
        );
        assert_eq!(w.walks, 4);
        // the report keeps the command line's keys
        let r = w.report(&[CgroupStats {
            max_cpus: 1,
            lc_ns: 1_500_000,
            be_ns: 0,
            other_ns: 0,
            time_at_cpus_ns: vec![500_000, 1_500_000],
            reservation: None,
            wakeup_latency: LatencyStats {
                n: 2,
                mean_ns: 2_500,
                p50_ns: 2_000,
                p99_ns: 3_000,
                max_ns: 3_000,
            },
            timer_latency: LatencyStats {
                n: 1,
                mean_ns: 7_000,
                p50_ns: 7_000,
                p99_ns: 7_000,
                max_ns: 7_000,
            },
            periods: Some(vec![PeriodStats {
                start_ns: 4_000_000,
                cpu_ns: 1_000_000,
                wait_ns: 250_000,
            }]),
            budget: None,
        }]);
        let c = &r["a"];
        assert_eq!((c.id, c.max_cpus), (known, 1));
        assert_eq!(c.cpu_time_ms.lc, 1.5);
        assert_eq!(c.cpu_time_ms.total, 1.5);
        assert_eq!(c.time_at_cpus_ms, vec![0.5, 1.5]);
        assert_eq!(c.nr_cgroups, 5);
        let l = &c.wakeup_latency;
        assert_eq!((l.n, l.mean_us, l.p50_us, l.p99_us, l.max_us), (2, 2.5, 2.0, 3.0, 3.0));
        assert_eq!((c.timer_latency.n, c.timer_latency.p99_us), (1, 7.0));
        assert_eq!(
            c.periods,
            Some(vec![PeriodRow {
                start_ns: 4_000_000,
                cpu_ms: 1.0,
                wait_ms: 0.25
            }])
        );

        // the requested cgroup is removed: counted once, then no longer walked,
        // and unknown ids are still settled as outside. y is made before the
        // removal: made after, it could reuse the inode number (= id) of a
        // removed cgroup the watch already knows, and trigger no walk.
        let y = t.mk("y");
        std::fs::remove_dir_all(t.0.join("a")).unwrap();
        assert!(w.resolve([y], 20 * REWALK_MIN_NS).is_empty());
        assert_eq!(w.walk_errors, 1);
        assert!(w.targets[0].gone);
        assert!(w.resolve([y], 30 * REWALK_MIN_NS).is_empty());
        assert_eq!((w.walks, w.walk_errors), (5, 1), "y is known to be outside");
    }
}
