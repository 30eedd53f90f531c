//! `schedbe trace`: the independent LC/BE inversion tracer.
//!
//! A separate BPF program on the core scheduler tracepoints (sched_switch,
//! sched_waking, sched_wakeup, sched_wakeup_new, sched_migrate_task) records
//! who runs where and who becomes runnable; it never reads a scheduler's own
//! state, so it measures schedbe, EEVDF or any other scheduler alike. Tasks
//! are classified LC/BE with the shared rules of `schedbe-cgroup` (this
//! tracer keeps its own `be_cgroups` map, rescanned every 100 ms), plus
//! "other" (SCHED_FIFO/RR/DEADLINE, above both tiers) and idle.
//!
//! Over a window it reports, per CPU and in total: inversion time (running BE
//! while an LC task allowed on that CPU has waited more than the grace
//! period), idle-while-LC-waits time, LC wait time, and per-tier CPU time. See
//! [`replay`] for the exact definitions.
//!
//! Start-up: tracing starts, then a BPF task iterator snapshots which task is
//! current on each CPU and which tasks are already queued (they count as
//! waiting since tracing started). The window opens once the snapshot is
//! complete and at least one grace period after tracing started, so a task
//! already waiting before tracing started is classified exactly as if it had
//! been seen (its true wait is at least as long). The window closes
//! `duration` later; events are read for a further 20 ms so that every event
//! of the window has been read. The tracer's own process is an ordinary LC
//! task; it wakes every 10 ms to drain the ring buffer and adds no wakeups
//! per event.
//!
//! Limits, all reported rather than hidden:
//! * a full ring buffer drops records: `dropped_events` and a warning say so
//!   (32 MiB drained every 10 ms: not seen even at ~50k events/s);
//! * allowed-CPU masks cover CPUs 0-1023; higher CPUs count as allowed;
//! * a task's tier is taken when it starts running or waiting; a cgroup move
//!   or policy change of a running task shows from its next switch;
//! * cgroup v2 is looked for at /sys/fs/cgroup, then in /proc/self/mounts
//!   (hybrid hosts mount it at /sys/fs/cgroup/unified); BE patterns are
//!   matched in the v2 hierarchy, which is what the BPF side reads;
//! * CPU time is per CPU occupancy (IRQ/softirq time is charged to whatever
//!   task or idle was current); a cpu.max-throttled LC task counts as waiting;
//! * if the kernel leaves some scheduler events untraced (seen on the
//!   development host for its init process's threads), the affected
//!   interval is charged to the last known occupant and
//!   `diagnostics.inconsistent_switches` counts it.

use std::cell::{Cell, RefCell};
use std::io::Read;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapMut, RingBufferBuilder};
use schedbe_cgroup::{BeRules, IdSet, CGROUP_ROOT};
use serde::{Deserialize, Serialize};

pub mod replay;

pub use replay::{CpuMask, CpuStats, Diagnostics, Event, EventKind, Tier, WaitSummary, Wake};
use replay::{Replay, ReplayConfig};

#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
mod bpf_intf {
    include!(concat!(env!("OUT_DIR"), "/trace_intf.rs"));
}

#[allow(clippy::all)]
mod bpf_skel {
    include!(concat!(env!("OUT_DIR"), "/trace_skel.rs"));
}

use bpf_intf::*;
use bpf_skel::TraceSkelBuilder;

// Upper-case aliases of the bindgen constants, usable as match patterns.
const TEV_SWITCH: u32 = sbt_event_type_TEV_SWITCH;
const TEV_WAKING: u32 = sbt_event_type_TEV_WAKING;
const TEV_WAKEUP: u32 = sbt_event_type_TEV_WAKEUP;
const TEV_WAKEUP_NEW: u32 = sbt_event_type_TEV_WAKEUP_NEW;
const TEV_MIGRATE: u32 = sbt_event_type_TEV_MIGRATE;
const TEV_INIT_CURR: u32 = sbt_event_type_TEV_INIT_CURR;
const TEV_INIT_RUNNABLE: u32 = sbt_event_type_TEV_INIT_RUNNABLE;
const TT_LC: u32 = sbt_tier_TT_LC;
const TT_BE: u32 = sbt_tier_TT_BE;
const TT_OTHER: u32 = sbt_tier_TT_OTHER;
const TT_IDLE: u32 = sbt_tier_TT_IDLE;

