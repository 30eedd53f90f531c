//! Per-cgroup CPU concurrency (`--cgroup`): how many CPUs run tasks of each
//! requested cgroup (or of a descendant) at the same time, and their CPU
//! time.
//!
//! The requested cgroups are numbered 0.. (at most [`MAX_CGROUPS`]); a
//! [`CgroupSet`] is a bit set of them. The caller maps raw cgroup ids to the
//! requested cgroups they belong to ([`Replay::map_cgroup`]): a cgroup in the
//! subtree of requested cgroup `i` has bit `i`, so hierarchy is resolved
//! there, once per cgroup, and the replay only looks ids up.
//!
//! Each CPU's occupant carries the set of the task it runs, taken from the
//! cgroup id recorded when the task was switched in (or found running by the
//! snapshot). Every time an occupant changes, the affected cgroups'
//! "CPUs running it" counters change and the time spent at the previous
//! count is settled, clipped to the window.
//!
//! Each cgroup also counts its waiting tasks (a waiting task counts for the
//! set it was last seen in: switched in, woken, or found by the snapshot),
//! which with the running count is what the reservation inversion
//! ([`super::reservation`]) needs. With a period ([`super::period`]) the
//! time integral of both counts (its CPU time and its tasks' wait time) is
//! also split into the periods, and each cgroup keeps the wakeup latency of
//! its tasks ([`super::latency`]; a wait counts with the set it was counted
//! waiting in). The cgroups given a CPU budget are told their running CPUs
//! and waiting tasks too ([`super::budget`]).

use std::collections::HashMap;

use super::budget::Budget;
use super::cgroup_set::{bits, CgroupSet, MAX_CGROUPS};
use super::latency::Latency;
use super::period::Grid;
use super::reservation::Reservation;
use super::occ::Occ;
use super::{CgroupStats, PeriodStats, Pid, Replay, ReplayConfig, SegmentEnd, Tier};

#[derive(Clone, Debug, Default)]
struct Group {
    /// CPUs whose occupant is in this cgroup, now.
    running: u32,
    /// Of those, the absent ones (not running it for the budget check).
    absent: u32,
    /// Its tasks waiting for a CPU, now.
    waiting: u32,
    /// `time_at` is settled up to here.
    since: u64,
    /// `time_at[k]`: time in the window with exactly `k` CPUs running it.
    time_at: Vec<u64>,
    lc_ns: u64,
    be_ns: u64,
    other_ns: u64,
    /// Its completed waits that began with a wakeup.
    wakeup: Latency,
    /// How late its tasks' sleep timers fired.
    timer: Latency,
    /// Per period of the grid: (CPU time, wait time), ns.
    periods: Vec<(u64, u64)>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Cgroups {
    /// cgroup id -> requested cgroups it is in. Ids not here are in none.
    members: HashMap<u64, CgroupSet>,
    groups: Vec<Group>,
    window_start: u64,
    window_end: u64,
    reservation: Reservation,
    budget: Budget,
    /// The periods (None: no per-period series).
    grid: Option<Grid>,
}

impl Cgroups {
    /// `cfg.nr_cgroups` requested cgroups; `cfg.requests[i]`, the CPU
    /// request of cgroup `i` in milli-CPUs (missing: none); `cfg.budgets[i]`
    /// its CPU budget (missing: none); `cfg.period_ns`, the per-period
    /// series' period in ns (None or 0: none).
    pub(super) fn new(cfg: &ReplayConfig) -> Self {
        let (n, window_start, window_end) = (cfg.nr_cgroups, cfg.window_start, cfg.window_end);
        assert!(n <= MAX_CGROUPS, "at most {MAX_CGROUPS} cgroups");
        let requests = (0..n).map(|i| cfg.requests.get(i).copied().flatten()).collect();
        let grid = cfg
            .period_ns
            .filter(|&p| p > 0 && n > 0)
            .map(|p| Grid::new(p, window_start, window_end));
        let group = Group {
            periods: vec![(0, 0); grid.map_or(0, |g| g.count())],
            ..Group::default()
        };
        Cgroups {
            members: HashMap::new(),
            groups: vec![group; n],
            window_start,
            window_end,
            reservation: Reservation::new(requests, window_start, window_end),
            budget: Budget::new(&cfg.budgets, n, cfg.grace_ns, window_start, window_end),
            grid,
        }
    }

