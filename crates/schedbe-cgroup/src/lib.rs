//! cgroup v2 helpers and the LC/BE classification rules.
//!
//! The scheduler (`schedbe run`) and the independent tracer (`schedbe trace`)
//! classify tasks by the same rules. The BPF half lives in `bpf/tier.bpf.h`
//! (SCHED_IDLE policy and cpu.idle are read from the kernel directly); this
//! crate supplies the third rule: cgroups whose path matches a configured
//! pattern. Each consumer keeps its own BPF map and fills it from [`scan`].

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Where cgroup v2 is mounted.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Kubelet BestEffort cgroups, for the systemd and cgroupfs cgroup drivers,
/// at the default cgroup root or nested under another one.
pub const DEFAULT_BE_PATTERNS: &[&str] = &[
    "kubepods.slice/kubepods-besteffort.slice",
    "**/kubepods.slice/kubepods-besteffort.slice",
    "kubepods/besteffort",
    "**/kubepods/besteffort",
];

/// Compiled cgroup path patterns: globs relative to the cgroup root, `*`
/// within one path component, `**` any number of levels. Shared by the BE
/// rules and by the host agent's sandbox discovery, so both read patterns the
/// same way.
#[derive(Debug, Clone)]
pub struct PathPatterns {
    patterns: Vec<glob::Pattern>,
}

impl PathPatterns {
    /// Compile patterns; `what` names them in errors ("BE cgroup", "sandbox").
    /// A pattern that is empty (it would name the root) or not a valid glob is
    /// an error naming it.
    pub fn new<S: AsRef<str>>(what: &str, patterns: &[S]) -> Result<Self> {
        let mut out = Vec::new();
        for p in patterns {
            let p = p.as_ref().trim_matches('/');
            if p.is_empty() {
                bail!("empty {what} pattern (it would name the root cgroup)");
            }
            let pat = glob::Pattern::new(p).with_context(|| format!("invalid {what} pattern {p:?}"))?;
            out.push(pat);
        }
        Ok(Self { patterns: out })
    }

    /// Does this path (relative to the cgroup root, no leading slash) match?
    pub fn matches(&self, rel: &str) -> bool {
        let opts = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        self.patterns.iter().any(|p| p.matches_with(rel, opts))
    }

    pub fn patterns(&self) -> Vec<String> {
        self.patterns.iter().map(|p| p.as_str().to_string()).collect()
    }

    /// The cgroups of an earlier [`walk`] whose path matches (never the root).
    pub fn select<'a>(&'a self, cgroups: &'a [Cgroup]) -> impl Iterator<Item = &'a Cgroup> + 'a {
        cgroups.iter().filter(|c| !c.rel.is_empty() && self.matches(&c.rel))
    }
}

/// The BE path patterns. A matching cgroup and all its descendants are BE.
#[derive(Debug, Clone)]
pub struct BeRules {
    inner: PathPatterns,
}

impl BeRules {
    /// Compile patterns; a pattern that is not a valid glob is an error naming it.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self> {
        Ok(Self { inner: PathPatterns::new("BE cgroup", patterns)? })
    }

    /// The defaults: kubelet BestEffort cgroups for both drivers.
    pub fn defaults() -> Self {
        Self::new(DEFAULT_BE_PATTERNS).expect("default patterns are valid")
    }

    /// Does this path (relative to the cgroup root, no leading slash) match?
    pub fn matches(&self, rel: &str) -> bool {
        self.inner.matches(rel)
    }

    pub fn patterns(&self) -> Vec<String> {
        self.inner.patterns()
    }
}

/// One cgroup directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    /// Path relative to the cgroup root, without leading slash ("" is the root).
    pub rel: String,
    /// cgroup id: the directory's inode number, equal to kernfs_node->id.
    pub id: u64,
}

/// The id of the cgroup directory `dir` (its inode number), if it exists.
pub fn cgroup_id(dir: &Path) -> Option<u64> {
    fs::metadata(dir).ok().filter(|m| m.is_dir()).map(|m| m.ino())
}

/// Walk the cgroup tree under `root` (depth first, root included).
/// Cgroups that vanish during the walk are skipped.
pub fn walk(root: &Path) -> Result<Vec<Cgroup>> {
    walk_until(root, |_| false)
}

