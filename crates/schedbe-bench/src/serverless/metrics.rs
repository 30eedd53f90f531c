//! What one serverless run measured, from the generator's stamps (latency
//! against target, per group), the agent's JSON lines (overload detection,
//! hotspot precision) and the tracer's per-period figures (the floor). Pure
//! functions of their inputs, so they are unit tested.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::gen::Outcome;
use super::model::{Group, Workload};
use super::trace::Request;
use crate::stats::{summarize_ns, LatencySummary};

/// Requests of one group that arrived in the measurement window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupFig {
    pub arrived: u64,
    /// Replied within their latency target.
    pub met: u64,
    /// Replied at all (before the drain ended).
    pub completed: u64,
    /// met / arrived, percent (None with no arrivals).
    pub attainment_pct: Option<f64>,
    /// CPU demand of the completed requests, CPU-seconds per second of window.
    pub work_cpus: f64,
    /// Latency of the completed requests.
    pub latency: Option<LatencySummary>,
}

/// One request of the window, for the per-function CDFs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    pub function: usize,
    pub group: Group,
    /// None: no reply.
    pub latency_us: Option<f64>,
    pub target_us: f64,
}

/// Attainment per group over requests arriving in `[from_ns, to_ns)` of the
/// trace (relative to its start `t0_ns`).
pub fn attainment(w: &Workload, reqs: &[Request], out: &Outcome, t0_ns: u64, from_ns: u64, to_ns: u64) -> (BTreeMap<String, GroupFig>, Vec<Sample>) {
    let win_s = (to_ns.saturating_sub(from_ns)) as f64 / 1e9;
    let mut lat: HashMap<&'static str, Vec<u64>> = HashMap::new();
    let mut figs: BTreeMap<String, GroupFig> = BTreeMap::new();
    let mut samples = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        if r.t_ns < from_ns || r.t_ns >= to_ns {
            continue;
        }
        let Some(f) = w.functions.get(r.function) else { continue };
        let g = w.group(f);
        let done = out.done_ns.get(i).copied().unwrap_or(0);
        let l_ns = (done != 0).then(|| done.saturating_sub(t0_ns + r.t_ns));
        for key in [g.name(), "all"] {
            let e = figs.entry(key.to_string()).or_default();
            e.arrived += 1;
            if let Some(l) = l_ns {
                e.completed += 1;
                e.work_cpus += r.service_us / 1e6 / win_s.max(1e-9);
                if l as f64 <= r.target_us * 1e3 {
                    e.met += 1;
                }
                lat.entry(if key == "all" { "all" } else { g.name() }).or_default().push(l);
            }
        }
        samples.push(Sample { function: r.function, group: g, latency_us: l_ns.map(|l| l as f64 / 1e3), target_us: r.target_us });
    }
    for (k, e) in figs.iter_mut() {
        e.attainment_pct = (e.arrived > 0).then(|| 100.0 * e.met as f64 / e.arrived as f64);
        e.latency = lat.remove(k.as_str()).map(summarize_ns);
    }
    (figs, samples)
}

/// The agent's view of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentFig {
    pub reports: u64,
    /// Reports (from the trace's start) that said overloaded.
    pub overloaded_reports: u64,
    /// Seconds from the trace's start to the first overloaded report.
    pub first_overload_s: Option<f64>,
    /// The first report from the trace's start already said overloaded (the
    /// state came from before the trace: first_overload_s is no detection).
    #[serde(default)]
    pub overloaded_at_start: bool,
    /// Hotspots named (one per report and sandbox), and how many of them
    /// were top-band functions.
    pub hotspots_named: u64,
    pub hotspots_top_band: u64,
    /// hotspots_top_band / hotspots_named (None when none was named).
    pub precision: Option<f64>,
    /// The share of the named hotspots that are among the functions with
    /// the most offered load (as many as the top band has): the agent
    /// names by load, and bands are cut by arrival rate.
    #[serde(default)]
    pub precision_by_load: Option<f64>,
    /// Distinct functions named, by name.
    pub named: Vec<String>,
}

/// What the agent's precision is judged against, per function.
#[derive(Debug, Clone, PartialEq)]
pub struct FnClass {
    pub name: String,
    /// In the top demand band (by arrival rate).
    pub top_band: bool,
    /// Among the band-size functions with the most offered load.
    pub top_load: bool,
}

