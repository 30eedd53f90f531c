//! `schedbe-bench overhead` results: the per-run records, the aggregation (each
//! configuration against EEVDF in the same repetition, median and range
//! over repetitions), summary.md and the CSV.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::bpf_stats::BpfCost;
use super::workloads::Metric;
use crate::report::{fmt_spread, Meta};
use crate::stats::{spread, Spread};

/// The configuration the others are compared with.
pub const BASELINE: &str = "eevdf";

/// One workload, one configuration, one repetition.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct WorkloadRun {
    pub workload: String,
    pub config: String,
    /// 1-based.
    pub rep: usize,
    pub ok: bool,
    pub error: Option<String>,
    /// The workload's figures (keys as in workloads::Workload::metrics, and more).
    pub values: BTreeMap<String, f64>,
    pub elapsed_s: f64,
    /// The BPF count pass (after the timed repetitions, with
    /// kernel.bpf_stats_enabled): its runs give `bpf` and are in no ratio,
    /// since the counting slows every BPF program it counts.
    #[serde(default)]
    pub counted: bool,
    /// The loaded scheduler's BPF programs over the workload (the LC
    /// server's over its first phase's measured window); count pass only.
    pub bpf: Option<BpfCost>,
    /// This run's raw files, relative to the output directory.
    pub raw_dir: String,
    pub warnings: Vec<String>,
}

impl WorkloadRun {
    /// Which repetition, for people: "rep N", or the BPF count pass.
    pub fn rep_label(&self) -> String {
        if self.counted { "BPF count pass".into() } else { format!("rep {}", self.rep) }
    }
}

/// value(config) / value(baseline) for each timed repetition where both ran.
pub fn ratios(runs: &[WorkloadRun], workload: &str, metric: &str, config: &str, baseline: &str) -> Vec<f64> {
    let timed = || runs.iter().filter(|r| !r.counted);
    let val = |cfg: &str, rep: usize| {
        timed().find(|r| r.ok && r.workload == workload && r.config == cfg && r.rep == rep).and_then(|r| r.values.get(metric).copied())
    };
    let mut reps: Vec<usize> = timed().filter(|r| r.workload == workload && r.config == config).map(|r| r.rep).collect();
    reps.sort_unstable();
    reps.dedup();
    reps.into_iter()
        .filter_map(|rep| crate::stats::ratio(val(config, rep)?, val(baseline, rep)?))
        .collect()
}

/// One line of the summary: a workload's metric for one configuration.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Row {
    pub workload: String,
    pub metric: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub config: String,
    pub runs: usize,
    pub runs_ok: usize,
    pub value: Option<Spread>,
    /// Against the baseline in the same repetition (None for the baseline
    /// itself and when it did not run).
    pub ratio: Option<Spread>,
}