    /// Are waiting tasks counted (the reservation inversion or the
    /// per-period wait time needs them)?
    fn track_waiting(&self) -> bool {
        self.reservation.active() || self.grid.is_some()
    }

    /// The requested cgroups cgroup `id` is in (0: none, or not recorded).
    pub(super) fn set_of(&self, id: u64) -> CgroupSet {
        if id == 0 || self.groups.is_empty() {
            return 0;
        }
        self.members.get(&id).copied().unwrap_or(0)
    }

    /// Settle group `g`'s histogram (and periods) up to `now`.
    fn settle(&mut self, g: usize, now: u64) {
        let (ws, we, grid) = (self.window_start, self.window_end, self.grid);
        let gr = &mut self.groups[g];
        let a = gr.since.max(ws);
        let b = now.min(we);
        if b > a {
            let k = gr.running as usize;
            if gr.time_at.len() <= k {
                gr.time_at.resize(k + 1, 0);
            }
            gr.time_at[k] += b - a;
            if let Some(grid) = grid.filter(|_| gr.running > 0 || gr.waiting > 0) {
                let (running, waiting) = (gr.running as u64, gr.waiting as u64);
                for (i, d) in grid.split(a, b) {
                    let p = &mut gr.periods[i];
                    p.0 += running * d;
                    p.1 += waiting * d;
                }
            }
        }
        gr.since = gr.since.max(now);
    }

    /// A CPU's occupant changes at `now` from one in `old` to one in `new`.
    fn change(&mut self, old: CgroupSet, new: CgroupSet, now: u64) {
        self.count(old, new, now, |g| &mut g.running);
    }

    /// A CPU whose occupant is in `set` becomes absent (`up`) or present
    /// again at `now`.
    pub(super) fn absent(&mut self, set: CgroupSet, up: bool, now: u64) {
        let (old, new) = if up { (0, set) } else { (set, 0) };
        self.count(old, new, now, |g| &mut g.absent);
    }

    /// Task `pid`, waiting since `since`, waited in `old` and now waits in
    /// `new` at `now` (0: it starts or stops waiting).
    pub(super) fn wait_change(&mut self, (pid, since): (Pid, u64), old: CgroupSet, new: CgroupSet, now: u64) {
        if self.track_waiting() {
            self.count(old, new, now, |g| &mut g.waiting);
        }
        if self.budget.active() {
            self.budget.wait_change(old, new, pid, since, now);
        }
    }

    /// One counter (`which`) of each group moves by one at `now`: down in
    /// the groups only in `old`, up in those only in `new`.
    fn count(&mut self, old: CgroupSet, new: CgroupSet, now: u64, which: fn(&mut Group) -> &mut u32) {
        let n = self.groups.len();
        for (set, up) in [(old & !new, false), (new & !old, true)] {
            for g in bits(set).filter(|&g| g < n) {
                self.settle(g, now);
                let c = which(&mut self.groups[g]);
                *c = if up { *c + 1 } else { c.saturating_sub(1) };
                self.refresh(g, now);
            }
        }
    }

    /// Tell the reservation and budget accounting group `g`'s counts.
    fn refresh(&mut self, g: usize, now: u64) {
        let gr = &self.groups[g];
        if self.reservation.active() {
            self.reservation.refresh(g, gr.running, gr.waiting, now);
        }
        if self.budget.active() {
            self.budget.set_running(g, gr.running.saturating_sub(gr.absent), now);
        }
    }

