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
//! With `--cgroup PATH` (repeatable; relative to the cgroup v2 mount, or
//! absolute under it) it also reports, per given cgroup, under `cgroups` in
//! the JSON keyed by PATH as given: `max_cpus`, the most CPUs that ran tasks
//! of that cgroup or of any descendant at the same instant (for a non-zero
//! time) in the window; `cpu_time_ms` of those tasks by tier; and
//! `time_at_cpus_ms[k]`, the time with exactly k CPUs running them. A task
//! counts with the cgroup it was in when switched in (the BPF side records
//! the cgroup v2 id of every task switched in, and of every running task in
//! the snapshot); ids are mapped to the given cgroups by walking their
//! directory trees (module `cgroups`). A path that is not a cgroup v2
//! directory is an error before anything is loaded.
//!
//! `--cgroup PATH=REQ` gives the cgroup's CPU request (CPUs, `2` or `1.5`,
//! or millicores, `1500m`). Between the cgroups given with a request it
//! reports the **reservation inversion**: `reservation_inversion_ms`, the
//! time during which the cgroup ran on fewer CPUs than its request while at
//! least one of its tasks was runnable but not running, and at the same
//! time another cgroup with a request ran on more CPUs than its own (running
//! counts as in `max_cpus`; below means `running < REQ`, above `running >
//! REQ`, so with 1.5 CPUs requested, 1 is below and 2 above; no grace period
//! applies to the wait). Also `reservation_inversion_longest_ms`, its
//! longest uninterrupted interval, and `reservation_inversion_by_ms`, the
//! part of it during which each other cgroup was above its request. A
//! waiting task counts with the cgroup it was last seen in (the BPF side
//! also records the cgroup of woken, new and snapshot-queued tasks under
//! `--cgroup`). A wait is any runnable-but-not-running time, whatever holds
//! the task back: a task held by its own cgroup's cpu.max quota counts as
//! waiting too (as it does for the LC wait figures).
//!
//! For every `--cgroup` it also reports `wakeup_latency` (`n`, `mean_us`,
//! `p50_us`, `p99_us`, `max_us`): for each wait of its tasks that began with
//! a wakeup (sched_waking, sched_wakeup_new; not a preempted task switched
//! out while still runnable, nor a task the snapshot found queued), the time
//! from becoming runnable to being next switched in; waits ending in the
//! window count whole, waits still open when it closes do not. A wait
//! counts with the cgroup the task was last seen in, as for the reservation
//! inversion.
//!
//! `--per-task` gives each task the same `wakeup_latency` in the per-task
//! table (`tasks`), quantiles to 2 significant figures there: which task
//! waited, where a cgroup would mix a timer thread with its CPU hogs.
//!
//! It also reports `timer_latency` per `--cgroup` (same fields): for every
//! sleep timer of its tasks (hrtimer_wakeup on CLOCK_MONOTONIC: nanosleep,
//! clock_nanosleep, poll and select timeouts) that fired in the window, how
//! late its callback ran after the timer's soft expiry (raw tracepoint
//! hrtimer_expire_entry, `bpf_ktime_get_ns()` minus `_softexpires`; needs
//! hrtimer_wakeup's address in /proc/kallsyms). A sleeper's latency as it
//! measures it (cyclictest's) is this plus `wakeup_latency` plus its own
//! return to user space; only `wakeup_latency` is the scheduler's.
//!
//! `--period-ms T` (with `--cgroup`) adds `periods` to each cgroup: one
//! `{start_ns, cpu_ms, wait_ms}` per period `[k*T, (k+1)*T)` of
//! CLOCK_MONOTONIC (the events' clock, bpf_ktime_get_ns; not relative to the
//! window's start) lying entirely in the window: the CPU time of its tasks
//! (as in `cpu_time_ms`) and the time they were runnable but not running
//! (summed over tasks, as the reservation inversion counts waits), each
//! clipped to the period. `period_ns` at the top gives T.
//!
//! `--budget PATH=C_MS/T_MS` (repeatable, once per PATH, each also given
//! with `--cgroup`) gives a cgroup a CPU budget of C ms per period of T ms
//! (periods `[k*T, (k+1)*T)` of CLOCK_MONOTONIC) and adds `budget` to it:
//! `budget_ms`, `period_ms`; over the periods entirely in the window
//! `periods`, `periods_over` (CPU time above C by more than the grace
//! period), `max_period_ms` and `over_budget_ms` (CPU time beyond C,
//! summed); and the **over-budget inversion**, the check of Akita's budgets:
//! `over_budget_while_waiting_ms`, the time the cgroup ran (on any number of
//! CPUs) with its CPU time in its current period at C or more while another
//! budgeted cgroup, still under its own budget, had a task waiting for a
//! CPU longer than `--grace-us`, summed over those other cgroups
//! (`over_budget_while_waiting_by`, non-zero entries), and `longest_ms`, its
//! longest uninterrupted interval. CPU time and waits are counted as for
//! `cpu_time_ms` and the reservation inversion; see `replay::budget`.
//!
//! `--timeline FILE` writes every run segment of the window (optionally of
//! `--timeline-window START_S:END_S`) as CSV (module `timeline`), for
//! scripts/plot-timeline.py. It turns on the comm recording of `--per-task`,
//! and the segments are kept in memory until the window closes (about 40
//! bytes each): limit long traces with `--timeline-window`.
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
//! * a task's tier (and, for `--cgroup`, its cgroup) is taken when it starts
//!   running or waiting; a cgroup move or policy change of a running task
//!   shows from its next switch;
//! * cgroup v2 is looked for at /sys/fs/cgroup, then in /proc/self/mounts
//!   (hybrid hosts mount it at /sys/fs/cgroup/unified); BE patterns are
//!   matched in the v2 hierarchy, which is what the BPF side reads;
//! * CPU time is per CPU occupancy (IRQ/softirq time is charged to whatever
//!   task or idle was current); a cpu.max-throttled LC task counts as waiting;
//! * if the kernel leaves some scheduler events untraced (seen on the
//!   development host for its init process's threads), the affected
//!   interval is charged to the last known occupant and
//!   `diagnostics.inconsistent_switches` counts it.
//!
//! Layout: `args` (the command line), `bpf` (the BPF object and its maps),
//! `decode` (ring buffer records to [`Event`]s), [`replay`] (events to
//! figures), `cgroups` (`--cgroup` paths and cgroup ids), `run` (one traced
//! window, start to finish), `report` (the JSON report and its summary),
//! `timeline` (the `--timeline` CSV), `sys` (host helpers: clocks, CPU
//! lists, the cgroup v2 mount).

