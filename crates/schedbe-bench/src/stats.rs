//! Latency summaries (hdrhistogram), time windows, and the aggregation of
//! repetitions (median and spread).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Summary of a set of latencies. Times in microseconds; the mean is exact,
/// quantiles come from an HDR histogram with 3 significant digits.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// Collects latencies (in nanoseconds) and summarizes them.
pub struct LatencyHist {
    h: Histogram<u64>,
    sum_ns: u128,
    max_ns: u64,
}

/// Largest value recorded exactly (1 hour in microseconds); above that
/// values are clamped (the max is still exact).
const HIST_MAX_US: u64 = 3_600_000_000;

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHist {
    pub fn new() -> Self {
        LatencyHist {
            h: Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("static histogram bounds are valid"),
            sum_ns: 0,
            max_ns: 0,
        }
    }

    pub fn record_ns(&mut self, v_ns: u64) {
        let us = (v_ns / 1000).clamp(1, HIST_MAX_US);
        self.h.saturating_record(us);
        self.sum_ns += v_ns as u128;
        self.max_ns = self.max_ns.max(v_ns);
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    pub fn summary(&self) -> LatencySummary {
        let n = self.h.len();
        if n == 0 {
            return LatencySummary::default();
        }
        let max_us = self.max_ns as f64 / 1000.0;
        // A quantile is its bucket's highest equivalent value, which can lie
        // just above the exact maximum: never report one above it.
        let q = |x: f64| (self.h.value_at_quantile(x) as f64).min(max_us);
        LatencySummary {
            count: n,
            mean_us: self.sum_ns as f64 / n as f64 / 1000.0,
            p50_us: q(0.50),
            p90_us: q(0.90),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us,
        }
    }
}

pub fn summarize_ns(values: impl IntoIterator<Item = u64>) -> LatencySummary {
    let mut h = LatencyHist::new();
    for v in values {
        h.record_ns(v);
    }
    h.summary()
}

/// Index of the window of width `width_ns` starting at `origin_ns` that
/// holds `t_ns` (None before the origin).
pub fn window_index(t_ns: u64, origin_ns: u64, width_ns: u64) -> Option<usize> {
    if t_ns < origin_ns || width_ns == 0 {
        return None;
    }
    Some(((t_ns - origin_ns) / width_ns) as usize)
}

/// Median of an ascending slice.
pub fn median_sorted(v: &[f64]) -> Option<f64> {
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Median, range and relative spread of one figure over repetitions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// (max - min) / |median|; 0 for a single value, null when undefined.
    pub rel_spread: Option<f64>,
}

/// Aggregate values over repetitions; non-finite values (a missing figure)
/// are left out. None when nothing is left.
pub fn spread(values: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let median = median_sorted(&v)?;
    let (min, max) = (v[0], v[v.len() - 1]);
    let rel_spread = if median != 0.0 { Some((max - min) / median.abs()) } else if max == min { Some(0.0) } else { None };
    Some(Spread { n: v.len(), median, min, max, rel_spread })
}

/// after / before, when both are meaningful.
/// Median [min-max] of `v` at `prec` decimals, or "-" when empty.
pub fn fmt_spread(v: &[f64], prec: usize) -> String {
    match spread(v) {
        Some(s) => format!("{:.p$} [{:.p$}-{:.p$}]", s.median, s.min, s.max, p = prec),
        None => "-".into(),
    }
}

pub fn ratio(after: f64, before: f64) -> Option<f64> {
    if after.is_finite() && before.is_finite() && before > 0.0 {
        Some(after / before)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_values() {
        // 1..=1000 ms
        let s = summarize_ns((1..=1000u64).map(|i| i * 1_000_000));
        assert_eq!(s.count, 1000);
        assert!((s.mean_us - 500_500.0).abs() < 1e-6);
        assert!((s.p50_us / 500_000.0 - 1.0).abs() < 0.002, "{}", s.p50_us);
        assert!((s.p99_us / 990_000.0 - 1.0).abs() < 0.002, "{}", s.p99_us);
        assert_eq!(s.max_us, 1_000_000.0);
        assert_eq!(summarize_ns([]), LatencySummary::default());
        // sub-microsecond and huge values are clamped, not lost
        let s = summarize_ns([10, u64::MAX / 2]);
        assert_eq!(s.count, 2);
        // 100 ms falls in a 64 us bucket: its quantiles stop at the exact max
        let s = summarize_ns([100_000_001]);
        assert!(s.p50_us <= s.max_us && s.p999_us <= s.max_us && s.p999_us > 99_900.0, "{s:?}");
    }

    #[test]
    fn windows() {
        assert_eq!(window_index(5, 10, 1), None);
        assert_eq!(window_index(10, 10, 1_000), Some(0));
        assert_eq!(window_index(2_999, 1_000, 1_000), Some(1));
        assert_eq!(window_index(1, 0, 0), None);
    }

    #[test]
    fn spreads_and_ratios() {
        let s = spread(&[1.2, f64::NAN, 1.0, 1.1]).unwrap();
        assert_eq!(s.n, 3);
        assert!((s.median - 1.1).abs() < 1e-12);
        assert!((s.rel_spread.unwrap() - 0.2 / 1.1).abs() < 1e-12);
        assert_eq!(spread(&[2.0, 4.0]).unwrap().median, 3.0);
        assert_eq!(spread(&[5.0]).unwrap().rel_spread, Some(0.0));
        assert!(spread(&[]).is_none());
        assert!(spread(&[f64::NAN]).is_none());
        assert_eq!(spread(&[0.0, 0.0]).unwrap().rel_spread, Some(0.0));
        assert_eq!(fmt_spread(&[1.0, 3.0, 2.0], 1), "2.0 [1.0-3.0]");
        assert_eq!(fmt_spread(&[], 2), "-");
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(3.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
    }
}
