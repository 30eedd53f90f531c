//! Parsers for the text the overhead workloads print: `perf bench sched
//! messaging` and `perf bench sched pipe` (perf 6.1's default format), and
//! cyclictest's histogram file (`--histfile`, rt-tests 2.4). The samples in
//! the tests are real output, captured on the development host.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The number before `[sec]` on perf's "Total time:" line.
pub fn perf_total_secs(out: &str) -> Result<f64> {
    let line = out.lines().find(|l| l.trim_start().starts_with("Total time:")).context("perf output has no \"Total time:\" line")?;
    let v = line.trim_start().trim_start_matches("Total time:").split_whitespace().next().context("perf \"Total time:\" line has no number")?;
    let secs: f64 = v.parse().with_context(|| format!("perf total time {v:?} is not a number"))?;
    if !(secs.is_finite() && secs >= 0.0) {
        bail!("perf total time {secs} is not a duration");
    }
    Ok(secs)
}

/// `perf bench sched pipe`: operations per second and µs per operation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PipeResult {
    pub total_s: f64,
    pub ops_per_s: f64,
    pub usecs_per_op: f64,
}

/// The number before a unit word (`57330 ops/sec`, `17.442700 usecs/op`).
fn value_before(out: &str, unit: &str) -> Result<f64> {
    for l in out.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if let [v, u] = w[..] {
            if u == unit {
                return v.parse().with_context(|| format!("perf: {v:?} before {unit} is not a number"));
            }
        }
    }
    bail!("perf output has no \"... {unit}\" line")
}

pub fn perf_pipe(out: &str) -> Result<PipeResult> {
    let r = PipeResult { total_s: perf_total_secs(out)?, ops_per_s: value_before(out, "ops/sec")?, usecs_per_op: value_before(out, "usecs/op")? };
    if !(r.ops_per_s.is_finite() && r.ops_per_s > 0.0) {
        bail!("perf pipe: {} ops/sec", r.ops_per_s);
    }
    Ok(r)
}

/// cyclictest's latency histogram over all its threads (µs).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CyclicResult {
    pub threads: usize,
    pub samples: u64,
    /// Samples above the histogram's range (counted in the quantiles as
    /// larger than any bucket).
    pub overflows: u64,
    /// None when the 99th percentile lies beyond the histogram (overflows).
    pub p99_us: Option<f64>,
    pub avg_us: f64,
    /// Largest latency of any thread (exact, from cyclictest's summary).
    pub max_us: f64,
}

/// The numbers after "# NAME:" in cyclictest's histogram footer.
fn footer(text: &str, name: &str) -> Result<Vec<u64>> {
    let key = format!("# {name}:");
    let line = text.lines().find(|l| l.starts_with(&key)).with_context(|| format!("cyclictest histogram has no \"{key}\" line"))?;
    line[key.len()..].split_whitespace().map(|v| v.parse::<u64>().with_context(|| format!("cyclictest {name}: {v:?} is not a number"))).collect()
}

/// Parse a `--histfile` (`-h US`): lines "BUCKET_US COUNT_T0 COUNT_T1 ..."
/// then the footer (# Total, # Min/Avg/Max Latencies, # Histogram Overflows).
pub fn cyclictest_hist(text: &str) -> Result<CyclicResult> {
    let mut buckets: Vec<(u64, u64)> = Vec::new();
    for l in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let mut it = l.split_whitespace().map(|v| v.parse::<u64>());
        let (Some(Ok(us)), counts) = (it.next(), it) else { bail!("cyclictest histogram: bad line {l:?}") };
        let n: u64 = counts.map(|c| c.with_context(|| format!("cyclictest histogram: bad line {l:?}"))).sum::<Result<u64>>()?;
        buckets.push((us, n));
    }
    let totals = footer(text, "Total")?;
    let max = footer(text, "Max Latencies")?;
    let avg = footer(text, "Avg Latencies")?;
    let overflows: u64 = footer(text, "Histogram Overflows").unwrap_or_default().iter().sum();
    let samples: u64 = totals.iter().sum();
    if totals.is_empty() || samples == 0 {
        bail!("cyclictest recorded no samples");
    }
    let in_hist: u64 = buckets.iter().map(|b| b.1).sum();
    let p99_us = quantile_bucket(&buckets, in_hist + overflows, 0.99);
    // per-thread averages weighted by their sample counts
    let avg_us = avg.iter().zip(&totals).map(|(a, n)| (*a * *n) as f64).sum::<f64>() / samples as f64;
    Ok(CyclicResult { threads: totals.len(), samples, overflows, p99_us, avg_us, max_us: max.iter().copied().max().unwrap_or(0) as f64 })
}

