//! CPU budgets (`--budget PATH=C_MS/T_MS`): the invariant of a budget
//! scheduler (Akita, docs/akita.md) that a cgroup which has used up its
//! budget in the current period does not run while another budgeted cgroup
//! still under its own budget waits.
//!
//! A budgeted requested cgroup `g` has a budget of `C` ns per period of `T`
//! ns; its periods are `[k * T, (k + 1) * T)` of the events' clock (as in
//! [`super::period`]). Its **usage** is the CPU time of its tasks (counted
//! as for its CPU time: every CPU running one of them) since its current
//! period started; before tracing it counts as 0. At each instant `g` is
//! **under** its budget when its usage is `< C`, and **over** it when its
//! usage is `>= C + grace` (the grace allows for the scheduler's timer and
//! IPI, which stop a task a moment after its slice ends at the budget).
//!
//! For budgeted cgroups `X != Y`, `X` is in **over-budget inversion against
//! `Y`** while `X` is over its budget and runs on at least one CPU, and `Y`
//! is under its budget with at least one task waiting (runnable, not
//! running; counted with the cgroup it was last seen in) for longer than the
//! grace period (from `since + grace` on, as for the LC/BE inversion). Per
//! pair the wall time is counted (not weighted by CPUs or tasks);
//! `X`'s total is the sum over `Y`, its longest interval the longest stretch
//! in inversion against any `Y` (a break of zero length does not end it).
//! Everything is clipped to the window. CPUs are not matched: `X` running on
//! one CPU counts while `Y` waits for another.
//!
//! The state changes at events (a budgeted cgroup's running CPUs or waiting
//! tasks change, told by [`super::cgroup::Cgroups`]) and between them at
//! the instants computed by [`Budget::advance`]: a period boundary, a usage
//! reaching `C` or `C + grace` (usage grows by the running CPUs per ns), a wait reaching
//! the grace. Time is settled up to each of them in turn, to the ns.
//!
//! Per whole period inside the window it also keeps the usage: the largest,
//! the periods over `C + grace`, and the total beyond `C`.

use std::collections::BTreeSet;

use super::cgroup_set::{bits, CgroupSet};
use super::period::Grid;
use super::stats::BudgetStats;
use super::Pid;

/// A CPU budget: `budget_ns` per period of `period_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetSpec {
    /// C, ns (> 0, at most the period).
    pub budget_ns: u64,
    /// T, ns (> 0).
    pub period_ns: u64,
}

/// One budgeted cgroup.
#[derive(Clone, Debug, Default)]
struct Server {
    budget: u64,
    period: u64,
    /// CPUs running its tasks, now.
    running: u32,
    /// Its waiting tasks: (waiting since, pid).
    waiting: BTreeSet<(u64, Pid)>,
    /// Index of the current period (its start: `k * period`).
    k: u64,
    /// Usage in the current period, up to `Budget::since`.
    used: u64,
    /// Whole periods in the window: over `C + grace`, the largest usage,
    /// the total usage beyond `C`.
    periods_over: u64,
    max_used: u64,
    over_ns: u64,
    /// Over-budget inversion: the total (sum over the others) and by the
    /// waiting cgroup.
    total: u64,
    by: Vec<u64>,
    /// Its current (or last) stretch of inversion: start, end, the longest.
    stretch_start: u64,
    stretch_end: Option<u64>,
    longest: u64,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Budget {
    /// Per requested cgroup (None: no budget).
    servers: Vec<Option<Server>>,
    /// The budgeted ones.
    budgeted: CgroupSet,
    grace: u64,
    window_start: u64,
    window_end: u64,
    /// Settled up to here (None: nothing seen yet).
    since: Option<u64>,
    /// Under budget with a task waiting past the grace, now.
    under_waiting: CgroupSet,
    /// In inversion against some other cgroup, now.
    inverted: CgroupSet,
}

impl Budget {
    /// `budgets[i]`: the budget of requested cgroup `i` (missing: none).
    pub(super) fn new(
        budgets: &[Option<BudgetSpec>],
        n: usize,
        grace: u64,
        window_start: u64,
        window_end: u64,
    ) -> Self {
        let servers: Vec<Option<Server>> = (0..n)
            .map(|i| {
                budgets.get(i).copied().flatten().map(|b| Server {
                    budget: b.budget_ns.max(1),
                    period: b.period_ns.max(1),
                    by: vec![0; n],
                    ..Server::default()
                })
            })
            .collect();
        let budgeted = servers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .fold(0, |set, (i, _)| set | 1 << i);
        Budget {
            servers,
            budgeted,
            grace,
            window_start,
            window_end,
            ..Default::default()
        }
    }

    /// Does any cgroup have a budget (otherwise nothing is tracked)?
    pub(super) fn active(&self) -> bool {
        self.budgeted != 0
    }

    /// Cgroup `g` now has `running` CPUs running its tasks.
    pub(super) fn set_running(&mut self, g: usize, running: u32, now: u64) {
        if self
            .servers
            .get(g)
            .and_then(Option::as_ref)
            .is_none_or(|s| s.running == running)
        {
            return;
        }
        let t = self.advance(now);
        if let Some(Some(s)) = self.servers.get_mut(g) {
            s.running = running;
        }
        self.update(t);
    }

    /// Task `pid`, waiting since `since`, waited in the cgroups `old` and now
    /// waits in `new` (0: it starts or stops waiting).
    pub(super) fn wait_change(
        &mut self,
        old: CgroupSet,
        new: CgroupSet,
        pid: Pid,
        since: u64,
        now: u64,
    ) {
        let (gone, came) = (old & !new & self.budgeted, new & !old & self.budgeted);
        if gone | came == 0 {
            return;
        }
        let t = self.advance(now);
        for g in bits(gone | came) {
            if let Some(Some(s)) = self.servers.get_mut(g) {
                if came & 1 << g != 0 {
                    s.waiting.insert((since, pid));
                } else {
                    s.waiting.remove(&(since, pid));
                }
            }
        }
        self.update(t);
    }