/// [`walk`], not descending below the cgroups for which `stop(rel)` holds
/// (they are listed, their descendants are not): a caller that wants only the
/// outermost matches does not read every pod's containers.
pub fn walk_until(root: &Path, stop: impl Fn(&str) -> bool) -> Result<Vec<Cgroup>> {
    let meta = fs::metadata(root).with_context(|| format!("cannot read {}", root.display()))?;
    let mut out = vec![Cgroup { rel: String::new(), id: meta.ino() }];
    let mut stack: Vec<(PathBuf, String)> = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if !ft.is_dir() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let crel = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            // d_ino from readdir: kernfs reports the node's id there as it
            // does in stat's st_ino, so no statx per cgroup (a daemon walks
            // the tree every second)
            out.push(Cgroup { rel: crel.clone(), id: e.ino() });
            if !stop(&crel) {
                stack.push((e.path(), crel));
            }
        }
    }
    Ok(out)
}

/// The thread ids in the cgroup `dir` and every cgroup below it (each
/// cgroup's `cgroup.threads`), sorted. Cgroups that vanish during the walk,
/// or a `dir` that does not exist, give no threads.
pub fn threads_below(dir: &Path) -> Vec<u32> {
    let mut tids = Vec::new();
    for cg in walk(dir).unwrap_or_default() {
        let Ok(text) = fs::read_to_string(dir.join(&cg.rel).join("cgroup.threads")) else { continue };
        tids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    tids.sort_unstable();
    tids.dedup();
    tids
}

/// cgroups under `root` whose path matches `rules` (their descendants are BE
/// too, which the BPF side resolves by walking ancestors).
pub fn scan(root: &Path, rules: &BeRules) -> Result<Vec<Cgroup>> {
    Ok(be_matches(&walk(root)?, rules).cloned().collect())
}

/// The cgroups of an earlier [`walk`] whose path matches `rules` (never the root).
pub fn be_matches<'a>(cgroups: &'a [Cgroup], rules: &'a BeRules) -> impl Iterator<Item = &'a Cgroup> + 'a {
    rules.inner.select(cgroups)
}

/// Keeps a BPF hash map of cgroup ids in step with a scan: returns ids to add
/// and ids to remove since the previous call.
#[derive(Default)]
pub struct IdSet {
    cur: HashSet<u64>,
}

impl IdSet {
    pub fn update(&mut self, ids: impl IntoIterator<Item = u64>) -> (Vec<u64>, Vec<u64>) {
        let new: HashSet<u64> = ids.into_iter().collect();
        let add = new.difference(&self.cur).copied().collect();
        let del = self.cur.difference(&new).copied().collect();
        self.cur = new;
        (add, del)
    }
    pub fn len(&self) -> usize {
        self.cur.len()
    }
    pub fn is_empty(&self) -> bool {
        self.cur.is_empty()
    }
}

/// A cgroup's CPU bandwidth limit: cpu.max ("QUOTA PERIOD", µs) and cpu.max.burst (µs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bandwidth {
    pub quota_us: u64,
    pub period_us: u64,
    pub burst_us: u64,
}

/// Parse cpu.max: `Ok(None)` for "max [PERIOD]" (no limit), `Ok(Some((quota, period)))`
/// for "QUOTA PERIOD". The kernel accepts periods of 1 ms..1 s and quotas of at
/// least 1 ms; anything else is an error naming what is wrong.
pub fn parse_cpu_max(text: &str) -> Result<Option<(u64, u64)>> {
    let mut it = text.split_whitespace();
    let quota = it.next().ok_or_else(|| anyhow::anyhow!("empty cpu.max"))?;
    let period: u64 = match it.next() {
        Some(p) => p.parse().map_err(|_| anyhow::anyhow!("cpu.max period {p:?} is not a number"))?,
        None => 100_000,
    };
    if it.next().is_some() {
        bail!("cpu.max {:?} has more than two fields", text.trim());
    }
    if !(1_000..=1_000_000).contains(&period) {
        bail!("cpu.max period {period} us is outside 1000..=1000000");
    }
    if quota == "max" {
        return Ok(None);
    }
    let q: u64 = quota.parse().map_err(|_| anyhow::anyhow!("cpu.max quota {quota:?} is neither \"max\" nor a number"))?;
    if q < 1_000 {
        bail!("cpu.max quota {q} us is below the kernel's minimum of 1000");
    }
    Ok(Some((q, period)))
}