/// Ring buffer between the BPF programs and userspace. Read every
/// [`POLL_NS`]; 32 MiB holds ~800k switch events, far more than a 10 ms
/// burst produces even on large machines.
const RINGBUF_BYTES: u32 = 32 << 20;
/// How often userspace drains the ring buffer.
const POLL_NS: u64 = 10_000_000;
/// How often the BE cgroup patterns are rescanned.
const RESCAN_NS: u64 = 100_000_000;
/// Events from different CPUs reach the ring buffer slightly out of
/// timestamp order (the gap between reading the clock and reserving the
/// record: nanoseconds to microseconds); hold them this long to sort them.
const REORDER_NS: u64 = 10_000_000;
/// Grace periods the report also gives the total inversion for: how much of
/// it comes from waits of a few hundred microseconds (the time a preemption
/// takes to land) and how much from long ones (a policy letting BE run).
pub const SENSITIVITY_GRACES_US: [u64; 5] = [0, 200, 500, 1000, 10_000];
/// Keep reading this long after the window closes.
const STOP_TAIL_NS: u64 = 2 * REORDER_NS;
/// The window opens at least this long after the snapshot completes.
const SNAPSHOT_MARGIN_NS: u64 = 1_000_000;

#[derive(clap::Args, Debug, Clone)]
pub struct TraceArgs {
    /// Window length in seconds (fractional allowed)
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Grace period in microseconds
    #[arg(long, default_value_t = 50)]
    pub grace_us: u64,
    /// Extra BE cgroup path patterns (globs relative to /sys/fs/cgroup); defaults (kubelet BestEffort) are always included unless --no-default-be-cgroups
    #[arg(long = "be-cgroup")]
    pub be_cgroups: Vec<String>,
    /// Do not treat the kubelet BestEffort cgroups as BE
    #[arg(long)]
    pub no_default_be_cgroups: bool,
    /// Write the JSON report here instead of stdout
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Include a per-task table (pid, comm, tier, run_ns, wait_ns) in the report
    #[arg(long)]
    pub per_task: bool,
    /// Load and attach everything now, but start tracing only at this
    /// CLOCK_MONOTONIC time (ns): the costly start-up (BPF load, under
    /// emulation seconds of CPU) then happens before the window, not in it.
    /// Used by `schedbe bench`.
    #[arg(long, hide = true)]
    pub start_at_ns: Option<u64>,
}

impl Default for TraceArgs {
    fn default() -> Self {
        TraceArgs {
            duration: 10.0,
            grace_us: 50,
            be_cgroups: Vec::new(),
            no_default_be_cgroups: false,
            output: None,
            per_task: false,
            start_at_ns: None,
        }
    }
}

/// One CPU's figures in the report.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PerCpu {
    pub cpu: u32,
    #[serde(flatten)]
    pub stats: CpuStats,
}

/// Total inversion had the grace period been `grace_us`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct GraceRow {
    pub grace_us: u64,
    pub inversion_ns: u64,
    pub inversion_frac: f64,
}

/// One task in the per-task table (`--per-task`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct TaskRow {
    pub pid: u32,
    pub comm: String,
    /// "lc", "be", "other" or "unknown" (last classification seen).
    pub tier: String,
    pub run_ns: u64,
    pub wait_ns: u64,
    /// BE CPU time charged to this task as the longest waiting LC task (see
    /// `CpuStats::inversion_ns`).
    #[serde(default)]
    pub inversion_ns: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct TraceDiagnostics {
    #[serde(flatten)]
    pub replay: Diagnostics,
    /// Ring buffer records too short or of an unknown type.
    pub undecodable_records: u64,
    /// BE cgroup rescans that failed during the window.
    pub cgroup_scan_errors: u64,
}

/// The JSON report of `schedbe trace`. Times in nanoseconds unless the name
/// says otherwise; `*_frac` are fractions of `totals.cpu_ns`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct TraceReport {
    /// Length of the measurement window.
    pub duration_ns: u64,
    pub grace_ns: u64,
    /// Online CPUs.
    pub nr_cpus: usize,
    /// Records read from the ring buffer (whole trace, warm-up included).
    pub events: u64,
    /// Records the BPF side could not write (ring buffer full). Non-zero means
    /// the figures are unreliable; `warnings` says so too.
    pub dropped_events: u64,
    pub totals: CpuStats,
    pub inversion_frac: f64,
    pub idle_while_lc_waits_frac: f64,
    /// The total inversion for other grace periods (SENSITIVITY_GRACES_US).
    #[serde(default)]
    pub inversion_by_grace: Vec<GraceRow>,
    pub per_cpu: Vec<PerCpu>,
    /// Completed LC waits (runnable -> switched in) that ended in the window.
    pub lc_wait_us: WaitSummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<TaskRow>>,
    /// LC tasks still waiting when the window closed (their time is in lc_wait_ns).
    pub lc_waits_open_at_end: u64,
    /// The window, in CLOCK_MONOTONIC nanoseconds.
    pub window_start_ns: u64,
    pub window_end_ns: u64,
    pub be_cgroup_patterns: Vec<String>,
    /// The cgroup v2 mount the patterns were matched under (null: none).
    pub be_cgroup_root: Option<PathBuf>,
    /// cgroups matching the patterns at the last scan.
    pub be_cgroups_matched: usize,
    pub diagnostics: TraceDiagnostics,
    pub warnings: Vec<String>,
}