/// Rows for every workload (in order) x metric x configuration (in order),
/// from the timed repetitions.
pub fn rows(runs: &[WorkloadRun], workloads: &[(String, &'static [Metric])], configs: &[String]) -> Vec<Row> {
    let mut out = Vec::new();
    for (w, metrics) in workloads {
        for m in metrics.iter() {
            for c in configs {
                let mine: Vec<&WorkloadRun> = runs.iter().filter(|r| !r.counted && &r.workload == w && &r.config == c).collect();
                let vals: Vec<f64> = mine.iter().filter(|r| r.ok).filter_map(|r| r.values.get(m.key).copied()).collect();
                out.push(Row {
                    workload: w.clone(),
                    metric: m.key.into(),
                    unit: m.unit.into(),
                    higher_is_better: m.higher_is_better,
                    config: c.clone(),
                    runs: mine.len(),
                    runs_ok: mine.iter().filter(|r| r.ok).count(),
                    value: spread(&vals),
                    ratio: if c == BASELINE { None } else { spread(&ratios(runs, w, m.key, c, BASELINE)) },
                });
            }
        }
    }
    out
}

/// Per configuration and program: calls, ns per call and share of BPF
/// time, over all workloads of the count pass.
fn bpf_callbacks(runs: &[WorkloadRun]) -> BTreeMap<String, Vec<(String, u64, u64)>> {
    let mut acc: BTreeMap<String, BTreeMap<String, (u64, u64)>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.ok) {
        for cb in r.bpf.iter().flat_map(|b| &b.callbacks) {
            let e = acc.entry(r.config.clone()).or_default().entry(cb.name.clone()).or_default();
            e.0 += cb.calls;
            e.1 += cb.total_ns;
        }
    }
    acc.into_iter()
        .map(|(c, m)| {
            let mut v: Vec<(String, u64, u64)> = m.into_iter().map(|(n, (calls, ns))| (n, calls, ns)).collect();
            v.sort_by_key(|x| std::cmp::Reverse(x.2));
            (c, v)
        })
        .collect()
}

pub struct Summary<'a> {
    pub meta: &'a Meta,
    pub params_md: &'a [String],
    pub configs: &'a [(String, String)],
    pub workloads: &'a [(String, &'static [Metric])],
    pub rows: &'a [Row],
    pub runs: &'a [WorkloadRun],
    pub figures: &'a [String],
}

pub fn markdown(s: &Summary) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# schedbe-bench overhead\n");
    let _ = writeln!(m, "schedbe's cost with no BE, against EEVDF and peer sched_ext schedulers: one boot, configurations interleaved within each repetition.\n");
    let _ = writeln!(m, "- command: `{}`\n- started: {}\n- kernel {}, {} CPUs ({}{}), sched_ext: {}", s.meta.command, s.meta.started, s.meta.kernel, s.meta.cpus_online, s.meta.cpu_model, if s.meta.hypervisor { ", virtual machine" } else { "" }, s.meta.sched_ext);
    for p in s.params_md {
        let _ = writeln!(m, "- {p}");
    }
    let _ = writeln!(m, "\n## Configurations\n");
    for (n, d) in s.configs {
        let _ = writeln!(m, "- `{n}`: {d}");
    }
    let cfgs: Vec<&str> = s.configs.iter().map(|c| c.0.as_str()).collect();
    let _ = writeln!(m, "\n## Against {BASELINE} (same repetition): median [min–max] over repetitions\n");
    let _ = writeln!(m, "Ratio = configuration / {BASELINE}; below 1 is better where lower is better, above 1 where higher is.\n");
    let _ = writeln!(m, "| workload | metric | better | {} |", cfgs.join(" | "));
    let _ = writeln!(m, "|---|---|---|{}", "---|".repeat(cfgs.len()));
    let cell = |w: &str, k: &str, c: &str, f: &dyn Fn(&Row) -> String| {
        s.rows.iter().find(|r| r.workload == w && r.metric == k && r.config == c).map(f).unwrap_or_else(|| "-".into())
    };
    for (w, ms) in s.workloads {
        for mt in ms.iter() {
            let cells: Vec<String> = cfgs.iter().map(|c| if *c == BASELINE { "1".into() } else { cell(w, mt.key, c, &|r| fmt_spread(&r.ratio, 3)) }).collect();
            let _ = writeln!(m, "| {w} | {} ({}) | {} | {} |", mt.key, mt.unit, if mt.higher_is_better { "higher" } else { "lower" }, cells.join(" | "));
        }
    }
    let _ = writeln!(m, "\n## Raw values: median [min–max] over repetitions (runs ok / runs)\n");
    let _ = writeln!(m, "| workload | metric | {} |", cfgs.join(" | "));
    let _ = writeln!(m, "|---|---|{}", "---|".repeat(cfgs.len()));
    for (w, ms) in s.workloads {
        for mt in ms.iter() {
            let cells: Vec<String> = cfgs.iter().map(|c| cell(w, mt.key, c, &|r| format!("{} ({}/{})", fmt_spread(&r.value, 3), r.runs_ok, r.runs))).collect();
            let _ = writeln!(m, "| {w} | {} ({}) | {} |", mt.key, mt.unit, cells.join(" | "));
        }
    }
    conditions(&mut m, s, &cfgs);
    bpf_tables(&mut m, s);
    let failed: Vec<&WorkloadRun> = s.runs.iter().filter(|r| !r.ok).collect();
    let warned: Vec<&WorkloadRun> = s.runs.iter().filter(|r| !r.warnings.is_empty()).collect();
    if !failed.is_empty() || !warned.is_empty() || !s.meta.notes.is_empty() {
        let _ = writeln!(m, "\n## Failures, warnings, notes\n");
        for r in failed {
            let _ = writeln!(m, "- FAILED {} / {} / {}: {}", r.workload, r.config, r.rep_label(), r.error.as_deref().unwrap_or("?"));
        }
        for r in warned {
            for w in &r.warnings {
                let _ = writeln!(m, "- {} / {} / {}: {w}", r.workload, r.config, r.rep_label());
            }
        }
        for n in &s.meta.notes {
            let _ = writeln!(m, "- note: {n}");
        }
    }
    if !s.figures.is_empty() {
        let _ = writeln!(m, "\n## Figures\n");
        for f in s.figures {
            let _ = writeln!(m, "- [{f}]({f})");
        }
    }
    m
}