/// Parse a kernel CPU list as cpuset.cpus and affinity options write it
/// ("0-3,5"): sorted, distinct ids below 4096; an empty list is an error.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let a: usize = a.trim().parse().with_context(|| format!("bad CPU list {s:?}"))?;
            let b: usize = b.trim().parse().with_context(|| format!("bad CPU list {s:?}"))?;
            if a > b || b >= 4096 {
                bail!("bad CPU range {part:?} in {s:?}");
            }
            out.extend(a..=b);
        } else {
            let c: usize = part.parse().with_context(|| format!("bad CPU list {s:?}"))?;
            if c >= 4096 {
                bail!("CPU {c} out of range in {s:?}");
            }
            out.push(c);
        }
    }
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        bail!("empty CPU list {s:?}");
    }
    Ok(out)
}

/// The bandwidth limit of cgroup `rel` under `root`: `Ok(None)` when it has
/// none (or no cpu controller), `Err` when cpu.max cannot be parsed.
pub fn bandwidth(root: &Path, rel: &str) -> Result<Option<Bandwidth>> {
    let dir = root.join(rel);
    let Ok(text) = fs::read_to_string(dir.join("cpu.max")) else { return Ok(None) };
    let Some((quota_us, period_us)) = parse_cpu_max(&text).with_context(|| format!("/{rel}/cpu.max"))? else {
        return Ok(None);
    };
    let burst_us = fs::read_to_string(dir.join("cpu.max.burst")).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    Ok(Some(Bandwidth { quota_us, period_us, burst_us }))
}