impl TraceReport {
    /// One-line human summary.
    pub fn verdict(&self) -> String {
        let t = &self.totals;
        let pct = |x: u64| {
            if t.cpu_ns > 0 {
                100.0 * x as f64 / t.cpu_ns as f64
            } else {
                0.0
            }
        };
        let mut s = format!(
            "schedbe trace: {:.2} s x {} CPUs: inversion {:.4}% of CPU time ({:.3} ms, {:.0}% with the waiter queued on another CPU), \
             idle while LC waits {:.4}% ({:.3} ms); LC waits {} (mean {:.1} us, p99 {:.1} us, max {:.1} us); \
             CPU: LC {:.1}%, BE {:.1}%, other {:.1}%, idle {:.1}%",
            self.duration_ns as f64 / 1e9,
            self.nr_cpus,
            100.0 * self.inversion_frac,
            t.inversion_ns as f64 / 1e6,
            if t.inversion_ns > 0 { 100.0 * t.inversion_elsewhere_ns as f64 / t.inversion_ns as f64 } else { 0.0 },
            100.0 * self.idle_while_lc_waits_frac,
            t.idle_while_lc_waits_ns as f64 / 1e6,
            self.lc_wait_us.count,
            self.lc_wait_us.mean,
            self.lc_wait_us.p99,
            self.lc_wait_us.max,
            pct(t.lc_ns),
            pct(t.be_ns),
            pct(t.other_ns),
            pct(t.idle_ns),
        );
        if self.dropped_events > 0 {
            s.push_str(&format!(
                " [UNRELIABLE: {} events dropped]",
                self.dropped_events
            ));
        }
        s
    }
}

/// Decode one ring buffer record.
pub fn decode_event(data: &[u8]) -> Option<Event> {
    use std::mem::offset_of;
    const HDR: usize = TRACE_EVENT_HDR_SIZE as usize;
    if data.len() < HDR {
        return None;
    }
    let u32_at = |o: usize| u32::from_ne_bytes(data[o..o + 4].try_into().expect("4 bytes"));
    let ts = u64::from_ne_bytes(data[offset_of!(sbt_event, ts)..][..8].try_into().ok()?);
    let cpu = u32_at(offset_of!(sbt_event, cpu));
    let pid = u32_at(offset_of!(sbt_event, pid));
    let prev_pid = u32_at(offset_of!(sbt_event, prev_pid));
    let typ = data[offset_of!(sbt_event, type_)] as u32;
    let tier = tier_from_raw(data[offset_of!(sbt_event, tier)]);
    let prev_tier = tier_from_raw(data[offset_of!(sbt_event, prev_tier)]);
    let flags = data[offset_of!(sbt_event, flags)] as u32;
    let nr_words = (u32_at(offset_of!(sbt_event, nr_words)) as usize)
        .min(TRACE_MASK_WORDS as usize)
        .min((data.len() - HDR) / 8);
    let words: Vec<u64> = (0..nr_words)
        .map(|i| {
            u64::from_ne_bytes(
                data[HDR + 8 * i..HDR + 8 * i + 8]
                    .try_into()
                    .expect("8 bytes"),
            )
        })
        .collect();
    let mask = CpuMask::from_words(&words);
    let aux = u32_at(offset_of!(sbt_event, aux));
    let lc_or = |t: Option<Tier>| t.unwrap_or(Tier::Lc);
    let wake = || Wake {
        pid,
        tier: lc_or(tier),
        mask: mask.clone(),
        task_cpu: aux,
    };
    let kind = match typ {
        TEV_SWITCH => EventKind::Switch {
            prev: prev_pid,
            prev_runnable: flags & sbt_event_flags_TEVF_PREV_RUNNABLE != 0,
            prev_dead: flags & sbt_event_flags_TEVF_PREV_DEAD != 0,
            prev_tier,
            prev_mask: (nr_words > 0).then(|| mask.clone()),
            next: pid,
            next_tier: if pid == 0 { Tier::Idle } else { lc_or(tier) },
        },
        TEV_WAKING => EventKind::Waking(wake()),
        TEV_WAKEUP => EventKind::Wakeup { pid, task_cpu: aux },
        TEV_WAKEUP_NEW => EventKind::WakeupNew(wake()),
        TEV_MIGRATE => EventKind::Migrate {
            pid,
            dest: aux,
            mask: mask.clone(),
        },
        TEV_INIT_CURR => EventKind::InitCurr {
            pid,
            tier: lc_or(tier),
            on_cpu: aux,
        },
        TEV_INIT_RUNNABLE => EventKind::InitRunnable(wake()),
        _ => return None,
    };
    Some(Event { ts, cpu, kind })
}