/// The bucket holding quantile @q of @total samples, of which those beyond
/// the buckets are overflows (then None).
pub fn quantile_bucket(buckets: &[(u64, u64)], total: u64, q: f64) -> Option<f64> {
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0u64;
    for &(us, n) in buckets {
        seen += n;
        if seen >= rank {
            return Some(us as f64);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESSAGING: &str = "# Running 'sched/messaging' benchmark:\n# 20 sender and receiver processes per group\n# 2 groups == 80 processes run\n\n     Total time: 0.143 [sec]\n";
    const PIPE: &str = "# Running 'sched/pipe' benchmark:\n# Executed 20000 pipe operations between two processes\n\n     Total time: 0.348 [sec]\n\n      17.442700 usecs/op\n          57330 ops/sec\n";

    #[test]
    fn perf_outputs() {
        assert_eq!(perf_total_secs(MESSAGING).unwrap(), 0.143);
        let p = perf_pipe(PIPE).unwrap();
        assert_eq!(p, PipeResult { total_s: 0.348, ops_per_s: 57330.0, usecs_per_op: 17.4427 });
        assert!(perf_total_secs("# Running 'sched/messaging' benchmark:\n").is_err());
        assert!(perf_total_secs("     Total time: soon [sec]\n").is_err());
        assert!(perf_pipe(MESSAGING).is_err(), "no ops/sec");
        assert!(perf_pipe("Total time: 1 [sec]\n x usecs/op\n 5 ops/sec\n").is_err());
    }

    /// rt-tests 2.4 `cyclictest -q -D 3 -i 1000 -t 2 --policy=other -h 2000
    /// --histfile=F`, buckets with counts only (the file lists every bucket).
    const HIST: &str = "# Histogram\n000007 000005\t000002\n000008 000022\t000018\n000009 000082\t000062\n000010 002880\t002900\n001999 000000\t000000\n# Total: 000002995 000002989\n# Min Latencies: 00007 00007\n# Avg Latencies: 00017 00021\n# Max Latencies: 03642 05367\n# Histogram Overflows: 00006 00007\n# Histogram Overflow at cycle number:\n# Thread 0: 02992\n# Thread 1: 01888 01890\n";

    #[test]
    fn cyclictest_histogram() {
        let c = cyclictest_hist(HIST).unwrap();
        assert_eq!(c.threads, 2);
        assert_eq!(c.samples, 5984);
        assert_eq!(c.overflows, 13);
        assert_eq!(c.max_us, 5367.0);
        assert_eq!(c.p99_us, Some(10.0));
        assert!((c.avg_us - (17.0 * 2995.0 + 21.0 * 2989.0) / 5984.0).abs() < 1e-9);
        assert!(cyclictest_hist("# Histogram\n").is_err());
        assert!(cyclictest_hist("# Histogram\n000001 x\n# Total: 1\n").is_err());
        let empty = HIST.replace("# Total: 000002995 000002989", "# Total: 0 0");
        assert!(cyclictest_hist(&empty).is_err());
    }

    #[test]
    fn quantiles_of_buckets() {
        let b = [(1, 50), (2, 40), (3, 9)];
        assert_eq!(quantile_bucket(&b, 99, 0.5), Some(1.0));
        assert_eq!(quantile_bucket(&b, 99, 0.99), Some(3.0));
        // 1 overflow out of 100: p99 still in range, p999 not
        assert_eq!(quantile_bucket(&b, 100, 0.99), Some(3.0));
        assert_eq!(quantile_bucket(&b, 100, 0.999), None);
        assert_eq!(quantile_bucket(&b, 0, 0.99), None);
    }
}
