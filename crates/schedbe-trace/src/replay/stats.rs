//! The replay's output: time accounting per CPU and per task, wait
//! distribution, diagnostics.

use serde::{Deserialize, Serialize};

use super::timeline::Segment;
use super::Pid;
use super::Tier;

/// Time accounting of one CPU (or all CPUs), in nanoseconds, within the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuStats {
    /// Time this CPU was observed (sum of the four tiers).
    pub cpu_ns: u64,
    pub lc_ns: u64,
    pub be_ns: u64,
    pub idle_ns: u64,
    pub other_ns: u64,
    /// Running BE while an LC task allowed here had waited more than the grace period.
    pub inversion_ns: u64,
    /// The part of `inversion_ns` during which that LC task (the longest
    /// waiting one allowed here) sat on another CPU's runqueue: queued where
    /// something else held it up while this CPU ran BE.
    #[serde(default)]
    pub inversion_elsewhere_ns: u64,
    /// Idle while an LC task allowed here had waited more than the grace period.
    pub idle_while_lc_waits_ns: u64,
    /// Time LC tasks spent waiting; a wait is attributed to the CPU it ended on
    /// (or, if still open at the end, to the task's runqueue CPU).
    pub lc_wait_ns: u64,
    /// Completed LC waits that ended (task switched in) on this CPU in the window.
    pub lc_waits: u64,
    /// Time this CPU was absent: busy, yet it took no tick for more than
    /// two ticks (the host did not run the vCPU, or interrupts were off),
    /// counted from the first missed tick; part of the time above, which
    /// the kernel charges to the task on it too. The budget check does not
    /// count it as that task's.
    #[serde(default)]
    pub absent_ns: u64,
    /// Its intervals.
    #[serde(default)]
    pub absences: u64,
}

impl CpuStats {
    pub fn add(&mut self, o: &CpuStats) {
        self.cpu_ns += o.cpu_ns;
        self.lc_ns += o.lc_ns;
        self.be_ns += o.be_ns;
        self.idle_ns += o.idle_ns;
        self.other_ns += o.other_ns;
        self.inversion_ns += o.inversion_ns;
        self.inversion_elsewhere_ns += o.inversion_elsewhere_ns;
        self.idle_while_lc_waits_ns += o.idle_while_lc_waits_ns;
        self.lc_wait_ns += o.lc_wait_ns;
        self.lc_waits += o.lc_waits;
        self.absent_ns += o.absent_ns;
        self.absences += o.absences;
    }
}

/// Distribution of completed LC waits, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitSummary {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStats {
    pub pid: Pid,
    pub tier: Option<Tier>,
    pub run_ns: u64,
    pub wait_ns: u64,
    /// Inversion charged to this task: CPU time other tasks ran BE on a CPU
    /// it was allowed on while it was the longest waiting LC task there.
    pub inversion_ns: u64,
    /// Its waits that began with a wakeup, woken until switched in, ended in
    /// the window (collected only with `ReplayConfig::per_task`).
    pub wakeup_latency: LatencyStats,
}

/// Signs of trouble in the event stream; all zero on a healthy run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostics {
    /// Events that arrived later than the reorder window allowed (processed at
    /// the current replay time).
    pub late_events: u64,
    /// How far behind the replay the latest of them was, in nanoseconds.
    pub max_lateness_ns: u64,
    /// sched_switch whose prev was not the task the replay had on that CPU,
    /// or whose next was running elsewhere: around the start-up snapshot,
    /// after dropped events, or when the kernel did not report a switch (the
    /// time in between is charged to the last known occupant).
    pub inconsistent_switches: u64,
    /// sched_wakeup for a task that was neither running nor known to be waiting.
    pub wakeups_without_waking: u64,
    /// Events naming a CPU outside the possible range.
    pub bad_cpu_events: u64,
    /// CPU absences that began before the reorder window (counted from its
    /// start only).
    #[serde(default)]
    pub absences_cut: u64,
}

