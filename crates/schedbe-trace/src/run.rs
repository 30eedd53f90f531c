//! One traced window: load and attach the BPF programs, snapshot, read the
//! ring buffer while replaying, and assemble the report.

use std::cell::{Cell, RefCell};
use std::io::Read;
use std::mem::MaybeUninit;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::RingBufferBuilder;
use schedbe_cgroup::{IdSet, CGROUP_ROOT};

use crate::args::{be_rules, validate, TraceArgs};
use crate::cgroups::{latency_us, CgroupWatch};
use crate::bpf::bpf_intf::TRACE_MASK_WORDS;
use crate::bpf::bpf_skel::TraceSkelBuilder;
use crate::bpf::{bump_memlock, comm_of, sync_be_cgroups, RINGBUF_BYTES};
use crate::decode::decode_event;
use crate::replay::{Event, EventKind, Replay, ReplayConfig};
use crate::report::{GraceRow, PerCpu, TaskRow, TimelineReport, TraceDiagnostics, TraceReport};
use crate::sys::{
    cgroup2_root, check_privileges, kallsyms_addr, kallsyms_has, monotonic_ns, nohz_full_cpus, parse_cpu_list, tick_ns,
};
use crate::timeline;

/// How often userspace drains the ring buffer.
const POLL_NS: u64 = 10_000_000;
/// How often the BE cgroup patterns are rescanned.
const RESCAN_NS: u64 = 100_000_000;
/// Events from different CPUs reach the ring buffer slightly out of
/// timestamp order (the gap between reading the clock and reserving the
/// record: nanoseconds to microseconds); hold them this long to sort them.
/// A CPU absence is reported at its end and sorted in at its start, so this
/// is also the longest absence counted whole (host stalls of a vCPU seen in
/// CI: up to ~40 ms). The replay holds this much of the trace in memory:
/// ~10 MB at a million events a second.
const REORDER_NS: u64 = 100_000_000;
/// Grace periods the report also gives the total inversion for: how much of
/// it comes from waits of a few hundred microseconds (the time a preemption
/// takes to land) and how much from long ones (a policy letting BE run).
pub const SENSITIVITY_GRACES_US: [u64; 5] = [0, 200, 500, 1000, 10_000];
/// Keep reading this long after the window closes.
const STOP_TAIL_NS: u64 = 2 * REORDER_NS;
/// The window opens at least this long after the snapshot completes.
const SNAPSHOT_MARGIN_NS: u64 = 1_000_000;

/// The tick length the BPF side judges CPU absence by (trace.bpf.c,
/// tr_tick); None, with a warning saying why, when it cannot be judged.
fn absence_tick_ns(warnings: &mut Vec<String>) -> Option<u64> {
    let why = if !kallsyms_has("sched_tick") {
        "sched_tick is not in /proc/kallsyms".to_string()
    } else if !nohz_full_cpus().is_empty() {
        "nohz_full CPUs stop their tick while busy".to_string()
    } else {
        match tick_ns() {
            Ok(t) => return Some(t),
            Err(e) => format!("{e:#}"),
        }
    };
    warnings.push(format!("CPU absence is not traced ({why}): absent_ns stays 0"));
    None
}

