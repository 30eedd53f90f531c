//! The request trace of a workload: each function's invocations as a Poisson
//! process at its rate (inter-arrival CV 1; ATC'20 Fig. 6 shows many apps
//! burstier than that and timers near 0, so Poisson is a middle choice), each
//! with a CPU demand drawn around the function's mean and a latency target.

use std::io::Write;

use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use serde::Serialize;

use super::dist::stream_seed;
use super::model::Workload;

/// Requests held in memory at most (about 40 bytes each).
pub const MAX_REQUESTS: usize = 20_000_000;

/// One invocation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Request {
    /// Arrival time from the start of the trace, ns.
    pub t_ns: u64,
    /// Index into the workload's functions.
    pub function: usize,
    /// CPU demand, µs.
    pub service_us: f64,
    /// Latency target (arrival to completion), µs.
    pub target_us: f64,
}

/// Every invocation of `[0, duration_s)`, in arrival order (ties by
/// function). Function i draws from stream i of `seed`, so its requests do
/// not depend on the other functions' rates.
pub fn requests(w: &Workload, duration_s: f64, seed: u64) -> Result<Vec<Request>> {
    if !(duration_s.is_finite() && duration_s > 0.0 && duration_s <= 86_400.0) {
        bail!("duration must be in (0, 86400] seconds, got {duration_s}");
    }
    let expected: f64 = w.functions.iter().map(|f| f.rate_per_s * duration_s).sum();
    if expected > MAX_REQUESTS as f64 {
        bail!("{expected:.0} requests expected in {duration_s} s: more than {MAX_REQUESTS}; shorten the trace or lower the rates");
    }
    let end_ns = duration_s * 1e9;
    let mut out = Vec::with_capacity(expected.ceil() as usize + 16);
    for f in &w.functions {
        if f.rate_per_s <= 0.0 {
            continue;
        }
        let mut rng = StdRng::seed_from_u64(stream_seed(seed, f.id as u64));
        let gap = Exp::new(f.rate_per_s / 1e9).with_context(|| format!("function {}: arrival distribution", f.name))?;
        let demand = w.demand(f)?;
        let mut t = gap.sample(&mut rng);
        while t < end_ns {
            if out.len() >= MAX_REQUESTS {
                bail!("more than {MAX_REQUESTS} requests; shorten the trace or lower the rates");
            }
            // At least 1 µs: the log-normal has no zero, but rounding might.
            let service_us = demand.as_ref().map_or(f.service_us, |d| d.sample(&mut rng)).max(1.0);
            out.push(Request { t_ns: t as u64, function: f.id, service_us, target_us: w.params.latency_target_us(service_us) });
            t += gap.sample(&mut rng);
        }
    }
    out.sort_by_key(|r| (r.t_ns, r.function));
    Ok(out)
}

/// The trace as CSV: `t_ns,function,band,group,service_us,target_us`.
pub fn write_csv(w: &Workload, reqs: &[Request], mut out: impl Write) -> Result<()> {
    writeln!(out, "t_ns,function,band,group,service_us,target_us")?;
    for r in reqs {
        let f = w.functions.get(r.function).with_context(|| format!("request names function {} of {}", r.function, w.functions.len()))?;
        writeln!(out, "{},{},{},{},{:.1},{:.1}", r.t_ns, f.name, f.band, w.group(f).name(), r.service_us, r.target_us)?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serverless::model::ModelParams;

    fn two_functions(cv: f64) -> Workload {
        let p = ModelParams { request_cv: cv, service_min_ms: 2.0, service_max_ms: 2.0, ..Default::default() };
        Workload::with_rates(&p, 3, vec![("slow".into(), 10.0), ("fast".into(), 1000.0)]).unwrap()
    }

    #[test]
    fn rates_demands_and_targets() {
        let w = two_functions(0.5);
        let r = requests(&w, 20.0, 9).unwrap();
        assert!(r.windows(2).all(|p| p[0].t_ns <= p[1].t_ns));
        let n = |id| r.iter().filter(|q| q.function == id).count() as f64;
        // 200 and 20000 expected: Poisson counts within 4 standard deviations.
        assert!((n(0) - 200.0).abs() < 4.0 * 200f64.sqrt(), "{}", n(0));
        assert!((n(1) - 20_000.0).abs() < 4.0 * 20_000f64.sqrt(), "{}", n(1));
        let fast: Vec<f64> = r.iter().filter(|q| q.function == 1).map(|q| q.service_us).collect();
        let mean = fast.iter().sum::<f64>() / fast.len() as f64;
        assert!((mean / 2_000.0 - 1.0).abs() < 0.03, "mean demand {mean}");
        assert!(r.iter().all(|q| q.target_us == 5.0 * q.service_us && q.t_ns < 20_000_000_000));
    }

    #[test]
    fn streams_are_per_function_and_fixed_demand_is_exact() {
        let w = two_functions(0.0);
        let a = requests(&w, 5.0, 1).unwrap();
        let mut w2 = w.clone();
        w2.functions[1].rate_per_s = 10.0;
        let b = requests(&w2, 5.0, 1).unwrap();
        let slow = |v: &[Request]| v.iter().filter(|q| q.function == 0).cloned().collect::<Vec<_>>();
        assert_eq!(slow(&a), slow(&b), "function 0 does not see function 1's rate");
        assert!(a.iter().all(|q| q.service_us == 2_000.0));
        let mut csv = Vec::new();
        write_csv(&w, &a[..2], &mut csv).unwrap();
        let text = String::from_utf8(csv).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(text.lines().nth(1).unwrap().ends_with(",2000.0,10000.0"), "{text}");
    }

    #[test]
    fn bad_durations_and_huge_traces_are_refused() {
        let w = two_functions(0.5);
        assert!(requests(&w, 0.0, 1).is_err() && requests(&w, f64::INFINITY, 1).is_err());
        let e = requests(&w, 86_400.0, 1).unwrap_err().to_string();
        assert!(e.contains("requests expected"), "{e}");
    }
}
