//! The LC server's unit of work: a calibrated CPU spin loop. A request of
//! `S` microseconds burns `S * iters_per_us` loop iterations, so its CPU
//! demand is fixed whatever the scheduler does (preemption stretches its wall
//! time, not its work).

use std::hint::black_box;

use serde::{Deserialize, Serialize};

use crate::sys::monotonic_ns;

/// Burn `iters` iterations of a dependent xorshift chain (no memory traffic,
/// not vectorisable, so its speed is the core's and stable).
#[inline(never)]
pub fn spin(iters: u64) -> u64 {
    let mut x: u64 = black_box(0x9E37_79B9_7F4A_7C15);
    for i in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    black_box(x)
}

/// Iterations for `service_ns` at a calibrated speed.
pub fn iters_for_ns(service_ns: u64, iters_per_us: f64) -> u64 {
    ((service_ns as f64 / 1000.0) * iters_per_us).round().max(0.0) as u64
}

/// What a calibration measured.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Calibration {
    /// The figure used: the median of the trials.
    pub iters_per_us: f64,
    pub trials_iters_per_us: Vec<f64>,
    pub min: f64,
    pub max: f64,
    /// (max - min) / median
    pub spread: f64,
    pub trial_ms: f64,
    /// The policy the calibrating thread ran at.
    pub policy: String,
}

impl Calibration {
    pub fn describe(&self) -> String {
        format!(
            "spin calibration: {:.1} iterations/us (median of {} x {:.0} ms trials; min {:.1}, max {:.1}, spread {:.1}%; {})",
            self.iters_per_us,
            self.trials_iters_per_us.len(),
            self.trial_ms,
            self.min,
            self.max,
            100.0 * self.spread,
            self.policy
        )
    }
}

/// Measure the loop's speed on the calling thread: `trials` runs of about
/// `trial_ms` each; the median is used (it reflects the typical interference
/// of the environment, e.g. a vCPU that is sometimes descheduled by the host).
pub fn calibrate(trials: usize, trial_ms: f64) -> Calibration {
    let trials = trials.max(1);
    // Warm up and get a first estimate from ~1 ms.
    let mut n: u64 = 10_000;
    let mut rate;
    loop {
        let t0 = monotonic_ns();
        spin(n);
        let dt = (monotonic_ns() - t0).max(1);
        rate = n as f64 / (dt as f64 / 1000.0);
        if dt > 1_000_000 || n > (1 << 40) {
            break;
        }
        n *= 4;
    }
    let per_trial = ((trial_ms * 1000.0) * rate).max(1000.0) as u64;
    let mut v: Vec<f64> = (0..trials)
        .map(|_| {
            let t0 = monotonic_ns();
            spin(per_trial);
            let dt = (monotonic_ns() - t0).max(1);
            per_trial as f64 / (dt as f64 / 1000.0)
        })
        .collect();
    let trials_iters_per_us = v.clone();
    v.sort_by(|a, b| a.total_cmp(b));
    let median = crate::stats::median_sorted(&v).unwrap_or(rate);
    let (min, max) = (v[0], v[v.len() - 1]);
    Calibration {
        iters_per_us: median,
        trials_iters_per_us,
        min,
        max,
        spread: if median > 0.0 { (max - min) / median } else { 0.0 },
        trial_ms,
        policy: crate::sys::current_policy_desc(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iters_math() {
        assert_eq!(iters_for_ns(2_000_000, 100.0), 200_000);
        assert_eq!(iters_for_ns(0, 100.0), 0);
        assert_eq!(iters_for_ns(1500, 2.0), 3);
    }

    #[test]
    fn calibration_is_consistent() {
        let c = calibrate(3, 5.0);
        assert!(c.iters_per_us > 1.0, "{c:?}");
        assert_eq!(c.trials_iters_per_us.len(), 3);
        assert!(c.min <= c.iters_per_us && c.iters_per_us <= c.max);
        // A burn of 5 ms should take roughly 5 ms on an idle-ish machine;
        // only check it is not absurd (a shared machine is noisy).
        let t0 = monotonic_ns();
        spin(iters_for_ns(5_000_000, c.iters_per_us));
        let dt = monotonic_ns() - t0;
        assert!(dt > 1_000_000 && dt < 200_000_000, "{dt}");
    }
}
