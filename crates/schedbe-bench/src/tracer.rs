//! Running `schedbe trace` next to a phase and reading the figures the
//! harness reports from its JSON (totals.inversion_ns, inversion_frac, ...).

use serde::{Deserialize, Serialize};

use anyhow::{Context, Result};

/// The tracer figures the summary uses. CPU times in ns over all CPUs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TraceFigures {
    pub window_start_ns: u64,
    pub window_end_ns: u64,
    pub duration_ns: u64,
    pub cpu_ns: u64,
    pub lc_ns: u64,
    pub be_ns: u64,
    pub other_ns: u64,
    pub idle_ns: u64,
    pub inversion_ns: u64,
    pub inversion_frac: f64,
    /// Part of the inversion during which the LC task waited on another
    /// CPU's runqueue (older tracers: 0).
    #[serde(default)]
    pub inversion_elsewhere_ns: u64,
    /// (grace period in us, inversion fraction with it): how much of the
    /// inversion comes from short waits.
    #[serde(default)]
    pub inversion_by_grace: Vec<(u64, f64)>,
    pub idle_while_lc_waits_frac: f64,
    pub lc_wait_mean_us: f64,
    pub lc_wait_p99_us: f64,
    pub dropped_events: u64,
    /// BE CPU time as a share of the CPU time LC (and RT "other") left
    /// over: be / (cpu - lc - other). None when nothing was left.
    pub be_share_of_leftover: Option<f64>,
    pub warnings: Vec<String>,
    /// Seconds from launching the tracer to its window opening (set by the runner).
    #[serde(default)]
    pub startup_s: Option<f64>,
}

fn u(v: &serde_json::Value, ptr: &str) -> Result<u64> {
    v.pointer(ptr).and_then(|x| x.as_u64()).with_context(|| format!("tracer report: missing {ptr}"))
}

fn f(v: &serde_json::Value, ptr: &str) -> Result<f64> {
    v.pointer(ptr).and_then(|x| x.as_f64()).with_context(|| format!("tracer report: missing {ptr}"))
}

/// Parse the tracer's JSON report.
pub fn parse_report(json: &str) -> Result<TraceFigures> {
    let v: serde_json::Value = serde_json::from_str(json).context("tracer report is not JSON")?;
    let cpu_ns = u(&v, "/totals/cpu_ns")?;
    let lc_ns = u(&v, "/totals/lc_ns")?;
    let be_ns = u(&v, "/totals/be_ns")?;
    let other_ns = u(&v, "/totals/other_ns")?;
    let leftover = cpu_ns.saturating_sub(lc_ns).saturating_sub(other_ns);
    Ok(TraceFigures {
        window_start_ns: u(&v, "/window_start_ns")?,
        window_end_ns: u(&v, "/window_end_ns")?,
        duration_ns: u(&v, "/duration_ns")?,
        cpu_ns,
        lc_ns,
        be_ns,
        other_ns,
        idle_ns: u(&v, "/totals/idle_ns")?,
        inversion_ns: u(&v, "/totals/inversion_ns")?,
        inversion_frac: f(&v, "/inversion_frac")?,
        inversion_elsewhere_ns: u(&v, "/totals/inversion_elsewhere_ns").unwrap_or(0),
        inversion_by_grace: v
            .pointer("/inversion_by_grace")
            .and_then(|g| g.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|r| Some((r.get("grace_us")?.as_u64()?, r.get("inversion_frac")?.as_f64()?)))
                    .collect()
            })
            .unwrap_or_default(),
        idle_while_lc_waits_frac: f(&v, "/idle_while_lc_waits_frac").unwrap_or(f64::NAN),
        lc_wait_mean_us: f(&v, "/lc_wait_us/mean").unwrap_or(f64::NAN),
        lc_wait_p99_us: f(&v, "/lc_wait_us/p99").unwrap_or(f64::NAN),
        dropped_events: u(&v, "/dropped_events").unwrap_or(0),
        be_share_of_leftover: if leftover > 0 { Some(be_ns as f64 / leftover as f64) } else { None },
        warnings: v
            .pointer("/warnings")
            .and_then(|w| w.as_array())
            .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
            .unwrap_or_default(),
        startup_s: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_report() {
        let js = r#"{"duration_ns":3000000000,"totals":{"cpu_ns":6000,"lc_ns":3000,"be_ns":2000,
            "idle_ns":900,"other_ns":100,"inversion_ns":60,"idle_while_lc_waits_ns":1,"lc_wait_ns":5,"lc_waits":2},
            "inversion_frac":0.01,"inversion_by_grace":[{"grace_us":0,"inversion_ns":90,"inversion_frac":0.015},{"grace_us":200,"inversion_ns":6,"inversion_frac":0.001}],"idle_while_lc_waits_frac":0.002,"lc_wait_us":{"count":2,"mean":3.5,"p50":3,"p99":4,"max":4},
            "window_start_ns":10,"window_end_ns":3000000010,"dropped_events":0,"warnings":["w"]}"#;
        let t = parse_report(js).unwrap();
        assert_eq!(t.inversion_ns, 60);
        assert_eq!(t.inversion_frac, 0.01);
        assert_eq!(t.inversion_by_grace, vec![(0, 0.015), (200, 0.001)]);
        assert_eq!(t.inversion_elsewhere_ns, 0, "absent in older reports");
        assert!((t.be_share_of_leftover.unwrap() - 2000.0 / 2900.0).abs() < 1e-12);
        assert_eq!(t.warnings, vec!["w".to_string()]);
        assert!(parse_report("{}").is_err());
        assert!(parse_report("nope").is_err());
    }
}