/// CPU concurrency of one requested cgroup (its tasks and its descendants'),
/// within the window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupStats {
    /// The most CPUs that ran its tasks at the same time, for a non-zero time
    /// (`time_at_cpus_ns.len() - 1`).
    pub max_cpus: u32,
    /// CPU time of its tasks, by the tier they had when switched in.
    pub lc_ns: u64,
    pub be_ns: u64,
    pub other_ns: u64,
    /// `time_at_cpus_ns[k]`: time with exactly `k` CPUs running its tasks,
    /// `k = 0..=max_cpus`; sums to the window length.
    pub time_at_cpus_ns: Vec<u64>,
    /// Its reservation inversion, when it was given a CPU request.
    #[serde(default)]
    pub reservation: Option<ReservationStats>,
    /// Its completed waits that began with a wakeup (see `latency`).
    #[serde(default)]
    pub wakeup_latency: LatencyStats,
    /// How late its tasks' sleep timers fired (see `EventKind::Timer`).
    pub timer_latency: LatencyStats,
    /// Its CPU and wait time per period (`ReplayConfig::period_ns`; see
    /// `period`), None without a period.
    #[serde(default)]
    pub periods: Option<Vec<PeriodStats>>,
    /// Its CPU budget figures, when it was given a budget
    /// (`ReplayConfig::budgets`; see `budget`).
    #[serde(default)]
    pub budget: Option<BudgetStats>,
}

/// CPU budget of one requested cgroup (see the `budget` module for the
/// definitions), within the window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetStats {
    /// Its budget C per period T, ns.
    pub budget_ns: u64,
    pub period_ns: u64,
    /// Periods `[k * T, (k + 1) * T)` entirely in the window.
    pub periods: u64,
    /// Those in which its CPU time exceeded C by more than the grace period.
    pub periods_over: u64,
    /// Its most CPU time in one of them.
    pub max_period_ns: u64,
    /// Its CPU time beyond C in them, summed.
    pub over_budget_ns: u64,
    /// Time it ran over its budget while another budgeted cgroup under its
    /// own had a task waiting longer than the grace period, summed over the
    /// other cgroups.
    pub over_budget_while_waiting_ns: u64,
    /// `by_ns[y]`: the part with requested cgroup `y` waiting.
    pub by_ns: Vec<u64>,
    /// The longest uninterrupted stretch of it (against any other cgroup).
    pub longest_ns: u64,
}

/// Distribution of completed waits that began with a wakeup, in
/// nanoseconds (quantiles to 3 significant figures, at most `max_ns`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub n: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// One period `[start_ns, start_ns + period)` of a requested cgroup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodStats {
    /// Its start, CLOCK_MONOTONIC ns (a multiple of the period).
    pub start_ns: u64,
    /// CPU time of the cgroup's tasks in it.
    pub cpu_ns: u64,
    /// Time its tasks were runnable but not running in it, summed over tasks.
    pub wait_ns: u64,
}

/// Reservation inversion of one requested cgroup with a CPU request (see
/// the `reservation` module for the definition), within the window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationStats {
    /// Its request, in milli-CPUs.
    pub request_milli: u64,
    /// Time it ran on fewer CPUs than its request with a task waiting while
    /// another cgroup with a request ran on more than its own.
    pub inversion_ns: u64,
    /// The longest uninterrupted stretch of it.
    pub longest_ns: u64,
    /// `by_ns[b]`: the part during which requested cgroup `b` was above its
    /// request (these overlap when several are above at once).
    pub by_ns: Vec<u64>,
}

#[derive(Clone, Debug)]
pub struct ReplayResult {
    /// (cpu, stats) for every online CPU, and any other CPU that was observed.
    pub per_cpu: Vec<(u32, CpuStats)>,
    pub totals: CpuStats,
    pub lc_wait: WaitSummary,
    /// LC tasks still waiting at the end of the window.
    pub lc_waits_open_at_end: u64,
    /// Tasks with run or wait time in the window, most CPU time first.
    pub tasks: Vec<TaskStats>,
    pub events_processed: u64,
    pub diag: Diagnostics,
    /// (grace period, total inversion with it), for `extra_graces_ns`.
    pub inversion_by_grace: Vec<(u64, u64)>,
    /// One per requested cgroup (`ReplayConfig::nr_cgroups`), in order.
    pub cgroups: Vec<CgroupStats>,
    /// Run segments for the timeline (`ReplayConfig::timeline`), in the
    /// order they ended.
    pub segments: Vec<Segment>,
}
