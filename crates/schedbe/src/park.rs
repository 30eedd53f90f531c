//! Parking: under sustained LC overload, BE cgroups whose tasks starve are
//! frozen with the cgroup v2 freezer, and thawed when LC leaves idle capacity.
//!
//! Why the freezer: a starved BE task that stays runnable is a time bomb under
//! sched_ext (the watchdog ejects the scheduler after at most 30 s), and the
//! starvation guard that prevents that costs LC a slice every few seconds per
//! task. A frozen task is not runnable. The freezer stops a task only on its
//! way back to user space, holding no kernel lock; the BPF side runs a task
//! with a freeze pending as LC until it gets there (sched_be/sched_be.bpf.c, "parking").
//!
//! When: the BPF side reports a cgroup when one of its BE tasks was runnable
//! for a whole park_after window and got under 1/32 of it on a CPU. That is
//! per task, and a cgroup of several BE threads sharing the few percent LC
//! leaves at high (not overload) load has each thread near that bar while the
//! cgroup as a whole progresses. So a report starts a confirmation: the
//! cgroup's own CPU usage (cpu.stat) over the next half window must also be
//! under 1/32 of one CPU. Default 3 s + 1.5 s, below the 5 s starvation
//! limit, so sustained overload parks before any guard slice.
//!
//! What is parked: the cgroup of a starved BE task, when that cgroup lies in a
//! BE subtree (a configured BE path pattern, or cpu.idle=1 on it or an
//! ancestor), so every task the freeze stops is BE. A BE task in an LC cgroup
//! (a SCHED_IDLE thread in an LC process) is never parked: freezing its cgroup
//! would freeze its LC siblings. The starvation guard keeps serving it.
//!
//! Never freezing a task for good: every cgroup is recorded in the state file
//! (write-ahead, atomic rename) before it is frozen, and removed after it is
//! thawed. Every exit path of `schedbe run` thaws (Drop); a guardian process
//! thaws when the daemon dies without doing so (SIGKILL, abort); the next
//! start and `schedbe thaw` (the systemd unit's ExecStopPost) thaw leftovers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::MapCore;
use log::{debug, info, warn};
use schedbe_cgroup::CGROUP_ROOT;
use serde::{Deserialize, Serialize};

pub const DEFAULT_STATE_FILE: &str = "/run/schedbe/parked.json";

/// The parking policy's knobs (config.rs validates them).
#[derive(Debug, Clone)]
pub struct ParkSettings {
    /// Idle capacity must last this long before parked cgroups are thawed.
    pub unpark_after: Duration,
    /// "Idle capacity": at least this fraction of one CPU idle, on average
    /// over each sample.
    pub unpark_idle_cpus: f64,
    /// A reported cgroup is parked if, over this long after the report, its
    /// CPU usage stays under STARVED_SHARE of one CPU.
    pub confirm: Duration,
    pub state_file: PathBuf,
}

/// "Starved": under 1/32 of one CPU, the BPF side's per-task bar (intf.h).
pub const STARVED_SHARE: f64 = 1.0 / crate::bpf_intf::schedbe_consts_SCHEDBE_STARVED_DIV as f64;

/// A cgroup's CPU time so far (cpu.stat usage_usec, present on every cgroup v2
/// cgroup whether or not the cpu controller is enabled), in microseconds.
fn usage_usec(rel: &str) -> Result<u64> {
    let path = Path::new(CGROUP_ROOT).join(rel).join("cpu.stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("usage_usec ")?.trim().parse().ok())
        .with_context(|| format!("no usage_usec in {}", path.display()))
}

/// The share of one CPU a cgroup got between two usage samples `dt` apart.
fn cpu_share(usage0: u64, usage1: u64, dt: Duration) -> f64 {
    if dt.is_zero() {
        return f64::INFINITY;
    }
    usage1.saturating_sub(usage0) as f64 / 1e6 / dt.as_secs_f64()
}

/// The state file: cgroups schedbe froze, relative to the cgroup v2 root.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    pid: u32,
    cgroups: Vec<String>,
}