fn tier_from_raw(v: u8) -> Option<Tier> {
    match v as u32 {
        TT_LC => Some(Tier::Lc),
        TT_BE => Some(Tier::Be),
        TT_OTHER => Some(Tier::Other),
        TT_IDLE => Some(Tier::Idle),
        _ => None,
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock bpf_ktime_get_ns() reads.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Parse a kernel CPU list ("0-3,5,7-8").
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let a: u32 = a
            .trim()
            .parse()
            .with_context(|| format!("bad CPU list {s:?}"))?;
        let b: u32 = b
            .trim()
            .parse()
            .with_context(|| format!("bad CPU list {s:?}"))?;
        if b < a {
            bail!("bad CPU list {s:?}");
        }
        out.extend(a..=b);
    }
    Ok(out)
}

fn check_privileges() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    // Not root: accept CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN) in the effective set.
    let caps = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0);
    const CAP_SYS_ADMIN: u64 = 21;
    const CAP_PERFMON: u64 = 38;
    const CAP_BPF: u64 = 39;
    let has = |c: u64| caps & (1 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    bail!("schedbe trace needs root (CAP_BPF/CAP_PERFMON)")
}

fn be_rules(args: &TraceArgs) -> Result<BeRules> {
    let mut pats: Vec<String> = Vec::new();
    if !args.no_default_be_cgroups {
        pats.extend(
            schedbe_cgroup::DEFAULT_BE_PATTERNS
                .iter()
                .map(|s| s.to_string()),
        );
    }
    pats.extend(args.be_cgroups.iter().cloned());
    BeRules::new(&pats).context("invalid --be-cgroup pattern")
}

fn validate(args: &TraceArgs) -> Result<()> {
    if !(args.duration.is_finite() && args.duration > 0.0 && args.duration <= 86_400.0) {
        bail!(
            "--duration must be a positive number of seconds (at most 86400), got {}",
            args.duration
        );
    }
    if args.duration * 1e9 < 1.0 {
        bail!("--duration {} is shorter than a nanosecond", args.duration);
    }
    if args.grace_us > 10_000_000 {
        bail!(
            "--grace-us must be at most 10000000 (10 s), got {}",
            args.grace_us
        );
    }
    if let Some(out) = &args.output {
        let dir = out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !dir.is_dir() {
            bail!(
                "--output {}: directory {} does not exist",
                out.display(),
                dir.display()
            );
        }
    }
    Ok(())
}

/// Bring the tracer's be_cgroups map in line with a fresh scan. Returns the
/// number of matching cgroups, which the caller stores in the BPF side's
/// `nr_be_cgroups` (0 lets it skip the cgroup walk).
fn sync_be_cgroups(map: &MapMut, root: &Path, rules: &BeRules, ids: &mut IdSet) -> Result<usize> {
    let cgs = schedbe_cgroup::scan(root, rules)?;
    let (add, del) = ids.update(cgs.iter().map(|c| c.id));
    for id in add {
        map.update(&id.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .with_context(|| format!("cannot add cgroup {id} to be_cgroups"))?;
    }
    for id in del {
        // already gone is fine
        let _ = map.delete(&id.to_ne_bytes());
    }
    Ok(ids.len())
}

/// Where the cgroup v2 hierarchy is mounted: [`CGROUP_ROOT`] on unified
/// hosts, elsewhere (e.g. /sys/fs/cgroup/unified) on hybrid v1/v2 hosts. The
/// BPF side matches the task's v2 cgroup (cgroups->dfl_cgrp), so patterns
/// must be resolved in that hierarchy.
pub fn cgroup2_root() -> Option<PathBuf> {
    if schedbe_cgroup::cgroup2_mounted() {
        return Some(PathBuf::from(CGROUP_ROOT));
    }
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    cgroup2_mount_in(&mounts)
}

fn cgroup2_mount_in(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 3 && f[2] == "cgroup2").then(|| PathBuf::from(unescape_mount(f[1])))
    })
}

/// /proc/mounts escapes space, tab, newline and backslash as \ooo.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push(((b[i + 1] - b'0') << 6) | ((b[i + 2] - b'0') << 3) | (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn bump_memlock() {
    let r = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: valid rlimit pointer. Failure is fine: kernels >= 5.11 charge BPF
    // memory to the cgroup instead.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &r) };
}