    /// `d` ns (already clipped to the window) of a `tier` task in `set` on a CPU.
    pub(super) fn charge(&mut self, set: CgroupSet, tier: Tier, d: u64) {
        for g in bits(set) {
            let Some(gr) = self.groups.get_mut(g) else {
                continue;
            };
            match tier {
                Tier::Lc => gr.lc_ns += d,
                Tier::Be => gr.be_ns += d,
                Tier::Other => gr.other_ns += d,
                Tier::Idle => {}
            }
        }
    }

    /// A wait of `ns` that began with a wakeup ended, counted waiting in `set`.
    pub(super) fn wakeup(&mut self, set: CgroupSet, ns: u64) {
        self.record(set, ns, |gr| &mut gr.wakeup);
    }

    /// A sleep timer of a task in `set` fired `ns` late.
    pub(super) fn timer(&mut self, set: CgroupSet, ns: u64) {
        self.record(set, ns, |gr| &mut gr.timer);
    }

    /// `ns` into one distribution (`which`) of each group in `set`.
    fn record(&mut self, set: CgroupSet, ns: u64, which: fn(&mut Group) -> &mut Latency) {
        for g in bits(set) {
            if let Some(gr) = self.groups.get_mut(g) {
                which(gr).record(ns);
            }
        }
    }

    /// Close the window: one [`CgroupStats`] per requested cgroup.
    pub(super) fn finish(&mut self) -> Vec<CgroupStats> {
        let end = self.window_end;
        let reservations = self.reservation.finish();
        let budgets = self.budget.finish();
        (0..self.groups.len())
            .zip(reservations.into_iter().zip(budgets))
            .map(|(g, (reservation, budget))| {
                self.settle(g, end);
                let gr = &self.groups[g];
                // the most CPUs held for a non-zero time: simultaneous events
                // (a hand-over at the same nanosecond) do not count
                let max = gr.time_at.iter().rposition(|&t| t > 0).unwrap_or(0);
                let mut time_at = gr.time_at.clone();
                time_at.resize(max + 1, 0);
                let periods = self.grid.map(|grid| {
                    gr.periods
                        .iter()
                        .enumerate()
                        .map(|(i, &(cpu_ns, wait_ns))| PeriodStats {
                            start_ns: grid.start(i),
                            cpu_ns,
                            wait_ns,
                        })
                        .collect()
                });
                CgroupStats {
                    max_cpus: max as u32,
                    lc_ns: gr.lc_ns,
                    be_ns: gr.be_ns,
                    other_ns: gr.other_ns,
                    time_at_cpus_ns: time_at,
                    reservation,
                    wakeup_latency: gr.wakeup.summary(),
                    timer_latency: gr.timer.summary(),
                    periods,
                    budget,
                }
            })
            .collect()
    }
}

impl Replay {
    /// Cgroup `id` is in the requested cgroups `set` (bit `i`: the `i`-th of
    /// `ReplayConfig::nr_cgroups`; a descendant has the bits of its requested
    /// ancestors). Applies to events processed from now on: call it before
    /// pushing events that carry `id`. Unmapped ids are in none.
    pub fn map_cgroup(&mut self, id: u64, set: CgroupSet) {
        if id != 0 {
            self.cgroups.members.insert(id, set);
        }
    }

    /// Replace CPU `c`'s occupant at `now`, keeping the per-cgroup counts
    /// and the timeline (the old occupant's segment ended `how`).
    pub(super) fn set_occupant(&mut self, c: usize, occ: Option<Occ>, now: u64, how: SegmentEnd) {
        if let Some(o) = self.cpus[c].occ {
            self.record_segment(c, &o, now, how);
        }
        let old = self.cpus[c].occ.map_or(0, |o| o.cgroups);
        let new = occ.map_or(0, |o| o.cgroups);
        if old != new {
            // an absent CPU switches only when its absence began late (cut)
            let absent = self.cpus[c].absent_since.is_some();
            if absent {
                self.cgroups.absent(old, false, now);
            }
            self.cgroups.change(old, new, now);
            if absent {
                self.cgroups.absent(new, true, now);
            }
        }
        self.cpus[c].occ = occ;
    }
}
