//! What the agent publishes after a sample, in two forms:
//! - JSON lines: one `{"kind":"node",...}` line, then one
//!   `{"kind":"sandbox",...}` line per sandbox (cgroup, pod, load, and the
//!   suggestion when it is a hotspot);
//! - the Prometheus text exposition format (version 0.0.4): HELP and TYPE
//!   lines per metric family, label values escaped (`\\`, `\"`, `\n`).

use std::fmt::Write;

use anyhow::Result;
use serde::Serialize;

use super::hotspot::{Assessment, Rates, Suggestion};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeReport {
    /// Seconds since the agent started (monotonic).
    pub t_s: f64,
    pub cpus: u64,
    pub psi_some_avg10: f64,
    /// PSI cpu some and the CPUs' busy share over the last interval (what
    /// overload is decided on).
    #[serde(flatten)]
    pub rates: Rates,
    pub runnable_avg: f64,
    #[serde(flatten)]
    pub assessment: Assessment,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SandboxReport {
    pub cgroup: String,
    pub pod: String,
    /// Decaying load in CPUs; null until the sandbox has been sampled twice.
    pub load_cpus: Option<f64>,
    pub usage_us: u64,
    pub limit_cpus: Option<f64>,
    pub psi_some_avg10: Option<f64>,
    pub suggestion: Option<Suggestion>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub node: NodeReport,
    pub sandboxes: Vec<SandboxReport>,
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Line<'a> {
    Node(&'a NodeReport),
    Sandbox(&'a SandboxReport),
}

/// The report as JSON lines, each ending in a newline.
pub fn json_lines(r: &Report) -> Result<String> {
    let mut out = serde_json::to_string(&Line::Node(&r.node))? + "\n";
    for s in &r.sandboxes {
        out += &serde_json::to_string(&Line::Sandbox(s))?;
        out.push('\n');
    }
    Ok(out)
}

/// A label value escaped for the text format.
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A sample value: Go's float syntax for the special values.
fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

struct Family<'a> {
    name: &'a str,
    help: &'a str,
    kind: &'a str,
    samples: Vec<(String, f64)>,
}

fn labels(s: &SandboxReport) -> String {
    format!("{{cgroup=\"{}\",pod=\"{}\"}}", escape_label(&s.cgroup), escape_label(&s.pod))
}

/// The report in the Prometheus text format.
pub fn prometheus(r: &Report) -> String {
    let n = &r.node;
    let a = &n.assessment;
    let node = |name, help, v: f64| Family { name, help, kind: "gauge", samples: vec![(String::new(), v)] };
    let per = |name, help, kind, f: &dyn Fn(&SandboxReport) -> Option<f64>| Family {
        name,
        help,
        kind,
        samples: r.sandboxes.iter().filter_map(|s| f(s).map(|v| (labels(s), v))).collect(),
    };
    let families = [
        node("schedbe_agent_overloaded", "1 while the node is overloaded (PSI or run queue, with hysteresis)", a.overloaded as u8 as f64),
        node("schedbe_agent_cpus", "CPUs of the node", n.cpus as f64),
        node("schedbe_agent_cpu_pressure_some_avg10", "PSI cpu some avg10 of the node, percent", n.psi_some_avg10),
        node("schedbe_agent_runnable_tasks", "Runnable tasks, smoothed with the load half-life", n.runnable_avg),
        node("schedbe_agent_demand_cpus", "Estimated CPU demand of the node, max(sum of loads, runnable tasks)", a.demand_cpus),
        node("schedbe_agent_excess_cpus", "Demand above the target utilisation, CPUs (negative: headroom)", a.excess_cpus),
        node("schedbe_agent_hotspots_cover_excess", "1 when the named hotspots' demand covers the excess", a.covered as u8 as f64),
        per("schedbe_agent_sandbox_load_cpus", "Decaying CPU load of the sandbox (~4 s horizon), CPUs", "gauge", &|s| s.load_cpus),
        per("schedbe_agent_sandbox_usage_seconds_total", "CPU time used by the sandbox (cpu.stat usage_usec)", "counter", &|s| {
            Some(s.usage_us as f64 / 1e6)
        }),
        per("schedbe_agent_sandbox_cpu_pressure_some_avg10", "PSI cpu some avg10 of the sandbox, percent", "gauge", &|s| s.psi_some_avg10),
        per("schedbe_agent_hotspot_demand_cpus", "Estimated CPU demand of a hotspot sandbox", "gauge", &|s| {
            s.suggestion.as_ref().map(|x| x.demand_cpus)
        }),
        per("schedbe_agent_hotspot_suggested_cpus", "CPUs at which the hotspot would run at the target utilisation", "gauge", &|s| {
            s.suggestion.as_ref().map(|x| x.cpus)
        }),
        per("schedbe_agent_hotspot_suggested_replicas", "Replicas that provide the suggested CPUs", "gauge", &|s| {
            s.suggestion.as_ref().map(|x| x.replicas as f64)
        }),
    ];
    let mut out = String::new();
    for f in families {
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        for (l, v) in f.samples {
            let _ = writeln!(out, "{}{} {}", f.name, l, value(v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let assessment = Assessment {
            overloaded: true,
            demand_cpus: 6.0,
            target_cpus: 3.2,
            excess_cpus: 2.8,
            hotspots: Vec::new(),
            covered: true,
        };
        let sug = Suggestion { demand_cpus: 3.0, cpus: 3.8, replicas: 4 };
        Report {
            node: NodeReport { t_s: 2.0, cpus: 4, psi_some_avg10: 25.0, rates: Default::default(), runnable_avg: 6.0, assessment },
            sandboxes: vec![
                SandboxReport {
                    cgroup: "kubepods/pod\"a\"\\x".into(),
                    pod: "a\nb".into(),
                    load_cpus: Some(2.0),
                    usage_us: 1_500_000,
                    limit_cpus: None,
                    psi_some_avg10: Some(3.5),
                    suggestion: Some(sug),
                },
                SandboxReport {
                    cgroup: "kubepods/podb".into(),
                    pod: "b".into(),
                    load_cpus: None,
                    usage_us: 0,
                    limit_cpus: Some(0.5),
                    psi_some_avg10: None,
                    suggestion: None,
                },
            ],
        }
    }

    #[test]
    fn prometheus_text() {
        let t = prometheus(&report());
        assert!(t.contains("# HELP schedbe_agent_overloaded "));
        assert!(t.contains("# TYPE schedbe_agent_overloaded gauge\nschedbe_agent_overloaded 1\n"));
        assert!(t.contains("# TYPE schedbe_agent_sandbox_usage_seconds_total counter\n"));
        assert!(t.contains("schedbe_agent_sandbox_load_cpus{cgroup=\"kubepods/pod\\\"a\\\"\\\\x\",pod=\"a\\nb\"} 2\n"), "{t}");
        assert!(t.contains("schedbe_agent_hotspot_suggested_replicas{cgroup=\"kubepods/pod\\\"a\\\"\\\\x\",pod=\"a\\nb\"} 4\n"));
        assert!(t.contains("schedbe_agent_sandbox_usage_seconds_total{cgroup=\"kubepods/podb\",pod=\"b\"} 0\n"));
        assert!(!t.contains("schedbe_agent_sandbox_load_cpus{cgroup=\"kubepods/podb\""), "no value yet: no sample");
        // Every sample line belongs to a family announced just before it.
        let mut family = "";
        for line in t.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                family = rest.split(' ').next().unwrap();
            } else if !line.starts_with('#') {
                assert!(line.starts_with(family), "{line} outside {family}");
            }
        }
        assert_eq!((value(f64::NAN), value(f64::INFINITY), value(-f64::INFINITY), value(0.25)), ("NaN".into(), "+Inf".into(), "-Inf".into(), "0.25".into()));
    }

    #[test]
    fn json_lines_round_trip() {
        let text = json_lines(&report()).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["kind"], "node");
        assert_eq!(lines[0]["excess_cpus"], 2.8);
        assert_eq!(lines[0]["overloaded"], true);
        assert_eq!(lines[1]["kind"], "sandbox");
        assert_eq!(lines[1]["pod"], "a\nb");
        assert_eq!(lines[1]["suggestion"]["replicas"], 4);
        assert!(lines[2]["load_cpus"].is_null() && lines[2]["suggestion"].is_null());
        assert_eq!(lines[2]["limit_cpus"], 0.5);
    }
}
