//! Open-loop load: Poisson arrivals at a rate derived from a target
//! utilization, and per-request service demands (fixed or exponential).

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};

/// Service demand of one request, in microseconds of CPU.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum ServiceDist {
    Fixed(f64),
    Exp(f64),
}

impl ServiceDist {
    pub fn mean_us(&self) -> f64 {
        match *self {
            ServiceDist::Fixed(m) | ServiceDist::Exp(m) => m,
        }
    }
}

impl FromStr for ServiceDist {
    type Err = anyhow::Error;
    /// `fixed:US`, `exp:US`, or a bare number (fixed).
    fn from_str(s: &str) -> Result<Self> {
        let (kind, num) = s.split_once(':').unwrap_or(("fixed", s));
        let us: f64 = num.trim().parse().with_context(|| format!("service {s:?}: bad number of microseconds"))?;
        if !(us.is_finite() && (1.0..=10_000_000.0).contains(&us)) {
            bail!("service {s:?}: mean must be in [1, 10000000] microseconds");
        }
        match kind {
            "fixed" => Ok(ServiceDist::Fixed(us)),
            "exp" => Ok(ServiceDist::Exp(us)),
            _ => bail!("service {s:?}: expected fixed:US or exp:US"),
        }
    }
}

impl fmt::Display for ServiceDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceDist::Fixed(m) => write!(f, "fixed:{m}"),
            ServiceDist::Exp(m) => write!(f, "exp:{m}"),
        }
    }
}

/// Request rate (per second) that keeps `ncpus` cores `util` busy with
/// requests of `mean_service_us`: rate = util * ncpus / mean_service.
pub fn rate_for_util(util: f64, ncpus: usize, mean_service_us: f64) -> Result<f64> {
    if !(util.is_finite() && util > 0.0 && util <= 4.0) {
        bail!("utilization must be in (0, 4], got {util}");
    }
    if ncpus == 0 {
        bail!("no CPUs for the server");
    }
    if !(mean_service_us.is_finite() && mean_service_us > 0.0) {
        bail!("mean service time must be positive, got {mean_service_us}");
    }
    Ok(util * ncpus as f64 / (mean_service_us * 1e-6))
}

/// Utilization a rate implies (inverse of [`rate_for_util`]).
pub fn util_for_rate(rate: f64, ncpus: usize, mean_service_us: f64) -> f64 {
    rate * mean_service_us * 1e-6 / ncpus.max(1) as f64
}

/// The open-loop schedule: intended send times (Poisson process) and
/// service demands, deterministic for a seed.
pub struct Arrivals {
    gap: Exp<f64>,
    service: ServiceDist,
    service_exp: Option<Exp<f64>>,
    rng: StdRng,
    next_ns: f64,
}

impl Arrivals {
    pub fn new(rate_per_s: f64, service: ServiceDist, start_ns: u64, seed: u64) -> Result<Self> {
        if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
            bail!("arrival rate must be positive, got {rate_per_s}");
        }
        let gap = Exp::new(rate_per_s / 1e9).context("arrival distribution")?;
        let service_exp = match service {
            ServiceDist::Exp(m) => Some(Exp::new(1.0 / m).context("service distribution")?),
            ServiceDist::Fixed(_) => None,
        };
        let mut a = Arrivals { gap, service, service_exp, rng: StdRng::seed_from_u64(seed), next_ns: start_ns as f64 };
        // The first arrival is one gap after start, like every other.
        a.next_ns += a.gap.sample(&mut a.rng);
        Ok(a)
    }
}

impl Iterator for Arrivals {
    /// (intended send time in ns, service demand in ns)
    type Item = (u64, u64);
    fn next(&mut self) -> Option<(u64, u64)> {
        let t = self.next_ns;
        let us = match (self.service, &self.service_exp) {
            (ServiceDist::Fixed(m), _) => m,
            (ServiceDist::Exp(_), Some(e)) => e.sample(&mut self.rng),
            (ServiceDist::Exp(m), None) => m,
        };
        self.next_ns += self.gap.sample(&mut self.rng);
        Some((t as u64, (us * 1000.0).round().max(1.0) as u64))
    }
}