use anyhow::{Context, Result};

mod args;
mod bpf;
mod cgroups;
mod decode;
pub mod replay;
mod report;
mod run;
mod sys;
mod timeline;

pub use args::TraceArgs;
pub use decode::decode_event;
pub use replay::{CpuMask, CpuStats, Diagnostics, Event, EventKind, Tier, WaitSummary, Wake};
pub use report::{
    BudgetReport, CgroupCpuTime, CgroupReport, GraceRow, PerCpu, PeriodRow, TaskRow, TimelineReport,
    TraceDiagnostics, TraceReport, LatencyUs,
};
pub use run::{run, SENSITIVITY_GRACES_US};
pub use sys::{cgroup2_root, monotonic_ns, parse_cpu_list};

/// `schedbe trace`: run, print the JSON report (pretty) to stdout or
/// `--output`, and a one-line verdict (plus one line per `--cgroup`, and
/// warnings) on stderr.
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
    for l in report.cgroup_lines() {
        eprintln!("schedbe trace: {l}");
    }
    if let Some(t) = &report.timeline {
        eprintln!(
            "schedbe trace: timeline: {} run segments ({:.3} s to {:.3} s of the window) written to {}",
            t.segments,
            t.start_s,
            t.end_s,
            t.path.display()
        );
    }
    for w in &report.warnings {
        eprintln!("schedbe trace: warning: {w}");
    }
    Ok(())
}
