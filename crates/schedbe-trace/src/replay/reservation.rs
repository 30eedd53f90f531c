//! Reservation inversion between requested cgroups given with a CPU request
//! (`--cgroup PATH=REQ`).
//!
//! At each instant, for requested cgroups with a request (in milli-CPUs):
//!
//! * `A` is **below its request and waiting** when the CPUs running its
//!   tasks number fewer than `REQ_A` (`1000 * running < req`: with 1.5 CPUs
//!   requested, running on 1 is below) and at least one of its tasks is
//!   runnable but not running (woken, new or preempted, not yet switched in);
//! * `B` is **above its request** when more CPUs than `REQ_B` run its tasks
//!   (`1000 * running > req`). A cgroup without a request is never above
//!   (nor below).
//!
//! The reservation inversion of `A` is the time during which `A` is below
//! and waiting while at least one other cgroup is above; per other cgroup
//! `B`, the time `A` is below and waiting while `B` is above (several `B` can
//! be above at once, so these can add up to more than `A`'s total). The
//! longest interval is the longest stretch of `A`'s inversion without a
//! break (a break of zero length, two events at the same nanosecond, does
//! not end it). Everything is clipped to the window.
//!
//! The caller ([`super::cgroup::Cgroups`]) tells, after every change of a
//! cgroup's running CPUs or waiting tasks, the cgroup's new counts
//! ([`Reservation::refresh`]). The state is two bit sets (below-and-waiting,
//! above) that stay constant between changes, so time is settled only when
//! one of them changes.

use super::cgroup_set::{bits, CgroupSet};
use super::stats::ReservationStats;

#[derive(Clone, Debug, Default)]
pub(super) struct Reservation {
    /// Per requested cgroup: its request in milli-CPUs (None: no request).
    req: Vec<Option<u64>>,
    /// Below its request with a task waiting, now.
    below_waiting: CgroupSet,
    /// Above its request, now.
    above: CgroupSet,
    /// In reservation inversion (below and waiting, another above), now.
    inverted: CgroupSet,
    /// The sets have been as they are since here.
    since: u64,
    window_start: u64,
    window_end: u64,
    /// Per cgroup: total inversion, and by the cgroup above (`by[a][b]`).
    total: Vec<u64>,
    by: Vec<Vec<u64>>,
    /// Per cgroup: where its current (or last) stretch of inversion started,
    /// where the last one ended, and the longest stretch.
    stretch_start: Vec<u64>,
    stretch_end: Vec<Option<u64>>,
    longest: Vec<u64>,
}

impl Reservation {
    /// `requests[i]`: the request of requested cgroup `i` in milli-CPUs.
    pub(super) fn new(requests: Vec<Option<u64>>, window_start: u64, window_end: u64) -> Self {
        let n = requests.len();
        let active = requests.iter().any(Option::is_some);
        Reservation {
            req: requests,
            window_start,
            window_end,
            total: vec![0; n],
            by: if active { vec![vec![0; n]; n] } else { Vec::new() },
            stretch_start: vec![0; n],
            stretch_end: vec![None; n],
            longest: vec![0; n],
            ..Default::default()
        }
    }

    /// Does any cgroup have a request (otherwise nothing is tracked)?
    pub(super) fn active(&self) -> bool {
        !self.by.is_empty()
    }

    /// Overlap of [a, b) with the window.
    fn clip(&self, a: u64, b: u64) -> u64 {
        b.min(self.window_end)
            .saturating_sub(a.max(self.window_start))
    }

    /// Cgroup `g` now has `running` CPUs running its tasks and `waiting`
    /// tasks waiting for a CPU.
    pub(super) fn refresh(&mut self, g: usize, running: u32, waiting: u32, now: u64) {
        let Some(Some(req)) = self.req.get(g).copied() else {
            return;
        };
        let used = 1000 * running as u64;
        let bit: CgroupSet = 1 << g;
        let set = |s: CgroupSet, on: bool| if on { s | bit } else { s & !bit };
        let below_waiting = set(self.below_waiting, used < req && waiting > 0);
        let above = set(self.above, used > req);
        if (below_waiting, above) != (self.below_waiting, self.above) {
            self.settle(now);
            self.below_waiting = below_waiting;
            self.above = above;
            self.update_stretches(now);
        }
    }

    /// Account [since, now) with the sets as they were.
    fn settle(&mut self, now: u64) {
        let d = self.clip(self.since, now);
        self.since = self.since.max(now);
        if d == 0 {
            return;
        }
        for a in bits(self.inverted) {
            self.total[a] += d;
            for b in bits(self.above & !(1 << a)) {
                self.by[a][b] += d;
            }
        }
    }

    /// After the sets changed at `now`: start, resume or end stretches.
    fn update_stretches(&mut self, now: u64) {
        let inverted = bits(self.below_waiting)
            .filter(|&a| self.above & !(1 << a) != 0)
            .fold(0, |s, a| s | 1 << a);
        let (started, ended) = (inverted & !self.inverted, self.inverted & !inverted);
        self.inverted = inverted;
        for a in bits(started) {
            // a break of zero length continues the last stretch
            if self.stretch_end[a] != Some(now) {
                self.stretch_start[a] = now;
            }
        }
        for a in bits(ended) {
            self.end_stretch(a, now);
        }
    }

    fn end_stretch(&mut self, a: usize, now: u64) {
        let len = self.clip(self.stretch_start[a], now);
        self.longest[a] = self.longest[a].max(len);
        self.stretch_end[a] = Some(now);
    }

    /// Close the window: per requested cgroup, its figures (None: no request).
    pub(super) fn finish(&mut self) -> Vec<Option<ReservationStats>> {
        let end = self.window_end;
        self.settle(end);
        for a in bits(self.inverted) {
            self.end_stretch(a, end);
        }
        (0..self.req.len())
            .map(|a| {
                self.req[a].map(|req| ReservationStats {
                    request_milli: req,
                    inversion_ns: self.total[a],
                    longest_ns: self.longest[a],
                    by_ns: self.by.get(a).cloned().unwrap_or_default(),
                })
            })
            .collect()
    }
}