fn freeze_path(rel: &str) -> PathBuf {
    Path::new(CGROUP_ROOT).join(rel).join("cgroup.freeze")
}

fn is_gone(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENODEV))
}

/// Set a cgroup's cgroup.freeze. A cgroup that no longer exists counts as
/// thawed (Ok(false)); Ok(true) means the write happened.
fn write_freeze(rel: &str, on: bool) -> Result<bool> {
    match std::fs::write(freeze_path(rel), if on { "1" } else { "0" }) {
        Ok(()) => Ok(true),
        Err(e) if !on && is_gone(&e) => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot write {}", freeze_path(rel).display())),
    }
}

fn read_freeze(rel: &str) -> Result<bool> {
    let p = freeze_path(rel);
    let s = std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
    Ok(s.trim() == "1")
}

fn load_state(path: &Path) -> Result<Option<State>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(
            serde_json::from_str(&text).with_context(|| format!("state file {} is corrupt", path.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read state file {}", path.display())),
    }
}

/// Write the state atomically (temp file, fsync, rename), or remove the file
/// when nothing is frozen.
fn store_state(path: &Path, cgroups: &[String]) -> Result<()> {
    if cgroups.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("cannot remove state file {}", path.display()))
            }
            _ => Ok(()),
        };
    }
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = path.with_extension("tmp");
    let st = State { pid: std::process::id(), cgroups: cgroups.to_vec() };
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(serde_json::to_string_pretty(&st)?.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write state file {}", path.display()))?;
    Ok(())
}

/// Thaw every cgroup a previous schedbe left frozen (the state file lists
/// them) and remove the file. Returns what was thawed.
pub fn thaw_leftovers(state_file: &Path) -> Result<Vec<String>> {
    let Some(st) = load_state(state_file)? else { return Ok(Vec::new()) };
    let mut thawed = Vec::new();
    let mut failed = Vec::new();
    for rel in &st.cgroups {
        match write_freeze(rel, false) {
            Ok(true) => thawed.push(rel.clone()),
            Ok(false) => {} // the cgroup is gone; nothing to thaw
            Err(e) => {
                warn!("{e:#}");
                failed.push(rel.clone());
            }
        }
    }
    store_state(state_file, &failed)?;
    if !failed.is_empty() {
        bail!("could not thaw {} cgroup(s): {}", failed.len(), failed.join(", "));
    }
    Ok(thawed)
}

/// At start, parking on or off: thaw what a previous run left frozen and say so.
pub fn thaw_at_start(state_file: &Path) -> Result<()> {
    let left = thaw_leftovers(state_file)?;
    if !left.is_empty() {
        warn!("thawed {} cgroup(s) a previous schedbe left frozen: /{}", left.len(), left.join(", /"));
    }
    Ok(())
}

/// Read and clear the BPF side's reports of cgroups with a starved BE task
/// (`starved_cgrps`, park_report.bpf.h, the same map in every policy).
pub fn take_reports(map: &impl MapCore) -> Vec<u64> {
    let mut ids = Vec::new();
    for key in map.keys() {
        let _ = map.delete(&key);
        if let Ok(k) = key[..].try_into() {
            ids.push(u64::from_ne_bytes(k));
        }
    }
    ids
}

/// Is every task in cgroup `rel` BE: does it or an ancestor match a BE path
/// pattern (`be_path`) or have cpu.idle=1? (Mirrors tier.bpf.h, minus the
/// per-task SCHED_IDLE rule, which never covers a whole cgroup.)
pub fn be_subtree(rel: &str, be_path: impl Fn(&str) -> bool) -> bool {
    let root = Path::new(CGROUP_ROOT);
    let mut prefix = String::new();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if be_path(&prefix) {
            return true;
        }
        if std::fs::read_to_string(root.join(&prefix).join("cpu.idle")).map(|s| s.trim() == "1").unwrap_or(false) {
            return true;
        }
    }
    false
}