/// Evaluate the agent's JSON lines. `started_ns` is when the agent started
/// (its `t_s` counts from there), `t0_ns` the trace's start; `function_of`
/// maps a sandbox cgroup (as the agent prints it) to its function.
pub fn agent(lines: &str, started_ns: u64, t0_ns: u64, function_of: &HashMap<String, FnClass>) -> AgentFig {
    let mut a = AgentFig::default();
    let mut top_load = 0u64;
    let mut named = std::collections::BTreeSet::new();
    let mut in_window = false;
    for l in lines.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else { continue };
        match v.get("kind").and_then(|k| k.as_str()) {
            Some("node") => {
                let t_ns = started_ns + (v["t_s"].as_f64().unwrap_or(0.0) * 1e9) as u64;
                in_window = t_ns >= t0_ns;
                if !in_window {
                    continue;
                }
                a.reports += 1;
                if a.reports == 1 && v["overloaded"].as_bool() == Some(true) {
                    a.overloaded_at_start = true;
                }
                if v["overloaded"].as_bool() == Some(true) {
                    a.overloaded_reports += 1;
                    if a.first_overload_s.is_none() {
                        a.first_overload_s = Some((t_ns - t0_ns) as f64 / 1e9);
                    }
                }
            }
            Some("sandbox") if in_window && !v["suggestion"].is_null() => {
                let cg = v["cgroup"].as_str().unwrap_or("").trim_start_matches('/').to_string();
                a.hotspots_named += 1;
                if let Some(f) = function_of.get(&cg) {
                    named.insert(f.name.clone());
                    a.hotspots_top_band += u64::from(f.top_band);
                    top_load += u64::from(f.top_load);
                } else {
                    named.insert(cg);
                }
            }
            _ => {}
        }
    }
    a.precision = (a.hotspots_named > 0).then(|| a.hotspots_top_band as f64 / a.hotspots_named as f64);
    a.precision_by_load = (a.hotspots_named > 0).then(|| top_load as f64 / a.hotspots_named as f64);
    a.named = named.into_iter().collect();
    a
}

/// The floor, from the tracer's per-period figures of one cgroup: over the
/// periods in which its tasks waited at least `backlog_ms` (summed), the
/// least CPU it got.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FloorFig {
    pub periods: u64,
    pub backlogged_periods: u64,
    /// Least CPU (ms) in a backlogged period; None if none was backlogged.
    pub min_cpu_ms: Option<f64>,
    /// The tracer's wakeup latency (woken to switched in) of its tasks.
    pub wakeup_max_us: Option<f64>,
    pub wakeup_p99_us: Option<f64>,
}

/// Floor figures per traced cgroup (keys as given to the tracer).
pub fn floors(report: &serde_json::Value, backlog_ms: f64) -> BTreeMap<String, FloorFig> {
    let mut out = BTreeMap::new();
    let Some(m) = report.get("cgroups").and_then(|c| c.as_object()) else { return out };
    for (k, c) in m {
        let mut f = FloorFig::default();
        for p in c.get("periods").and_then(|p| p.as_array()).into_iter().flatten() {
            f.periods += 1;
            let (cpu, wait) = (p["cpu_ms"].as_f64().unwrap_or(0.0), p["wait_ms"].as_f64().unwrap_or(0.0));
            if wait >= backlog_ms {
                f.backlogged_periods += 1;
                f.min_cpu_ms = Some(f.min_cpu_ms.map_or(cpu, |m: f64| m.min(cpu)));
            }
        }
        f.wakeup_max_us = c.pointer("/wakeup_latency/max_us").and_then(|x| x.as_f64());
        f.wakeup_p99_us = c.pointer("/wakeup_latency/p99_us").and_then(|x| x.as_f64());
        out.insert(k.clone(), f);
    }
    out
}

/// CPU time (user + system, all threads) of process `pid`, seconds.
pub fn proc_cpu_s(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_proc_stat_cpu(&s)
}

fn parse_proc_stat_cpu(stat: &str) -> Option<f64> {
    // fields after "(comm)": state is the first, utime and stime the 12th and 13th
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}