/// cpu.weight of a cgroup (100 when the file is absent, e.g. the root or a
/// cgroup without the cpu controller).
pub fn cpu_weight(root: &Path, rel: &str) -> u32 {
    fs::read_to_string(root.join(rel).join("cpu.weight"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// The cgroup v2 path of a process, relative to the root ("" for the root).
pub fn proc_cgroup(pid: u32) -> Result<String> {
    let s = fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .with_context(|| format!("cannot read /proc/{pid}/cgroup"))?;
    for line in s.lines() {
        if let Some(p) = line.strip_prefix("0::") {
            return Ok(p.trim_start_matches('/').to_string());
        }
    }
    bail!("process {pid} has no cgroup v2 entry (is cgroup v2 mounted?)")
}

/// Make the child of `cmd` start in cgroup `cg`: it writes itself into
/// `cg/cgroup.procs` between fork and exec, so it never runs a single
/// instruction of the program elsewhere (and no window exists in which it
/// could fork outside `cg`). Returns the open `cgroup.procs` file, which must
/// stay open until `cmd` has been spawned. Further `pre_exec` hooks added
/// later run after this one.
pub fn spawn_into(cmd: &mut std::process::Command, cg: &Path) -> Result<fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;

    // Opened before fork (O_CLOEXEC), so the child only needs write(2).
    let procs = fs::OpenOptions::new()
        .write(true)
        .open(cg.join("cgroup.procs"))
        .with_context(|| format!("cannot open {}/cgroup.procs", cg.display()))?;
    let fd = procs.as_raw_fd();
    // SAFETY: the hook only calls write(2), which is async-signal-safe, and
    // does not allocate.
    unsafe {
        cmd.pre_exec(move || {
            if libc::write(fd, b"0".as_ptr() as *const libc::c_void, 1) != 1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(procs)
}

/// Is cgroup v2 mounted at [`CGROUP_ROOT`]?
pub fn cgroup2_mounted() -> bool {
    Path::new(CGROUP_ROOT).join("cgroup.controllers").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_parses_like_the_kernel() {
        assert_eq!(parse_cpu_max("max 100000\n").unwrap(), None);
        assert_eq!(parse_cpu_max("max").unwrap(), None);
        assert_eq!(parse_cpu_max("50000 100000\n").unwrap(), Some((50_000, 100_000)));
        assert_eq!(parse_cpu_max("200000").unwrap(), Some((200_000, 100_000)));
        for bad in ["", "fifty 100000", "50000 abc", "50000 100000 1", "500 100000", "50000 500", "50000 2000000"] {
            assert!(parse_cpu_max(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-2,5, 1").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(parse_cpu_list("3").unwrap(), vec![3]);
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("2-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("4096").is_err());
    }

    #[test]
    fn defaults_match_both_kubelet_drivers() {
        let r = BeRules::defaults();
        assert!(r.matches("kubepods.slice/kubepods-besteffort.slice"));
        assert!(r.matches("kubepods/besteffort"));
        assert!(r.matches("custom.slice/kubepods.slice/kubepods-besteffort.slice"));
        assert!(!r.matches("kubepods.slice/kubepods-burstable.slice"));
        assert!(!r.matches("kubepods/burstable"));
        assert!(!r.matches("system.slice"));
        // descendants are resolved on the BPF side, not by the pattern
        assert!(!r.matches("kubepods/besteffort/pod1"));
    }

    #[test]
    fn threads_below_reads_the_whole_subtree() {
        let dir = std::env::temp_dir().join(format!("schedbe-threads-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("libvirt/vcpu0")).unwrap();
        fs::write(dir.join("cgroup.threads"), "12\n7\n").unwrap();
        fs::write(dir.join("libvirt/vcpu0/cgroup.threads"), "30\n").unwrap();
        // libvirt/ has no cgroup.threads: skipped, as a cgroup that vanished
        assert_eq!(threads_below(&dir), vec![7, 12, 30]);
        assert!(threads_below(&dir.join("gone")).is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_pattern_is_named() {
        let e = BeRules::new(&["a/[b"]).unwrap_err();
        assert!(format!("{e:#}").contains("a/[b"), "{e:#}");
        assert!(BeRules::new(&["/"]).is_err());
        let e = PathPatterns::new("sandbox", &["x/[y"]).unwrap_err();
        assert!(format!("{e:#}").contains("invalid sandbox pattern \"x/[y\""), "{e:#}");
    }

    #[test]
    fn path_patterns_select_one_level_per_star() {
        let p = PathPatterns::new("sandbox", &["kubepods/*/pod*"]).unwrap();
        let cg = |rel: &str| Cgroup { rel: rel.to_string(), id: 0 };
        let all = [cg(""), cg("kubepods/burstable/podA"), cg("kubepods/burstable/podA/c1"), cg("kubepods/podB")];
        let got: Vec<_> = p.select(&all).map(|c| c.rel.as_str()).collect();
        assert_eq!(got, ["kubepods/burstable/podA"]);
    }

    #[test]
    fn idset_diffs() {
        let mut s = IdSet::default();
        let (a, d) = s.update([1, 2]);
        assert_eq!((a.len(), d.len()), (2, 0));
        let (a, d) = s.update([2, 3]);
        assert_eq!((a, d), (vec![3], vec![1]));
    }

    #[test]
    fn walk_and_scan_a_fake_tree() {
        let tmp = std::env::temp_dir().join(format!("schedbe-cg-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir_all(tmp.join("kubepods/besteffort/pod1")).unwrap();
        fs::create_dir_all(tmp.join("kubepods/burstable")).unwrap();
        fs::write(tmp.join("kubepods/burstable/cpu.max"), "50000 100000\n").unwrap();
        fs::write(tmp.join("kubepods/cpu.max"), "max 100000\n").unwrap();
        fs::write(tmp.join("kubepods/cpu.weight"), "42\n").unwrap();
        let all = walk(&tmp).unwrap();
        assert_eq!(all.len(), 5);
        // stopping at besteffort lists it but not pod1 below it
        let pruned = walk_until(&tmp, |rel| rel == "kubepods/besteffort").unwrap();
        let mut rels: Vec<&str> = pruned.iter().map(|c| c.rel.as_str()).collect();
        rels.sort();
        assert_eq!(rels, ["", "kubepods", "kubepods/besteffort", "kubepods/burstable"]);
        let be = scan(&tmp, &BeRules::defaults()).unwrap();
        assert_eq!(be.iter().map(|c| c.rel.as_str()).collect::<Vec<_>>(), ["kubepods/besteffort"]);
        fs::write(tmp.join("kubepods/burstable/cpu.max.burst"), "20000\n").unwrap();
        fs::write(tmp.join("kubepods/besteffort/cpu.max"), "lots 100000\n").unwrap();
        assert_eq!(
            bandwidth(&tmp, "kubepods/burstable").unwrap(),
            Some(Bandwidth { quota_us: 50_000, period_us: 100_000, burst_us: 20_000 })
        );
        assert_eq!(bandwidth(&tmp, "kubepods").unwrap(), None);
        assert_eq!(bandwidth(&tmp, "kubepods/besteffort/pod1").unwrap(), None, "no cpu.max file: no limit");
        let e = bandwidth(&tmp, "kubepods/besteffort").unwrap_err();
        assert!(format!("{e:#}").contains("/kubepods/besteffort/cpu.max"), "{e:#}");
        assert_eq!(cpu_weight(&tmp, "kubepods"), 42);
        assert_eq!(cpu_weight(&tmp, "kubepods/besteffort"), 100);
        fs::remove_dir_all(&tmp).unwrap();
    }
}