/// How often a daemon's loop samples idle capacity while something is
/// parked, and how often it reads the starvation reports while nothing is.
/// Each wakeup of the loop costs the daemon CPU time that LC could use, so
/// while nothing is parked it wakes only every STARVED_POLL (which adds at
/// most that much to park_after_ms before a starved cgroup is frozen).
const PARK_SAMPLE: Duration = Duration::from_millis(100);
const STARVED_POLL: Duration = Duration::from_millis(250);

/// The interval to the next parking step.
pub fn poll_interval(any_parked: bool) -> Duration {
    if any_parked {
        PARK_SAMPLE
    } else {
        STARVED_POLL
    }
}

/// Parking as a policy's daemon runs it (Config::park_options()).
#[derive(Debug, Clone)]
pub struct ParkOptions {
    /// None: parking is off.
    pub settings: Option<ParkSettings>,
    /// Thawed at start whether parking is on or not.
    pub state_file: PathBuf,
    /// The BPF side's starvation window, park_after_ns (0: off).
    pub window_ns: u64,
}

/// At a policy's start: a Parker when parking is on, after thawing what a
/// previous run left frozen either way.
pub fn start(o: &ParkOptions) -> Result<Option<Parker>> {
    match &o.settings {
        Some(s) => Ok(Some(Parker::new(s.clone())?)),
        None => thaw_at_start(&o.state_file).map(|_| None),
    }
}

/// Is `anc` the cgroup `rel` or one of its ancestors?
fn contains(anc: &str, rel: &str) -> bool {
    anc.is_empty() || rel == anc || rel.starts_with(&format!("{anc}/"))
}

/// Per-CPU idle time from /proc/stat (idle + iowait), in seconds, indexed
/// by CPU number (CPUs missing from the file, i.e. offline, read as 0).
fn idle_secs_per_cpu() -> Result<Vec<f64>> {
    let s = std::fs::read_to_string("/proc/stat").context("cannot read /proc/stat")?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut out = Vec::new();
    for line in s.lines().filter(|l| l.starts_with("cpu") && !l.starts_with("cpu ")) {
        let mut it = line.split_whitespace();
        let Some(cpu) = it.next().and_then(|c| c[3..].parse::<usize>().ok()) else { continue };
        let f: Vec<f64> = it.filter_map(|x| x.parse().ok()).collect();
        if f.len() < 5 {
            bail!("unexpected /proc/stat line: {line}");
        }
        if out.len() <= cpu {
            out.resize(cpu + 1, 0.0);
        }
        out[cpu] = (f[3] + f[4]) / hz;
    }
    Ok(out)
}

/// The threads in cgroup `dir` and its descendants (the subtree walk is
/// schedbe-cgroup's, the same the rescan uses).
fn subtree_threads(dir: &Path) -> Vec<libc::pid_t> {
    let cgroups = schedbe_cgroup::walk(dir).unwrap_or_default();
    cgroups
        .iter()
        .flat_map(|c| std::fs::read_to_string(dir.join(&c.rel).join("cgroup.threads")).unwrap_or_default().lines().map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|t| t.trim().parse().ok())
        .collect()
}

/// The CPUs any thread in cgroup `dir` (or below) may run on, and how many
/// threads there are.
fn usable_cpus(dir: &Path) -> (Vec<usize>, usize) {
    let tids = subtree_threads(dir);
    let mut set = std::collections::BTreeSet::new();
    for &tid in &tids {
        // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        if unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut mask) } == 0 {
            set.extend((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &mask) }));
        }
    }
    (set.into_iter().collect(), tids.len())
}

/// Counters for the stats.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize, scx_stats_derive::Stats)]
pub struct ParkCounts {
    pub parked_cgroups: u64,
    pub parked_tasks: u64,
    pub park_events: u64,
    pub unpark_events: u64,
}

/// A parked cgroup.
struct Parked {
    since: Instant,
    /// CPUs its threads may use (affinity, cpusets): only idle time there
    /// is room for them. Empty: unknown, use every CPU.
    cpus: Vec<usize>,
    /// How long those CPUs have had idle capacity without a break.
    idle_streak: Duration,
}

