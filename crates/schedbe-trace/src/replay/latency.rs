//! Wakeup latency per requested cgroup (`--cgroup`): for each wait that
//! began with a wakeup (sched_waking, or sched_wakeup when no waking was
//! seen, or sched_wakeup_new; see [`super::wait::WaitCause`]), the time from
//! then until the task is next switched in. Waits of a preempted task
//! (switched out while still runnable) and of tasks the start-up snapshot
//! found queued are not wakeups and are left out. A wait counts when it ends
//! (the task is switched in) in the window, with its whole length, as the LC
//! wait distribution does; waits still open when the window closes do not
//! count.

use hdrhistogram::Histogram;

use super::stats::LatencyStats;

/// One distribution of wait lengths.
#[derive(Clone, Debug)]
pub(super) struct Latency {
    hist: Histogram<u64>,
    sum_ns: u128,
    max_ns: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::with_sigfig(3)
    }
}

impl Latency {
    fn with_sigfig(sigfig: u8) -> Self {
        Latency {
            hist: Histogram::new(sigfig).expect("2 or 3 significant figures is valid"),
            sum_ns: 0,
            max_ns: 0,
        }
    }

    /// One task's distribution (`--per-task`): to 2 significant figures,
    /// which keeps a histogram reaching seconds at tens of KB (3 figures:
    /// ~170 KB), one per task that woke in the window.
    pub(super) fn per_task() -> Self {
        Latency::with_sigfig(2)
    }

    /// One wait of `ns` nanoseconds.
    pub(super) fn record(&mut self, ns: u64) {
        // auto-resizing histogram: recording cannot fail for u64 values
        let _ = self.hist.record(ns.max(1));
        self.sum_ns += ns as u128;
        self.max_ns = self.max_ns.max(ns);
    }

    /// The distribution so far (all zero without a wait).
    pub(super) fn summary(&self) -> LatencyStats {
        let n = self.hist.len();
        if n == 0 {
            return LatencyStats::default();
        }
        // the histogram gives the top of a value's bucket: never above the
        // largest wait actually seen
        let q = |q: f64| self.hist.value_at_quantile(q).min(self.max_ns);
        LatencyStats {
            n,
            mean_ns: (self.sum_ns as f64 / n as f64).round() as u64,
            p50_ns: q(0.5),
            p99_ns: q(0.99),
            max_ns: self.max_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary() {
        assert_eq!(Latency::default().summary(), LatencyStats::default());
        let mut l = Latency::default();
        for i in 1..=200u64 {
            l.record(i * 10_000);
        }
        let s = l.summary();
        assert_eq!((s.n, s.max_ns), (200, 2_000_000));
        assert_eq!(s.mean_ns, 1_005_000);
        // to 3 significant figures
        assert!(s.p50_ns.abs_diff(1_000_000) <= 1_000, "{s:?}");
        assert!(s.p99_ns.abs_diff(1_980_000) <= 2_000, "{s:?}");
        let mut l = Latency::default();
        l.record(3_000_123);
        assert_eq!(l.summary().p50_ns, 3_000_123, "one wait: exact");
        let mut l = Latency::per_task();
        for i in 1..=200u64 {
            l.record(i * 10_000);
        }
        let s = l.summary();
        assert_eq!((s.n, s.mean_ns, s.max_ns), (200, 1_005_000, 2_000_000));
        // to 2 significant figures
        assert!(s.p50_ns.abs_diff(1_000_000) <= 10_000, "{s:?}");
    }
}