/// Load the tracer, record one window, replay it and return the report.
pub fn run(args: &TraceArgs) -> Result<TraceReport> {
    let checked = validate(args)?;
    // --cgroup paths are checked (and their subtrees walked) first of all
    let cg_root = cgroup2_root();
    let mut watch = CgroupWatch::new(&checked.cgroups, cg_root.as_deref())?;
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

    // sleep timers' lateness, for the --cgroup tasks only (raw tracepoint, see trace.bpf.c)
    let hrtimer_wakeup = if watch.is_some() { kallsyms_addr("hrtimer_wakeup") } else { None };
    if watch.is_some() && hrtimer_wakeup.is_none() {
        warnings.push("hrtimer_wakeup is not in /proc/kallsyms (or its address is hidden): no timer_latency".into());
    }

    let absence_tick = absence_tick_ns(&mut warnings);

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
        ro.record_comm = args.per_task || args.timeline.is_some();
        ro.record_cgroup = watch.is_some();
        ro.hrtimer_wakeup_fn = hrtimer_wakeup.unwrap_or(0);
        ro.tick_ns = absence_tick.unwrap_or(0);
    }
    if absence_tick.is_none() {
        open.progs.tr_tick.set_autoload(false);
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
    if hrtimer_wakeup.is_some() {
        links.push(
            skel.progs
                .tr_timer
                .attach()
                .context("attaching to the hrtimer_expire_entry tracepoint failed")?,
        );
    }
    if absence_tick.is_some() {
        links.push(skel.progs.tr_tick.attach().context("attaching to sched_tick (fentry) failed")?);
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
    // the timeline's part of the window, in CLOCK_MONOTONIC ns
    let timeline_range = args.timeline.as_ref().map(|_| {
        checked.timeline_window.map_or((window_start, window_end), |(a, b)| {
            (window_start + a, window_start + b)
        })
    });
    let mut replay = Replay::new(ReplayConfig {
        nr_cpus: nr_possible,
        online: online.clone(),
        grace_ns,
        extra_graces_ns: SENSITIVITY_GRACES_US.iter().map(|us| us * 1000).collect(),
        window_start,
        window_end,
        trace_start,
        reorder_ns: REORDER_NS,
        per_task: args.per_task,
        nr_cgroups: watch.as_ref().map_or(0, |w| w.targets.len()),
        requests: watch.as_ref().map(|w| w.requests()).unwrap_or_default(),
        timeline: timeline_range,
        period_ns: checked.period_ns,
        budgets: watch.as_ref().map(|w| w.budgets(&checked.budgets)).unwrap_or_default(),
    });
    if let Some(w) = &watch {
        for (id, set) in w.mapped() {
            replay.map_cgroup(id, set);
        }
    }
    let mut nr_events = 0u64;
    let mut drain = |replay: &mut Replay| -> Result<()> {
        rb.consume().context("reading the BPF ring buffer failed")?;
        let evs = std::mem::take(&mut *pending.borrow_mut());
        nr_events += evs.len() as u64;
        // map new cgroup ids before their events reach the replay
        if let Some(w) = watch.as_mut() {
            for (id, set) in w.resolve(evs.iter().filter_map(Event::cgroup), monotonic_ns()) {
                replay.map_cgroup(id, set);
            }
        }
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

    let mut res = replay.finish();
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
    if res.diag.absences_cut > 0 {
        warnings.push(format!(
            "{} CPU absences began more than the {} ms reorder window before they ended: counted from its start only",
            res.diag.absences_cut,
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
    if let Some(w) = watch.as_ref().filter(|w| w.walk_errors > 0) {
        let gone: Vec<&str> = w.targets.iter().filter(|t| t.gone).map(|t| t.key.as_str()).collect();
        if !gone.is_empty() {
            warnings.push(format!(
                "--cgroup {} removed during the trace: figures up to its removal",
                gone.join(", ")
            ));
        }
        let failed = w.walk_errors - gone.len() as u64;
        if failed > 0 {
            warnings.push(format!(
                "{failed} walks of the --cgroup directory trees failed: tasks of cgroups created meanwhile may be missing"
            ));
        }
    }
    let nr_requests = watch
        .as_ref()
        .map_or(0, |w| w.targets.iter().filter(|t| t.request_milli.is_some()).count());
    if nr_requests == 1 {
        warnings.push(
            "only one --cgroup has a CPU request (PATH=REQ): its reservation inversion needs another one above its request, so it is 0".into(),
        );
    }
    if res.cgroups.iter().any(|c| c.periods.as_ref().is_some_and(|p| p.is_empty())) {
        warnings.push(
            "--period-ms: no whole period [k*T, (k+1)*T) of the clock lies in the window: the per-period series are empty".into(),
        );
    }
    if checked.budgets.len() == 1 {
        warnings.push(
            "only one --cgroup has a --budget: its over-budget inversion needs another budgeted cgroup waiting, so it is 0".into(),
        );
    }
    let targets = watch.as_ref().map(|w| &w.targets[..]).unwrap_or_default();
    for (t, b) in targets.iter().zip(&res.cgroups).filter_map(|(t, c)| Some((t, c.budget.as_ref()?))) {
        if b.periods == 0 {
            warnings.push(format!(
                "--budget {}: no whole period of {} ms lies in the window: its periods, periods_over, max_period_ms and over_budget_ms are 0",
                t.key,
                b.period_ns as f64 / 1e6
            ));
        }
    }
    let timeline = match (&args.timeline, timeline_range) {
        (Some(path), Some((from, to))) => {
            let segments = std::mem::take(&mut res.segments);
            let labels = watch.as_ref().map(|w| w.labels()).unwrap_or_default();
            let mut comm = |pid| comm_of(&skel.maps.comms, pid);
            let n = timeline::write_file(path, &segments, window_start, &labels, &mut comm)?;
            Some(TimelineReport {
                path: path.clone(),
                segments: n,
                start_s: (from - window_start) as f64 / 1e9,
                end_s: (to - window_start) as f64 / 1e9,
            })
        }
        _ => None,
    };
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
                wakeup_latency: latency_us(&ts.wakeup_latency),
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
        period_ns: checked.period_ns,
        absence_tick_ns: absence_tick,
        cgroups: watch.as_ref().map(|w| w.report(&res.cgroups)).unwrap_or_default(),
        timeline,
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
            cgroup_walks: watch.as_ref().map_or(0, |w| w.walks),
            cgroup_walk_errors: watch.as_ref().map_or(0, |w| w.walk_errors),
        },
        warnings,
    })
}