pub struct Parker {
    s: ParkSettings,
    parked: BTreeMap<String, Parked>,
    /// Reported cgroups under confirmation: when, and their usage then.
    pending: HashMap<String, (Instant, u64)>,
    own: String,
    warned: HashSet<String>,
    last_sample: Option<(Instant, Vec<f64>)>,
    ticks: u64,
    park_events: u64,
    unpark_events: u64,
}

impl Parker {
    /// Thaws what a previous run left frozen, then starts with nothing parked.
    pub fn new(s: ParkSettings) -> Result<Self> {
        thaw_at_start(&s.state_file)?;
        Ok(Self {
            s,
            parked: BTreeMap::new(),
            pending: HashMap::new(),
            own: schedbe_cgroup::proc_cgroup(std::process::id()).unwrap_or_default(),
            warned: HashSet::new(),
            last_sample: None,
            ticks: 0,
            park_events: 0,
            unpark_events: 0,
        })
    }

    fn warn_once(&mut self, rel: &str, msg: String) {
        if self.warned.insert(rel.to_string()) {
            warn!("{msg}");
        }
    }

    fn save(&self) -> Result<()> {
        store_state(&self.s.state_file, &self.parked.keys().cloned().collect::<Vec<_>>())
    }

    /// A BE task in cgroup `rel` starved for longer than the park threshold.
    /// `be_subtree`: every task in `rel` and below is BE. Starts the
    /// confirmation (see the module comment); tick() parks.
    pub fn on_starved(&mut self, rel: &str, be_subtree: bool) {
        if rel.is_empty() || self.pending.contains_key(rel) || self.parked.keys().any(|p| contains(p, rel)) {
            return;
        }
        if !be_subtree {
            self.warn_once(rel, format!(
                "BE tasks in /{rel} starve, but that cgroup is not all-BE (e.g. SCHED_IDLE threads of an LC process): not parking it, the starvation guard serves them"
            ));
            return;
        }
        if contains(rel, &self.own) {
            self.warn_once(rel, format!("not parking /{rel}: schedbe itself runs there"));
            return;
        }
        match usage_usec(rel) {
            Ok(u) => {
                self.pending.insert(rel.to_string(), (Instant::now(), u));
            }
            Err(e) => self.warn_once(rel, format!("cannot park /{rel}: {e:#}")),
        }
    }

    /// Park the reported cgroups whose confirmation window has passed with
    /// the cgroup still starved.
    fn confirm_pending(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self.pending.iter().filter(|(_, (t, _))| now.duration_since(*t) >= self.s.confirm).map(|(r, _)| r.clone()).collect();
        for rel in due {
            let Some((t0, u0)) = self.pending.remove(&rel) else { continue };
            let share = match usage_usec(&rel) {
                Ok(u1) => cpu_share(u0, u1, now.duration_since(t0)),
                Err(_) => continue, // removed meanwhile
            };
            if share < STARVED_SHARE {
                self.park(&rel);
            } else {
                debug!("not parking /{rel}: a task starved, but the cgroup got {:.1}% of a CPU", 100.0 * share);
            }
        }
    }

    fn park(&mut self, rel: &str) {
        if self.parked.keys().any(|p| contains(p, rel)) {
            return;
        }
        match read_freeze(rel) {
            Ok(true) => return, // frozen by someone else: not ours to touch
            Ok(false) => {}
            Err(e) => return self.warn_once(rel, format!("cannot park /{rel}: {e:#}")),
        }
        // Write-ahead: record it before freezing, so no exit path can lose it.
        let (cpus, nthreads) = usable_cpus(&Path::new(CGROUP_ROOT).join(rel));
        if nthreads == 0 {
            return; // the starved task has left (or exited); freezing would trap newcomers
        }
        self.parked.insert(rel.to_string(), Parked { since: Instant::now(), cpus, idle_streak: Duration::ZERO });
        let res = self.save().and_then(|_| write_freeze(rel, true));
        if let Err(e) = res {
            self.parked.remove(rel);
            let _ = self.save();
            return self.warn_once(rel, format!("cannot park /{rel}: {e:#}"));
        }
        self.park_events += 1;
        info!("parked /{rel}: its BE tasks starved under LC load");
    }