    /// Settle up to `now`, through every period boundary, usage reaching
    /// its budget and wait reaching the grace on the way. Returns the time
    /// settled up to (`now`, or later if already there).
    fn advance(&mut self, now: u64) -> u64 {
        let Some(mut t) = self.since else {
            // nothing ran or waited before: every usage is 0
            for s in self.servers.iter_mut().flatten() {
                s.k = now / s.period;
            }
            self.since = Some(now);
            self.update(now);
            return now;
        };
        while t < now {
            let next = self.next_change(t).min(now);
            self.settle(t, next);
            t = next;
            self.since = Some(t);
            self.update(t);
        }
        t
    }

    /// The first instant after `t` at which the sets can change with no
    /// event (u64::MAX: none).
    fn next_change(&self, t: u64) -> u64 {
        let grace = self.grace;
        self.servers
            .iter()
            .flatten()
            .flat_map(|s| {
                let running = s.running as u64;
                let boundary =
                    (running > 0 || s.used > 0).then(|| (s.k + 1).saturating_mul(s.period));
                let reaches_budget = (running > 0 && s.used < s.budget)
                    .then(|| t + (s.budget - s.used).div_ceil(running));
                let over_limit = s.budget.saturating_add(grace);
                let reaches_over = (running > 0 && s.used < over_limit)
                    .then(|| t + (over_limit - s.used).div_ceil(running));
                let past_grace = s
                    .waiting
                    .first()
                    .map(|&(w, _)| w.saturating_add(grace))
                    .filter(|&w| w > t);
                [boundary, reaches_budget, reaches_over, past_grace]
            })
            .flatten()
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Account [a, b) with the state as it is (constant in between).
    fn settle(&mut self, a: u64, b: u64) {
        for s in self.servers.iter_mut().flatten() {
            s.used += s.running as u64 * (b - a);
        }
        let d = b
            .min(self.window_end)
            .saturating_sub(a.max(self.window_start));
        if d == 0 {
            return;
        }
        for x in bits(self.inverted) {
            let Some(Some(s)) = self.servers.get_mut(x) else {
                continue;
            };
            for y in bits(self.under_waiting & !(1 << x)) {
                s.by[y] += d;
                s.total += d;
            }
        }
    }

    /// At `t` (settled up to it): start new periods, recompute the sets,
    /// start or end stretches.
    fn update(&mut self, t: u64) {
        let (ws, we, grace) = (self.window_start, self.window_end, self.grace);
        let (mut over_running, mut under_waiting) = (0, 0);
        for (g, s) in self.servers.iter_mut().enumerate() {
            let Some(s) = s else { continue };
            if t >= (s.k + 1).saturating_mul(s.period) {
                let start = s.k.saturating_mul(s.period);
                if start >= ws && start.saturating_add(s.period) <= we {
                    s.max_used = s.max_used.max(s.used);
                    s.over_ns += s.used.saturating_sub(s.budget);
                    if s.used > s.budget.saturating_add(grace) {
                        s.periods_over += 1;
                    }
                }
                s.k = t / s.period;
                s.used = 0;
            }
            // Running past the budget counts once beyond the grace: the
            // scheduler's slice ends at the budget, but its timer and IPI
            // take a moment to stop the task (the same allowance as waits get).
            if s.used >= s.budget.saturating_add(grace) && s.running > 0 {
                over_running |= 1 << g;
            }
            if s.used < s.budget
                && s.waiting
                    .first()
                    .is_some_and(|&(w, _)| w.saturating_add(grace) <= t)
            {
                under_waiting |= 1 << g;
            }
        }
        self.under_waiting = under_waiting;
        let inverted = bits(over_running)
            .filter(|&x| under_waiting & !(1 << x) != 0)
            .fold(0, |set, x| set | 1 << x);
        let (started, ended) = (inverted & !self.inverted, self.inverted & !inverted);
        self.inverted = inverted;
        for x in bits(started) {
            if let Some(Some(s)) = self.servers.get_mut(x) {
                // a break of zero length continues the last stretch
                if s.stretch_end != Some(t) {
                    s.stretch_start = t;
                }
            }
        }
        for x in bits(ended) {
            self.end_stretch(x, t);
        }
    }

    fn end_stretch(&mut self, x: usize, t: u64) {
        let (ws, we) = (self.window_start, self.window_end);
        if let Some(Some(s)) = self.servers.get_mut(x) {
            let len = t.min(we).saturating_sub(s.stretch_start.max(ws));
            s.longest = s.longest.max(len);
            s.stretch_end = Some(t);
        }
    }

    /// Close the window: per requested cgroup, its figures (None: no budget).
    pub(super) fn finish(&mut self) -> Vec<Option<BudgetStats>> {
        let end = self.window_end;
        if self.since.is_some() {
            self.advance(end);
        }
        for x in bits(self.inverted) {
            self.end_stretch(x, end);
        }
        let (ws, we) = (self.window_start, self.window_end);
        self.servers
            .iter()
            .map(|s| {
                s.as_ref().map(|s| BudgetStats {
                    budget_ns: s.budget,
                    period_ns: s.period,
                    periods: Grid::new(s.period, ws, we).count() as u64,
                    periods_over: s.periods_over,
                    max_period_ns: s.max_used,
                    over_budget_ns: s.over_ns,
                    over_budget_while_waiting_ns: s.total,
                    by_ns: s.by.clone(),
                    longest_ns: s.longest,
                })
            })
            .collect()
    }
}