fn comm_of(map: &MapMut, pid: u32) -> String {
    if let Ok(Some(v)) = map.lookup(&pid.to_ne_bytes(), MapFlags::ANY) {
        let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
        if end > 0 {
            return String::from_utf8_lossy(&v[..end]).into_owned();
        }
    }
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}

/// Load the tracer, record one window, replay it and return the report.
pub fn run(args: &TraceArgs) -> Result<TraceReport> {
    validate(args)?;
    check_privileges()?;
    let rules = be_rules(args)?;
    let grace_ns = args.grace_us * 1000;
    let duration_ns = (args.duration * 1e9).round() as u64;
    let mut warnings = Vec::new();

    let nr_possible = libbpf_rs::num_possible_cpus().context("cannot count the possible CPUs")?;
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map_err(anyhow::Error::from)
        .and_then(|s| parse_cpu_list(&s))
        .unwrap_or_else(|_| (0..nr_possible as u32).collect());
    let max_cpus = 64 * TRACE_MASK_WORDS as usize;
    if nr_possible > max_cpus {
        warnings.push(format!(
            "{nr_possible} possible CPUs: affinity masks cover CPUs 0-{}; higher CPUs count as allowed for every task",
            max_cpus - 1
        ));
    }
    let mask_words = nr_possible.div_ceil(64).clamp(1, TRACE_MASK_WORDS as usize) as u32;

    bump_memlock();
    let mut storage = MaybeUninit::uninit();
    let mut open = TraceSkelBuilder::default()
        .open(&mut storage)
        .context("opening the tracer's BPF object failed")?;
    {
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("the tracer's BPF rodata is not mapped")?;
        ro.mask_words = mask_words;
        ro.record_comm = args.per_task;
    }
    open.maps
        .events
        .set_max_entries(RINGBUF_BYTES)
        .context("cannot size the BPF ring buffer")?;
    let mut skel = open.load().context(
        "loading the tracer's BPF programs failed (needs a kernel with BTF, tp_btf, BPF ring buffers and task iterators)",
    )?;

    // BE cgroups, before anything is traced.
    let mut ids = IdSet::default();
    let cg_root = cgroup2_root();
    let mut be_matched = 0;
    match &cg_root {
        Some(root) => {
            if root != Path::new(CGROUP_ROOT) {
                warnings.push(format!(
                    "cgroup v2 is mounted at {} (hybrid layout), not {CGROUP_ROOT}: BE cgroup patterns are matched relative to it",
                    root.display()
                ));
            }
            be_matched = sync_be_cgroups(&skel.maps.be_cgroups, root, &rules, &mut ids)
                .with_context(|| format!("scanning the BE cgroups under {} failed", root.display()))?;
        }
        None => warnings.push(
            "cgroup v2 is not mounted: BE cgroup patterns are not applied (SCHED_IDLE and cpu.idle still are)".into(),
        ),
    }

    let mut links = Vec::new();
    for (tp, prog) in [
        ("sched_switch", &skel.progs.tr_switch),
        ("sched_waking", &skel.progs.tr_waking),
        ("sched_wakeup", &skel.progs.tr_wakeup),
        ("sched_wakeup_new", &skel.progs.tr_wakeup_new),
        ("sched_migrate_task", &skel.progs.tr_migrate),
    ] {
        links.push(
            prog.attach()
                .with_context(|| format!("attaching to the {tp} tracepoint failed"))?,
        );
    }

    let pending: Rc<RefCell<Vec<Event>>> = Rc::default();
    let undecodable = Rc::new(Cell::new(0u64));
    let mut rbb = RingBufferBuilder::new();
    {
        let pending = pending.clone();
        let undecodable = undecodable.clone();
        rbb.add(&skel.maps.events, move |data: &[u8]| {
            match decode_event(data) {
                Some(ev) => pending.borrow_mut().push(ev),
                None => undecodable.set(undecodable.get() + 1),
            }
            0
        })
        .context("cannot set up the ring buffer reader")?;
    }
    let rb = rbb
        .build()
        .context("cannot set up the ring buffer reader")?;
    let bss = skel
        .maps
        .bss_data
        .as_deref_mut()
        .context("the tracer's BPF bss is not mapped")?;
    // SAFETY (all volatile accesses to bss below): bss is the mmapped .bss of
    // the loaded object, read by the BPF programs concurrently.
    unsafe { std::ptr::write_volatile(&mut bss.nr_be_cgroups, be_matched as u32) };

    // Wait (programs attached but off) until the requested start.
    if let Some(at) = args.start_at_ns {
        while monotonic_ns() < at {
            std::thread::sleep(Duration::from_nanos((at - monotonic_ns().min(at)).min(POLL_NS)));
        }
    }
    // Start all programs at once, then snapshot the current state.
    let trace_start = monotonic_ns();
    unsafe { std::ptr::write_volatile(&mut bss.tracing_on, 1) };
    {
        let link = skel
            .progs
            .tr_snapshot
            .attach()
            .context("attaching the task snapshot iterator failed")?;
        let mut it =
            libbpf_rs::Iter::new(&link).context("creating the task snapshot iterator failed")?;
        let mut sink = Vec::new();
        it.read_to_end(&mut sink)
            .context("running the task snapshot failed")?;
    }
    let snap_done = monotonic_ns();
    let window_start = (snap_done + SNAPSHOT_MARGIN_NS).max(trace_start + grace_ns);
    let window_end = window_start + duration_ns;
    let mut replay = Replay::new(ReplayConfig {
        nr_cpus: nr_possible,
        online: online.clone(),
        grace_ns,
        extra_graces_ns: SENSITIVITY_GRACES_US.iter().map(|us| us * 1000).collect(),
        window_start,
        window_end,
        trace_start,
        reorder_ns: REORDER_NS,
        keep_exited: args.per_task,
    });
    let mut nr_events = 0u64;
    let mut drain = |replay: &mut Replay| -> Result<()> {
        rb.consume().context("reading the BPF ring buffer failed")?;
        let evs = std::mem::take(&mut *pending.borrow_mut());
        nr_events += evs.len() as u64;
        for ev in evs {
            replay.push(ev);
        }
        Ok(())
    };
    // Before anything is drained: draining may already release events more
    // than the reorder window past snap_done (slow or emulated machines).
    replay.push(Event {
        ts: snap_done,
        cpu: 0,
        kind: EventKind::InitDone,
    });
    drain(&mut replay)?;

    let stop_at = window_end + STOP_TAIL_NS;
    let mut next_scan = monotonic_ns() + RESCAN_NS;
    let mut scan_errors = 0u64;
    loop {
        let now = monotonic_ns();
        if now >= stop_at {
            break;
        }
        std::thread::sleep(Duration::from_nanos(POLL_NS.min(stop_at - now)));
        drain(&mut replay)?;
        if let (Some(root), true) = (&cg_root, monotonic_ns() >= next_scan) {
            match sync_be_cgroups(&skel.maps.be_cgroups, root, &rules, &mut ids) {
                Ok(n) => {
                    be_matched = n;
                    unsafe { std::ptr::write_volatile(&mut bss.nr_be_cgroups, n as u32) };
                }
                Err(e) => {
                    scan_errors += 1;
                    log::warn!("BE cgroup rescan failed: {e:#}");
                }
            }
            next_scan += RESCAN_NS;
        }
    }
    unsafe { std::ptr::write_volatile(&mut bss.tracing_on, 0) };
    drain(&mut replay)?;
    let dropped = unsafe { std::ptr::read_volatile(&bss.nr_dropped) };
    drop(links);

    let res = replay.finish();
    let t = res.totals;
    let frac = |x: u64| {
        if t.cpu_ns > 0 {
            x as f64 / t.cpu_ns as f64
        } else {
            0.0
        }
    };

    if dropped > 0 {
        warnings.push(format!(
            "{dropped} events were dropped (BPF ring buffer full): the figures are incomplete and unreliable"
        ));
    }
    if res.diag.late_events > 0 {
        warnings.push(format!(
            "{} events arrived later than the {} ms reorder window; figures around them may be off",
            res.diag.late_events,
            REORDER_NS / 1_000_000
        ));
    }
    let expected = duration_ns as u128 * online.len() as u128;
    if expected > 0 && (t.cpu_ns as u128) * 100 < expected * 99 {
        warnings.push(format!(
            "only {:.1}% of the window's CPU time was observed ({} of {} online CPUs reported time)",
            100.0 * t.cpu_ns as f64 / expected as f64,
            res.per_cpu.iter().filter(|(_, s)| s.cpu_ns > 0).count(),
            online.len()
        ));
    }
    if scan_errors > 0 {
        warnings.push(format!(
            "{scan_errors} BE cgroup rescans failed; classification may lag cgroup changes"
        ));
    }
    if undecodable.get() > 0 {
        warnings.push(format!(
            "{} ring buffer records could not be decoded",
            undecodable.get()
        ));
    }

    let tasks = args.per_task.then(|| {
        res.tasks
            .iter()
            .map(|ts| TaskRow {
                pid: ts.pid,
                comm: comm_of(&skel.maps.comms, ts.pid),
                tier: ts.tier.map(|t| t.as_str()).unwrap_or("unknown").to_string(),
                run_ns: ts.run_ns,
                wait_ns: ts.wait_ns,
                inversion_ns: ts.inversion_ns,
            })
            .collect()
    });

    Ok(TraceReport {
        duration_ns,
        grace_ns,
        nr_cpus: online.len(),
        events: nr_events,
        dropped_events: dropped,
        totals: t,
        inversion_frac: frac(t.inversion_ns),
        idle_while_lc_waits_frac: frac(t.idle_while_lc_waits_ns),
        inversion_by_grace: res
            .inversion_by_grace
            .iter()
            .map(|&(g, ns)| GraceRow {
                grace_us: g / 1000,
                inversion_ns: ns,
                inversion_frac: frac(ns),
            })
            .collect(),
        per_cpu: res
            .per_cpu
            .iter()
            .map(|&(cpu, stats)| PerCpu { cpu, stats })
            .collect(),
        lc_wait_us: res.lc_wait,
        tasks,
        lc_waits_open_at_end: res.lc_waits_open_at_end,
        window_start_ns: window_start,
        window_end_ns: window_end,
        be_cgroup_patterns: rules.patterns(),
        be_cgroup_root: cg_root,
        be_cgroups_matched: be_matched,
        diagnostics: TraceDiagnostics {
            replay: res.diag,
            undecodable_records: undecodable.get(),
            cgroup_scan_errors: scan_errors,
        },
        warnings,
    })
}