    /// Sample idle capacity; thaw a parked cgroup once the CPUs it may use
    /// have had at least the configured idle capacity for the hysteresis
    /// period. (Only idle time its threads could use counts: a BE task
    /// pinned next to an LC hog would otherwise flap between parked and
    /// starved.)
    pub fn tick(&mut self) {
        self.confirm_pending();
        if self.parked.is_empty() {
            self.last_sample = None; // nothing to unpark: save the /proc/stat read
            return;
        }
        let now = Instant::now();
        let idle = match idle_secs_per_cpu() {
            Ok(v) => v,
            Err(e) => return self.warn_once("/proc/stat", format!("{e:#}")),
        };
        let Some((t0, i0)) = self.last_sample.replace((now, idle.clone())) else { return };
        let dt = now.duration_since(t0);
        if dt.is_zero() {
            return;
        }
        let idle_on = |c: usize| (idle.get(c).copied().unwrap_or(0.0) - i0.get(c).copied().unwrap_or(0.0)).max(0.0);
        let mut thaw = Vec::new();
        let mut empty = Vec::new();
        // Tasks come and go, and affinities change: refresh about every second.
        self.ticks += 1;
        let refresh = self.ticks.is_multiple_of(10);
        for (rel, p) in self.parked.iter_mut() {
            if refresh {
                let (cpus, n) = usable_cpus(&Path::new(CGROUP_ROOT).join(rel));
                if n == 0 {
                    // Nothing left to park; staying frozen would only trap newcomers.
                    empty.push(rel.clone());
                    continue;
                }
                p.cpus = cpus;
            }
            let secs: f64 = if p.cpus.is_empty() { (0..idle.len()).map(idle_on).sum() } else { p.cpus.iter().map(|&c| idle_on(c)).sum() };
            if secs / dt.as_secs_f64() >= self.s.unpark_idle_cpus {
                p.idle_streak += dt;
            } else {
                p.idle_streak = Duration::ZERO;
            }
            if p.idle_streak >= self.s.unpark_after {
                thaw.push(rel.clone());
            }
        }
        if !empty.is_empty() {
            self.unpark(&empty, "no tasks left in it");
        }
        if !thaw.is_empty() {
            let why = format!("LC left >= {:.2} CPU idle where it may run for {} ms", self.s.unpark_idle_cpus, self.s.unpark_after.as_millis());
            self.unpark(&thaw, &why);
        }
    }

    /// Thaw the given parked cgroups. Those that could not be thawed stay
    /// in the state file for the next attempt (or the guardian, or the next
    /// start).
    fn unpark(&mut self, which: &[String], why: &str) {
        let mut done = false;
        for rel in which {
            let Some(p) = self.parked.remove(rel) else { continue };
            match write_freeze(rel, false) {
                Ok(_) => {
                    info!("unparked /{rel} after {:.1} s ({why})", p.since.elapsed().as_secs_f64());
                    self.unpark_events += 1;
                    done = true;
                }
                Err(e) => {
                    warn!("cannot unpark /{rel}: {e:#}");
                    self.parked.insert(rel.clone(), p);
                }
            }
        }
        if done {
            if let Err(e) = self.save() {
                warn!("{e:#}");
            }
        }
    }

    /// One parking step for a policy that knows its BE cgroups by the
    /// path rules alone (Akita, LLF): act on the cgroup ids the BPF side
    /// reported (take_reports()), then tick(). Reports are rare (one per
    /// starved cgroup per park_after window at most), so the tree is walked
    /// to name them only when there are some.
    pub fn step(&mut self, reported: &[u64], rules: &schedbe_cgroup::BeRules) {
        if !reported.is_empty() {
            let tree = schedbe_cgroup::walk(Path::new(CGROUP_ROOT)).unwrap_or_default();
            for cg in tree.iter().filter(|c| reported.contains(&c.id)) {
                let be = be_subtree(&cg.rel, |p| rules.matches(p));
                self.on_starved(&cg.rel, be);
            }
        }
        self.tick();
    }