/// What a workload ran under, as measured in the run (not a figure of merit,
/// so not in the ratio tables).
fn conditions(m: &mut String, s: &Summary, cfgs: &[&str]) {
    const CONDITIONS: &[(&str, &str, &str)] = &[("cyclictest", "busy_pct", "Busy share of all CPUs during cyclictest (its background load and cyclictest itself), %")];
    for (w, key, what) in CONDITIONS {
        if !s.workloads.iter().any(|(x, _)| x == w) {
            continue;
        }
        let cells: Vec<String> = cfgs
            .iter()
            .map(|c| {
                let v: Vec<f64> = s.runs.iter().filter(|r| r.ok && !r.counted && r.workload == *w && r.config == *c).filter_map(|r| r.values.get(*key).copied()).collect();
                format!("{c} {}", fmt_spread(&spread(&v), 1))
            })
            .collect();
        let _ = writeln!(m, "\n{what}, median [min–max]: {}.", cells.join("; "));
    }
}

fn bpf_tables(m: &mut String, s: &Summary) {
    let with_bpf: Vec<&str> = s.configs.iter().map(|c| c.0.as_str()).filter(|c| s.runs.iter().any(|r| r.config == *c && r.bpf.is_some())).collect();
    if with_bpf.is_empty() {
        return;
    }
    let _ = writeln!(m, "\n## BPF CPU time: % of (elapsed x CPUs), in the BPF count pass\n");
    let _ = writeln!(m, "From kernel.bpf_stats_enabled (run_time_ns, run_cnt of each program the scheduler holds), on only for a pass of its own after the timed repetitions (each workload once per scheduler): the counting costs every BPF program two clock reads per run, so the timings above are without it.\n");
    let _ = writeln!(m, "| workload | {} |", with_bpf.join(" | "));
    let _ = writeln!(m, "|---|{}", "---|".repeat(with_bpf.len()));
    for (w, _) in s.workloads {
        let cells: Vec<String> = with_bpf
            .iter()
            .map(|c| {
                let v: Vec<f64> = s.runs.iter().filter(|r| r.ok && &r.workload == w && r.config == *c).filter_map(|r| r.bpf.as_ref().map(|b| b.cpu_pct)).collect();
                fmt_spread(&spread(&v), 3)
            })
            .collect();
        if cells.iter().any(|c| c != "-") {
            let _ = writeln!(m, "| {w} | {} |", cells.join(" | "));
        }
    }
    let _ = writeln!(m, "\nPer program (callback), all workloads of the count pass together:\n");
    let _ = writeln!(m, "| config | program | calls | ns/call | share of BPF time |");
    let _ = writeln!(m, "|---|---|---|---|---|");
    for (c, cbs) in bpf_callbacks(s.runs) {
        let total: u64 = cbs.iter().map(|x| x.2).sum();
        for (name, calls, ns) in cbs {
            let per = if calls > 0 { format!("{:.0}", ns as f64 / calls as f64) } else { "-".into() };
            let share = if total > 0 { format!("{:.1}%", 100.0 * ns as f64 / total as f64) } else { "-".into() };
            let _ = writeln!(m, "| {c} | {name} | {calls} | {per} | {share} |");
        }
    }
}