/// The arrivals of `[start, start + period)` again and again, shifted by a
/// period each time, until `end` (exclusive). With the period equal to the
/// LC-alone phase, the BE phase sees exactly the requests the LC-alone phase
/// saw (common random numbers): the before/after comparison is then not
/// blurred by the Poisson process's own bursts.
pub fn repeated(first: impl Iterator<Item = (u64, u64)>, start_ns: u64, period_ns: u64, end_ns: u64) -> Vec<(u64, u64)> {
    let base: Vec<(u64, u64)> = first.take_while(|&(t, _)| t < start_ns + period_ns && t < end_ns).collect();
    let mut out = Vec::with_capacity(base.len() * 2);
    let mut k = 0u64;
    'outer: loop {
        for &(t, s) in &base {
            let tt = t + k * period_ns;
            if tt >= end_ns {
                break 'outer;
            }
            out.push((tt, s));
        }
        k += 1;
        if base.is_empty() || period_ns == 0 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_arrivals() {
        let a = Arrivals::new(100.0, ServiceDist::Fixed(10.0), 1_000, 3).unwrap();
        let r = repeated(a, 1_000, 1_000_000_000, 1_000 + 2_500_000_000);
        let first: Vec<_> = r.iter().filter(|x| x.0 < 1_000 + 1_000_000_000).collect();
        let second: Vec<_> = r.iter().filter(|x| x.0 >= 1_000 + 1_000_000_000 && x.0 < 1_000 + 2_000_000_000).collect();
        assert_eq!(first.len(), second.len());
        assert!(first.iter().zip(&second).all(|(a, b)| b.0 - a.0 == 1_000_000_000 && a.1 == b.1));
        assert!(r.windows(2).all(|w| w[1].0 >= w[0].0));
        assert!(r.last().unwrap().0 < 1_000 + 2_500_000_000);
        assert!(r.len() > first.len() * 2);
    }

    #[test]
    fn rate_math() {
        // 85% of 2 cores with 2 ms requests: 850 req/s.
        let r = rate_for_util(0.85, 2, 2000.0).unwrap();
        assert!((r - 850.0).abs() < 1e-9);
        assert!((util_for_rate(r, 2, 2000.0) - 0.85).abs() < 1e-12);
        assert!(rate_for_util(0.0, 2, 2000.0).is_err());
        assert!(rate_for_util(f64::NAN, 2, 2000.0).is_err());
        assert!(rate_for_util(0.5, 0, 2000.0).is_err());
        assert!(rate_for_util(0.5, 2, 0.0).is_err());
    }

    #[test]
    fn service_parse() {
        assert_eq!("2000".parse::<ServiceDist>().unwrap(), ServiceDist::Fixed(2000.0));
        assert_eq!("exp:500".parse::<ServiceDist>().unwrap(), ServiceDist::Exp(500.0));
        assert_eq!("fixed:3".parse::<ServiceDist>().unwrap().to_string(), "fixed:3");
        for bad in ["", "exp:", "norm:5", "0", "exp:-1", "fixed:1e9"] {
            assert!(bad.parse::<ServiceDist>().is_err(), "{bad}");
        }
    }

    #[test]
    fn poisson_arrivals_have_the_right_rate_and_are_reproducible() {
        let rate = 850.0;
        let n = 200_000;
        let a: Vec<_> = Arrivals::new(rate, ServiceDist::Exp(2000.0), 0, 1).unwrap().take(n).collect();
        let span_s = a[n - 1].0 as f64 / 1e9;
        let measured = n as f64 / span_s;
        assert!((measured / rate - 1.0).abs() < 0.01, "{measured}");
        let mean_service_us = a.iter().map(|x| x.1 as f64).sum::<f64>() / n as f64 / 1000.0;
        assert!((mean_service_us / 2000.0 - 1.0).abs() < 0.01, "{mean_service_us}");
        // Exponential gaps: coefficient of variation ~1.
        let gaps: Vec<f64> = a.windows(2).map(|w| (w[1].0 - w[0].0) as f64).collect();
        let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - m) * (g - m)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((sd / m - 1.0).abs() < 0.02, "cv {}", sd / m);
        let b: Vec<_> = Arrivals::new(rate, ServiceDist::Exp(2000.0), 0, 1).unwrap().take(100).collect();
        assert_eq!(&a[..100], &b[..]);
        let c: Vec<_> = Arrivals::new(rate, ServiceDist::Fixed(2000.0), 0, 2).unwrap().take(10).collect();
        assert!(c.iter().all(|x| x.1 == 2_000_000));
        assert!(c.windows(2).all(|w| w[1].0 >= w[0].0));
    }
}