    /// Is any cgroup parked (so idle capacity must be sampled)?
    pub fn any_parked(&self) -> bool {
        !self.parked.is_empty()
    }

    /// Thaw every parked cgroup.
    pub fn unpark_all(&mut self, why: &str) {
        let all: Vec<String> = self.parked.keys().cloned().collect();
        self.unpark(&all, why);
    }

    pub fn counts(&self) -> ParkCounts {
        let tasks = self.parked.keys().map(|rel| subtree_threads(&Path::new(CGROUP_ROOT).join(rel)).len() as u64).sum();
        ParkCounts {
            parked_cgroups: self.parked.len() as u64,
            parked_tasks: tasks,
            park_events: self.park_events,
            unpark_events: self.unpark_events,
        }
    }
}

impl Drop for Parker {
    fn drop(&mut self) {
        self.unpark_all("schedbe is exiting");
    }
}

/// The guardian: a small process that outlives the daemon and thaws what
/// the daemon left frozen when it dies without doing so (SIGKILL, abort).
/// It waits for EOF on a pipe whose only writer is the daemon; the kernel
/// closes it however the daemon exits. Start it before the BPF scheduler is
/// loaded, so it holds none of the scheduler's file descriptors.
pub fn spawn_guardian(state_file: &Path) -> Result<Child> {
    Command::new("/proc/self/exe")
        .arg("guard")
        .arg("--state-file")
        .arg(state_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .context("cannot start the parking guardian")
}

/// `schedbe guard` (internal): block until the daemon is gone, then thaw.
pub fn guardian_main(state_file: &Path) -> Result<()> {
    // Signals aimed at the daemon's process group (Ctrl-C, a service stop)
    // must not take the guardian down before the daemon has finished.
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: ignoring a signal has no preconditions.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    let mut buf = [0u8; 64];
    let mut stdin = std::io::stdin();
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let thawed = thaw_leftovers(state_file)?;
    if !thawed.is_empty() {
        eprintln!("schedbe guard: the daemon died with BE parked; thawed /{}", thawed.join(", /"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_share_of_one_cpu() {
        assert!((cpu_share(1_000_000, 1_500_000, Duration::from_secs(1)) - 0.5).abs() < 1e-12);
        assert!(cpu_share(0, 40_000, Duration::from_millis(1500)) < STARVED_SHARE); // 2.7%
        assert!(cpu_share(0, 60_000, Duration::from_millis(1500)) >= STARVED_SHARE); // 4%
        assert_eq!(cpu_share(5, 3, Duration::from_secs(1)), 0.0); // counter reset: no CPU
        assert!(cpu_share(0, 0, Duration::ZERO).is_infinite()); // no window: never starved
    }

    #[test]
    fn contains_is_ancestor_or_self() {
        assert!(contains("a/b", "a/b"));
        assert!(contains("a/b", "a/b/c"));
        assert!(!contains("a/b", "a/bc"));
        assert!(contains("", "x"));
    }

    #[test]
    fn state_roundtrip_and_removal() {
        let dir = std::env::temp_dir().join(format!("schedbe-park-test-{}", std::process::id()));
        let f = dir.join("sub/parked.json");
        store_state(&f, &["a/b".into(), "c".into()]).unwrap();
        let st = load_state(&f).unwrap().unwrap();
        assert_eq!(st.cgroups, vec!["a/b".to_string(), "c".to_string()]);
        store_state(&f, &[]).unwrap();
        assert!(load_state(&f).unwrap().is_none());
        // Thawing with no state file is a no-op.
        assert!(thaw_leftovers(&f).unwrap().is_empty());
        std::fs::write(&f, "{not json").unwrap();
        assert!(thaw_leftovers(&f).unwrap_err().to_string().contains("corrupt"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