/// `schedbe trace`: run, print the JSON report (pretty) to stdout or
/// `--output`, and a one-line verdict (plus warnings) on stderr.
pub fn cli_main(args: &TraceArgs) -> Result<()> {
    let report = run(args)?;
    let json = serde_json::to_string_pretty(&report).context("cannot serialise the report")?;
    match &args.output {
        Some(path) => std::fs::write(path, json + "\n")
            .with_context(|| format!("cannot write the report to {}", path.display()))?,
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            match writeln!(out, "{json}").and_then(|_| out.flush()) {
                // `schedbe trace | head`: the reader went away, not an error of ours
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                r => r.context("cannot write the report to stdout")?,
            }
        }
    }
    eprintln!("{}", report.verdict());
    for w in &report.warnings {
        eprintln!("schedbe trace: warning: {w}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(e: &sbt_event, words: usize) -> Vec<u8> {
        let len = TRACE_EVENT_HDR_SIZE as usize + 8 * words;
        // SAFETY: sbt_event is repr(C) plain data, len <= its size.
        unsafe { std::slice::from_raw_parts(e as *const sbt_event as *const u8, len) }.to_vec()
    }

    fn blank() -> sbt_event {
        sbt_event {
            ts: 0,
            cpu: 0,
            pid: 0,
            prev_pid: 0,
            type_: 0,
            tier: sbt_tier_TT_UNKNOWN as u8,
            prev_tier: sbt_tier_TT_UNKNOWN as u8,
            flags: 0,
            nr_words: 0,
            aux: 0,
            mask: [0; TRACE_MASK_WORDS as usize],
        }
    }

    #[test]
    fn decode_switch_and_wakes() {
        let mut e = blank();
        e.ts = 123;
        e.cpu = 1;
        e.type_ = sbt_event_type_TEV_SWITCH as u8;
        e.prev_pid = 10;
        e.pid = 20;
        e.tier = sbt_tier_TT_BE as u8;
        e.prev_tier = sbt_tier_TT_LC as u8;
        e.flags = sbt_event_flags_TEVF_PREV_RUNNABLE as u8;
        e.nr_words = 1;
        e.mask[0] = 0b101;
        let ev = decode_event(&raw(&e, 1)).unwrap();
        assert_eq!(ev.ts, 123);
        assert_eq!(ev.cpu, 1);
        assert_eq!(
            ev.kind,
            EventKind::Switch {
                prev: 10,
                prev_runnable: true,
                prev_dead: false,
                prev_tier: Some(Tier::Lc),
                prev_mask: Some(CpuMask::Word(0b101)),
                next: 20,
                next_tier: Tier::Be,
            }
        );
        // blocking switch to idle: no mask
        e.flags = 0;
        e.nr_words = 0;
        e.pid = 0;
        e.tier = sbt_tier_TT_IDLE as u8;
        match decode_event(&raw(&e, 0)).unwrap().kind {
            EventKind::Switch {
                prev_mask: None,
                next_tier: Tier::Idle,
                prev_runnable: false,
                ..
            } => {}
            k => panic!("{k:?}"),
        }
        // wide mask wakeup
        let mut w = blank();
        w.type_ = sbt_event_type_TEV_WAKING as u8;
        w.pid = 7;
        w.tier = sbt_tier_TT_OTHER as u8;
        w.nr_words = 2;
        w.mask[1] = 1;
        w.aux = 3;
        assert_eq!(
            decode_event(&raw(&w, 2)).unwrap().kind,
            EventKind::Waking(Wake {
                pid: 7,
                tier: Tier::Other,
                mask: CpuMask::Wide(vec![0, 1].into()),
                task_cpu: 3
            })
        );
        // truncated or unknown records are rejected, never panic
        assert!(decode_event(&raw(&w, 2)[..20]).is_none());
        w.type_ = 99;
        assert!(decode_event(&raw(&w, 2)).is_none());
        // nr_words larger than the record: clamped to what is there
        w.type_ = sbt_event_type_TEV_WAKEUP_NEW as u8;
        w.nr_words = 16;
        assert!(
            matches!(decode_event(&raw(&w, 2)).unwrap().kind, EventKind::WakeupNew(Wake { mask: CpuMask::Wide(m), .. }) if m.len() == 2)
        );
        w.type_ = sbt_event_type_TEV_WAKEUP as u8;
        assert_eq!(
            decode_event(&raw(&w, 0)).unwrap().kind,
            EventKind::Wakeup {
                pid: 7,
                task_cpu: 3
            }
        );
    }

    #[test]
    fn cgroup2_mount_discovery() {
        let hybrid =
            "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        assert_eq!(
            cgroup2_mount_in(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            cgroup2_mount_in("cgroup2 /a\\040b cgroup2 rw 0 0"),
            Some(PathBuf::from("/a b"))
        );
        assert_eq!(
            cgroup2_mount_in("cgroup /sys/fs/cgroup/cpu cgroup rw 0 0"),
            None
        );
        assert_eq!(unescape_mount("x\\134y\\"), "x\\y\\");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,5,7-8\n").unwrap(),
            vec![0, 1, 2, 3, 5, 7, 8]
        );
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }

    #[test]
    fn bad_args_are_rejected_before_anything_runs() {
        let mut a = TraceArgs {
            duration: f64::NAN,
            ..Default::default()
        };
        assert!(run(&a).unwrap_err().to_string().contains("--duration"));
        a.duration = -1.0;
        assert!(run(&a).is_err());
        a.duration = 1.0;
        a.grace_us = u64::MAX;
        assert!(run(&a).unwrap_err().to_string().contains("--grace-us"));
        a.grace_us = 50;
        a.output = Some("/nonexistent-dir/x.json".into());
        assert!(run(&a).unwrap_err().to_string().contains("does not exist"));
    }

    #[test]
    fn report_json_shape() {
        let r = TraceReport {
            duration_ns: 1,
            grace_ns: 50_000,
            nr_cpus: 1,
            events: 0,
            dropped_events: 0,
            totals: CpuStats::default(),
            inversion_frac: 0.0,
            idle_while_lc_waits_frac: 0.0,
            inversion_by_grace: vec![GraceRow { grace_us: 200, inversion_ns: 0, inversion_frac: 0.0 }],
            per_cpu: vec![PerCpu {
                cpu: 0,
                stats: CpuStats {
                    cpu_ns: 5,
                    ..Default::default()
                },
            }],
            lc_wait_us: WaitSummary::default(),
            tasks: None,
            lc_waits_open_at_end: 0,
            window_start_ns: 0,
            window_end_ns: 1,
            be_cgroup_patterns: vec![],
            be_cgroup_root: None,
            be_cgroups_matched: 0,
            diagnostics: TraceDiagnostics::default(),
            warnings: vec![],
        };
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        for k in [
            "duration_ns",
            "grace_ns",
            "nr_cpus",
            "events",
            "dropped_events",
            "totals",
            "inversion_frac",
            "idle_while_lc_waits_frac",
            "inversion_by_grace",
            "per_cpu",
            "lc_wait_us",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        for k in [
            "cpu_ns",
            "lc_ns",
            "be_ns",
            "idle_ns",
            "other_ns",
            "inversion_ns",
            "inversion_elsewhere_ns",
            "idle_while_lc_waits_ns",
            "lc_wait_ns",
            "lc_waits",
        ] {
            assert!(v["totals"].get(k).is_some(), "missing totals.{k}");
            assert!(v["per_cpu"][0].get(k).is_some(), "missing per_cpu.{k}");
        }
        assert_eq!(v["per_cpu"][0]["cpu"], 0);
        assert_eq!(v["per_cpu"][0]["cpu_ns"], 5);
        for k in ["count", "mean", "p50", "p99", "max"] {
            assert!(v["lc_wait_us"].get(k).is_some(), "missing lc_wait_us.{k}");
        }
        assert!(v.get("tasks").is_none(), "tasks only with --per-task");
        // round trip
        let back: TraceReport = serde_json::from_value(v).unwrap();
        assert_eq!(back.per_cpu, r.per_cpu);
    }
}