/// Total context switches since boot (/proc/stat `ctxt`).
pub fn ctxt() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    s.lines().find_map(|l| l.strip_prefix("ctxt ")).and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serverless::model::ModelParams;

    fn workload() -> Workload {
        let p = ModelParams { bands: 2, service_min_ms: 1.0, service_max_ms: 1.0, ..Default::default() };
        Workload::with_rates(&p, 1, vec![("light".into(), 1.0), ("heavy".into(), 100.0)]).unwrap()
    }

    fn req(t_ms: u64, f: usize) -> Request {
        Request { t_ns: t_ms * 1_000_000, function: f, service_us: 1000.0, target_us: 5000.0 }
    }

    #[test]
    fn attainment_counts_met_missed_lost_and_the_window() {
        let w = workload();
        let reqs = vec![req(0, 0), req(100, 0), req(200, 1), req(300, 1), req(400, 1), req(2000, 1)];
        let t0 = 1_000_000_000;
        let at = |r: usize, lat_ms: u64| t0 + reqs[r].t_ns + lat_ms * 1_000_000;
        // r0 outside the window; r1 met (4 ms); r2 missed (6 ms); r3 lost; r4 met; r5 after the window
        let out = Outcome { done_ns: vec![at(0, 1), at(1, 4), at(2, 6), 0, at(4, 5), at(5, 1)], send_lag_ns: vec![0; 6] };
        let (g, s) = attainment(&w, &reqs, &out, t0, 50_000_000, 1_000_000_000);
        let low = &g["group-low"];
        let high = &g["group-high"];
        assert_eq!((low.arrived, low.met, low.completed), (1, 1, 1));
        assert_eq!((high.arrived, high.met, high.completed), (3, 1, 2));
        assert_eq!(g["all"].arrived, 4);
        assert!((high.attainment_pct.unwrap() - 100.0 / 3.0).abs() < 1e-9);
        // two completed 1 ms requests in a 0.95 s window
        assert!((high.work_cpus - 0.002 / 0.95).abs() < 1e-9);
        assert_eq!(s.len(), 4);
        assert_eq!(s.iter().filter(|x| x.latency_us.is_none()).count(), 1);
    }

    #[test]
    fn agent_lines_give_delay_and_precision() {
        let mut map = HashMap::new();
        map.insert("kubepods.slice/a".to_string(), FnClass { name: "fn-a".into(), top_band: true, top_load: false });
        map.insert("kubepods.slice/b".to_string(), FnClass { name: "fn-b".into(), top_band: false, top_load: true });
        let lines = r#"{"kind":"node","t_s":1.0,"overloaded":false}
{"kind":"sandbox","cgroup":"kubepods.slice/a","suggestion":{"cpus":1}}
{"kind":"node","t_s":3.0,"overloaded":false}
{"kind":"node","t_s":5.0,"overloaded":true}
{"kind":"sandbox","cgroup":"kubepods.slice/a","suggestion":{"cpus":1}}
{"kind":"sandbox","cgroup":"kubepods.slice/b","suggestion":null}
{"kind":"node","t_s":6.0,"overloaded":true}
{"kind":"sandbox","cgroup":"/kubepods.slice/a","suggestion":{"cpus":2}}
{"kind":"sandbox","cgroup":"kubepods.slice/b","suggestion":{"cpus":1}}
"#;
        // agent started at 10 s, the trace at 12 s: the 1.0 s report is before it
        let a = agent(lines, 10_000_000_000, 12_000_000_000, &map);
        assert_eq!(a.reports, 3);
        assert_eq!(a.overloaded_reports, 2);
        assert_eq!(a.first_overload_s, Some(3.0));
        assert!(!a.overloaded_at_start);
        assert_eq!((a.hotspots_named, a.hotspots_top_band), (3, 2));
        assert_eq!(a.precision_by_load, Some(1.0 / 3.0));
        assert_eq!(a.named, vec!["fn-a".to_string(), "fn-b".to_string()]);
    }

    #[test]
    fn process_cpu_time() {
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 0 0";
        assert_eq!(parse_proc_stat_cpu(line), Some(300.0 / hz));
        assert_eq!(parse_proc_stat_cpu("garbage"), None);
        assert!(proc_cpu_s(std::process::id()).is_some());
    }

    #[test]
    fn floor_takes_backlogged_periods_only() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"cgroups":{"p":{"periods":[{"cpu_ms":0,"wait_ms":10},{"cpu_ms":40,"wait_ms":900},{"cpu_ms":7,"wait_ms":600}],
            "wakeup_latency":{"max_us":1500.0,"p99_us":900.0}}}}"#,
        )
        .unwrap();
        let f = &floors(&v, 500.0)["p"];
        assert_eq!((f.periods, f.backlogged_periods, f.min_cpu_ms), (3, 2, Some(7.0)));
        assert_eq!(f.wakeup_max_us, Some(1500.0));
    }
}
