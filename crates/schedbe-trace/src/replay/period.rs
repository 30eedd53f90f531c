//! Per-period series (`ReplayConfig::period_ns`, `--period-ms`): the periods
//! are `[k * T, (k + 1) * T)` on the events' clock (CLOCK_MONOTONIC ns, what
//! bpf_ktime_get_ns reads), not relative to the window's start, and only
//! those entirely inside the window `[window_start, window_end)` count.
//!
//! [`Grid`] cuts an interval into its parts in each period;
//! [`super::cgroup::Cgroups`] uses it to split, per requested cgroup, the
//! time integral of its running CPUs (its CPU time) and of its waiting
//! tasks (their wait time) into the periods.

/// The periods entirely inside a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Grid {
    /// Start of the first period.
    first: u64,
    /// The period, ns (> 0).
    len: u64,
    /// How many periods.
    count: u64,
}

impl Grid {
    /// The periods of `period` ns (> 0) entirely inside [window_start, window_end).
    pub(super) fn new(period: u64, window_start: u64, window_end: u64) -> Self {
        let len = period.max(1);
        let first_k = window_start.div_ceil(len);
        let end_k = window_end / len;
        let count = end_k.saturating_sub(first_k);
        Grid {
            first: first_k.saturating_mul(len),
            len,
            count,
        }
    }

    pub(super) fn count(&self) -> usize {
        self.count as usize
    }

    /// Start of period `i`.
    pub(super) fn start(&self, i: usize) -> u64 {
        self.first + i as u64 * self.len
    }

    /// End of the last period.
    fn end(&self) -> u64 {
        self.first + self.count * self.len
    }

    /// The parts of [a, b) in each period it overlaps: (period index, ns),
    /// non-zero parts only, in order.
    pub(super) fn split(&self, a: u64, b: u64) -> impl Iterator<Item = (usize, u64)> {
        let a = a.max(self.first);
        let b = b.min(self.end());
        let len = self.len;
        let mut i = if b > a { (a - self.first) / len } else { self.count };
        let first = self.first;
        std::iter::from_fn(move || {
            let start = first + i * len;
            if b <= a || start >= b {
                return None;
            }
            let part = b.min(start + len) - a.max(start);
            i += 1;
            Some(((i - 1) as usize, part))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_aligned_to_the_clock_and_inside_the_window() {
        // window [25, 130) with T = 30: periods [30, 60), [60, 90), [90, 120)
        let g = Grid::new(30, 25, 130);
        assert_eq!((g.first, g.count()), (30, 3));
        assert_eq!((g.start(0), g.start(2)), (30, 90));
        // aligned window: its first and last periods count
        let g = Grid::new(10, 20, 50);
        assert_eq!((g.first, g.count()), (20, 3));
        // shorter than a period once aligned: none
        let g = Grid::new(10, 21, 39);
        assert_eq!(g.count(), 0);
        assert_eq!(g.split(0, 100).count(), 0);
    }

    #[test]
    fn split_clips_at_the_boundaries() {
        let g = Grid::new(10, 25, 125); // [30, 40) .. [110, 120)
        assert_eq!(g.count(), 9);
        let parts: Vec<_> = g.split(35, 52).collect();
        assert_eq!(parts, vec![(0, 5), (1, 10), (2, 2)]);
        let parts: Vec<_> = g.split(0, 31).collect();
        assert_eq!(parts, vec![(0, 1)], "before the first period: cut");
        let parts: Vec<_> = g.split(118, 200).collect();
        assert_eq!(parts, vec![(8, 2)], "after the last period: cut");
        assert_eq!(g.split(40, 40).count(), 0);
        assert_eq!(g.split(50, 40).count(), 0);
        assert_eq!(g.split(0, 30).count(), 0);
        assert_eq!(g.split(120, 200).count(), 0);
        let parts: Vec<_> = g.split(40, 50).collect();
        assert_eq!(parts, vec![(1, 10)], "exactly one period");
    }
}