/// Long format: one line per run and value, with the ratio to the baseline
/// in the same repetition (none in the BPF count pass, `pass` bpf-count).
pub fn write_csv(path: &Path, runs: &[WorkloadRun]) -> Result<()> {
    let mut s = String::from("workload,config,rep,ok,metric,value,ratio_to_eevdf,pass\n");
    for r in runs {
        let pass = if r.counted { "bpf-count" } else { "timed" };
        if r.values.is_empty() {
            let _ = writeln!(s, "{},{},{},{},,,,{pass}", r.workload, r.config, r.rep, r.ok);
        }
        for (k, v) in &r.values {
            // the count pass has no baseline
            let base = runs.iter().filter(|_| !r.counted).find(|b| b.ok && !b.counted && b.workload == r.workload && b.config == BASELINE && b.rep == r.rep).and_then(|b| b.values.get(k));
            let ratio = base.and_then(|b| crate::stats::ratio(*v, *b)).filter(|_| r.ok).map(|x| format!("{x:.6}")).unwrap_or_default();
            let _ = writeln!(s, "{},{},{},{},{k},{v},{ratio},{pass}", r.workload, r.config, r.rep, r.ok);
        }
    }
    std::fs::write(path, s).with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::overhead::workloads::Workload;

    fn run(w: &str, c: &str, rep: usize, v: f64, ok: bool) -> WorkloadRun {
        WorkloadRun { workload: w.into(), config: c.into(), rep, ok, values: [("time_s".to_string(), v)].into(), ..Default::default() }
    }

    /// write_csv's output for @runs (through a temporary file named by @tag).
    fn csv_text(runs: &[WorkloadRun], tag: &str) -> String {
        let p = std::env::temp_dir().join(format!("schedbe-ovh-csv-{tag}-{}.csv", std::process::id()));
        write_csv(&p, runs).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        text
    }

    #[test]
    fn ratio_math() {
        let runs = vec![
            run("messaging", "eevdf", 1, 2.0, true),
            run("messaging", "schedbe", 1, 3.0, true),
            run("messaging", "eevdf", 2, 4.0, true),
            run("messaging", "schedbe", 2, 4.0, true),
            run("messaging", "eevdf", 3, 1.0, false),
            run("messaging", "schedbe", 3, 9.0, true),
        ];
        // rep 3's baseline failed: no ratio for it
        assert_eq!(ratios(&runs, "messaging", "time_s", "schedbe", "eevdf"), vec![1.5, 1.0]);
        assert!(ratios(&runs, "messaging", "nope", "schedbe", "eevdf").is_empty());
        let ws = vec![("messaging".to_string(), Workload::Messaging.metrics())];
        let rs = rows(&runs, &ws, &["eevdf".into(), "schedbe".into()]);
        assert_eq!(rs.len(), 2);
        assert!(rs[0].ratio.is_none(), "the baseline has no ratio");
        assert_eq!((rs[0].runs, rs[0].runs_ok), (3, 2));
        let r = rs[1].ratio.as_ref().unwrap();
        assert_eq!((r.median, r.min, r.max), (1.25, 1.0, 1.5));
        assert_eq!(rs[1].value.as_ref().unwrap().median, 4.0);
    }

    #[test]
    fn csv_and_markdown() {
        let runs = vec![run("messaging", "eevdf", 1, 2.0, true), run("messaging", "schedbe", 1, 3.0, true), WorkloadRun { error: Some("boom".into()), ..run("messaging", "scx_lavd", 1, 0.0, false) }];
        let text = csv_text(&runs, "md");
        assert!(text.contains("messaging,schedbe,1,true,time_s,3,1.500000,timed\n"), "{text}");
        assert!(text.contains("messaging,scx_lavd,1,false,time_s,0,,timed\n"), "{text}");
        let cfgs: Vec<(String, String)> = ["eevdf", "schedbe", "scx_lavd"].iter().map(|c| (c.to_string(), "d".to_string())).collect();
        let ws = vec![("messaging".to_string(), Workload::Messaging.metrics())];
        let names: Vec<String> = cfgs.iter().map(|c| c.0.clone()).collect();
        let rs = rows(&runs, &ws, &names);
        let md = markdown(&Summary { meta: &Meta::default(), params_md: &[], configs: &cfgs, workloads: &ws, rows: &rs, runs: &runs, figures: &[] });
        assert!(md.contains("| messaging | time_s (s) | lower | 1 | 1.500 | - |"), "{md}");
        assert!(md.contains("FAILED messaging / scx_lavd / rep 1: boom"), "{md}");
        assert!(!md.contains("Busy share"), "no cyclictest, no load line: {md}");
    }

    #[test]
    fn count_pass_is_in_no_ratio() {
        let counted = |c: &str, rep, v| WorkloadRun { counted: true, ..run("messaging", c, rep, v, true) };
        // the count pass's own repetition number, and one that collides with a timed one
        let runs = vec![run("messaging", "eevdf", 1, 2.0, true), run("messaging", "schedbe", 1, 3.0, true), counted("schedbe", 2, 100.0), counted("schedbe", 1, 100.0), counted("eevdf", 2, 1.0)];
        assert_eq!(ratios(&runs, "messaging", "time_s", "schedbe", "eevdf"), vec![1.5]);
        let ws = vec![("messaging".to_string(), Workload::Messaging.metrics())];
        let rs = rows(&runs, &ws, &["eevdf".into(), "schedbe".into()]);
        assert_eq!((rs[1].runs, rs[1].value.as_ref().unwrap().median), (1, 3.0));
        let text = csv_text(&runs, "count");
        assert!(text.contains("messaging,schedbe,2,true,time_s,100,,bpf-count\n"), "{text}");
        assert!(text.contains("messaging,schedbe,1,true,time_s,100,,bpf-count\n"), "{text}");
        assert_eq!(counted("schedbe", 2, 1.0).rep_label(), "BPF count pass");
    }

    #[test]
    fn cyclictest_load_is_reported() {
        let cyc = |c: &str, rep, busy: f64| WorkloadRun { values: [("p99_us".to_string(), 400.0), ("busy_pct".to_string(), busy)].into(), ..run("cyclictest", c, rep, 0.0, true) };
        let runs = vec![cyc("eevdf", 1, 52.0), cyc("schedbe", 1, 55.0), cyc("eevdf", 2, 50.0), cyc("schedbe", 2, 57.0)];
        let cfgs: Vec<(String, String)> = ["eevdf", "schedbe"].iter().map(|c| (c.to_string(), "d".to_string())).collect();
        let ws = vec![("cyclictest".to_string(), Workload::Cyclictest.metrics())];
        let names: Vec<String> = cfgs.iter().map(|c| c.0.clone()).collect();
        let rs = rows(&runs, &ws, &names);
        let md = markdown(&Summary { meta: &Meta::default(), params_md: &[], configs: &cfgs, workloads: &ws, rows: &rs, runs: &runs, figures: &[] });
        assert!(md.contains("eevdf 51.0 [50.0–52.0]; schedbe 56.0 [55.0–57.0]."), "{md}");
    }
}
