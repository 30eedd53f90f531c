//! Aggregating repetitions per configuration and writing the summary
//! (markdown), the per-second and per-request CSVs.

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::runner::{LatencyParts, RunOutcome};
use crate::stats::{spread, Spread};

/// One configuration over its repetitions (successful runs only).
/// Latencies in ms, inversion and idle figures in % of CPU time.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct ConfigAggregate {
    pub config: String,
    pub description: String,
    pub runs: usize,
    pub runs_ok: usize,
    pub mean_before_ms: Option<Spread>,
    pub mean_after_ms: Option<Spread>,
    pub mean_ratio: Option<Spread>,
    pub p99_before_ms: Option<Spread>,
    pub p99_after_ms: Option<Spread>,
    pub p99_ratio: Option<Spread>,
    pub overall_mean_ms: Option<Spread>,
    pub overall_p99_ms: Option<Spread>,
    pub be_iters_per_s: Option<Spread>,
    /// Tracer, BE phase: BE running while LC waited > grace.
    pub inversion_pct: Option<Spread>,
    /// Tracer, BE phase: % of the inversion with the LC task queued on another CPU.
    #[serde(default)]
    pub inversion_elsewhere_pct: Option<Spread>,
    /// Tracer, BE phase: inversion % of CPU had the grace period been
    /// (first) microseconds.
    #[serde(default)]
    pub inversion_pct_by_grace: Vec<(u64, Option<Spread>)>,
    /// Tracer, LC-alone phase (a control: should be 0).
    pub inversion_pct_lc_phase: Option<Spread>,
    pub idle_while_lc_waits_pct: Option<Spread>,
    /// Tracer, BE phase: BE CPU / CPU left by LC and RT, in %.
    pub be_share_of_leftover_pct: Option<Spread>,
    pub achieved_util_before: Option<Spread>,
    /// Tracer, LC-alone phase: % of CPU time LC ran / RT "other" (client,
    /// orchestration, tracer, and LC itself in the fifo configuration) ran.
    pub lc_cpu_pct_lc_phase: Option<Spread>,
    pub other_cpu_pct_lc_phase: Option<Spread>,
    /// Tracer, LC-alone phase: % of CPU time not idle (LC + RT + anything
    /// else): the machine's utilization before BE starts.
    #[serde(default)]
    pub busy_pct_lc_phase: Option<Spread>,
    pub burn_cpu_ratio: Option<Spread>,
    pub speed_vs_calibration: Option<Spread>,
    pub client_lag_p99_ms: Option<Spread>,
    pub unanswered: u64,
    /// Where the LC mean goes, before and after BE starts (see LatencyParts).
    #[serde(default)]
    pub parts_before: PartsAggregate,
    #[serde(default)]
    pub parts_after: PartsAggregate,
    /// --bpf-stats: the scheduler's BPF programs over the LC-alone window,
    /// % of the CPUs and ns per call (all programs).
    #[serde(default)]
    pub bpf_cpu_pct_lc_phase: Option<Spread>,
    #[serde(default)]
    pub bpf_ns_per_call_lc_phase: Option<Spread>,
}

/// LatencyParts over repetitions (ms).
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct PartsAggregate {
    pub send_lag_ms: Option<Spread>,
    pub to_start_ms: Option<Spread>,
    pub cpu_ms: Option<Spread>,
    pub preempted_ms: Option<Spread>,
    pub reply_ms: Option<Spread>,
}

impl PartsAggregate {
    fn of(runs: &[&RunOutcome], parts: impl Fn(&RunOutcome) -> &LatencyParts) -> PartsAggregate {
        let c = |f: fn(&LatencyParts) -> f64| col(runs, |r| Some(parts(r)).filter(|p| p.n > 0).map(f));
        PartsAggregate {
            send_lag_ms: c(|p| p.send_lag_ms),
            to_start_ms: c(|p| p.to_start_ms),
            cpu_ms: c(|p| p.cpu_ms),
            preempted_ms: c(|p| p.preempted_ms),
            reply_ms: c(|p| p.reply_ms),
        }
    }
}

pub(crate) fn col(runs: &[&RunOutcome], f: impl Fn(&RunOutcome) -> Option<f64>) -> Option<Spread> {
    let v: Vec<f64> = runs.iter().map(|r| f(r).unwrap_or(f64::NAN)).collect();
    spread(&v)
}

/// The grace periods every run's BE-phase trace reports, each with the
/// inversion % over the runs.
fn grace_columns(runs: &[&RunOutcome]) -> Vec<(u64, Option<Spread>)> {
    let Some(first) = runs.iter().find_map(|r| r.trace_be.as_ref()) else { return vec![] };
    first
        .inversion_by_grace
        .iter()
        .map(|&(g, _)| {
            let s = col(runs, |r| {
                r.trace_be.as_ref()?.inversion_by_grace.iter().find(|(x, _)| *x == g).map(|(_, f)| 100.0 * f)
            });
            (g, s)
        })
        .collect()
}

fn pos(x: f64) -> Option<f64> {
    (x.is_finite() && x > 0.0).then_some(x)
}

/// Aggregate the runs of each configuration, in the order given.
pub fn aggregate(configs: &[(String, String)], runs: &[RunOutcome]) -> Vec<ConfigAggregate> {
    configs
        .iter()
        .map(|(name, desc)| {
            let all: Vec<&RunOutcome> = runs.iter().filter(|r| &r.config == name).collect();
            let ok: Vec<&RunOutcome> = all.iter().copied().filter(|r| r.ok).collect();
            ConfigAggregate {
                config: name.clone(),
                description: desc.clone(),
                runs: all.len(),
                runs_ok: ok.len(),
                mean_before_ms: col(&ok, |r| pos(r.before.mean_us / 1000.0)),
                mean_after_ms: col(&ok, |r| pos(r.after.mean_us / 1000.0)),
                mean_ratio: col(&ok, |r| r.mean_ratio),
                p99_before_ms: col(&ok, |r| pos(r.before.p99_us / 1000.0)),
                p99_after_ms: col(&ok, |r| pos(r.after.p99_us / 1000.0)),
                p99_ratio: col(&ok, |r| r.p99_ratio),
                overall_mean_ms: col(&ok, |r| pos(r.overall.mean_us / 1000.0)),
                overall_p99_ms: col(&ok, |r| pos(r.overall.p99_us / 1000.0)),
                be_iters_per_s: col(&ok, |r| r.be_iters_per_s),
                inversion_pct: col(&ok, |r| r.trace_be.as_ref().map(|t| 100.0 * t.inversion_frac)),
                inversion_elsewhere_pct: col(&ok, |r| {
                    r.trace_be.as_ref().filter(|t| t.inversion_ns > 0).map(|t| 100.0 * t.inversion_elsewhere_ns as f64 / t.inversion_ns as f64)
                }),
                inversion_pct_by_grace: grace_columns(&ok),
                inversion_pct_lc_phase: col(&ok, |r| r.trace_lc.as_ref().map(|t| 100.0 * t.inversion_frac)),
                idle_while_lc_waits_pct: col(&ok, |r| r.trace_be.as_ref().map(|t| 100.0 * t.idle_while_lc_waits_frac)),
                be_share_of_leftover_pct: col(&ok, |r| {
                    // only meaningful when BE ran
                    r.be_iters_per_s?;
                    r.trace_be.as_ref().and_then(|t| t.be_share_of_leftover).map(|x| 100.0 * x)
                }),
                achieved_util_before: col(&ok, |r| r.achieved_util_before),
                lc_cpu_pct_lc_phase: col(&ok, |r| r.trace_lc.as_ref().filter(|t| t.cpu_ns > 0).map(|t| 100.0 * t.lc_ns as f64 / t.cpu_ns as f64)),
                other_cpu_pct_lc_phase: col(&ok, |r| r.trace_lc.as_ref().filter(|t| t.cpu_ns > 0).map(|t| 100.0 * t.other_ns as f64 / t.cpu_ns as f64)),
                busy_pct_lc_phase: col(&ok, |r| r.trace_lc.as_ref().filter(|t| t.cpu_ns > 0).map(|t| 100.0 * (1.0 - t.idle_ns as f64 / t.cpu_ns as f64))),
                burn_cpu_ratio: col(&ok, |r| r.burn_cpu_ratio),
                speed_vs_calibration: col(&ok, |r| r.speed_vs_calibration),
                client_lag_p99_ms: col(&ok, |r| r.client.as_ref().map(|c| c.send_lag.p99_us / 1000.0)),
                unanswered: ok.iter().filter_map(|r| r.client.as_ref()).map(|c| c.unanswered).sum(),
                parts_before: PartsAggregate::of(&ok, |r| &r.parts_before),
                parts_after: PartsAggregate::of(&ok, |r| &r.parts_after),
                bpf_cpu_pct_lc_phase: col(&ok, |r| r.bpf_lc_phase.as_ref().map(|b| b.cpu_pct)),
                bpf_ns_per_call_lc_phase: col(&ok, |r| r.bpf_lc_phase.as_ref().filter(|b| b.calls > 0).map(|b| b.total_ns as f64 / b.calls as f64)),
            }
        })
        .collect()
}

/// "median [min-max]" with a precision; "-" when missing. With one value,
/// just the value.
pub fn fmt_spread(s: &Option<Spread>, prec: usize) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n == 1 => format!("{:.*}", prec, s.median),
        Some(s) => format!("{:.*} [{:.*}–{:.*}]", prec, s.median, prec, s.min, prec, s.max),
    }
}

fn fmt_rel(s: &Option<Spread>) -> String {
    match s.as_ref().and_then(|s| if s.n > 1 { s.rel_spread } else { None }) {
        Some(r) => format!("{:.0}%", 100.0 * r),
        None => "-".into(),
    }
}

/// Free-form facts for the report header.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Meta {
    pub experiment: String,
    pub command: String,
    pub started: String,
    pub kernel: String,
    pub cpus_online: usize,
    pub cpu_model: String,
    pub hypervisor: bool,
    pub sched_ext: String,
    pub calibration: String,
    pub client_protection: String,
    pub orchestrator_policy: String,
    pub cgroups: String,
    pub notes: Vec<String>,
}

/// How the BE-phase inversion depends on the grace period, and where the
/// waiting LC task was queued: short waits (a preemption landing) against
/// long ones (a policy letting BE run while LC waits).
fn inversion_table(m: &mut String, aggs: &[ConfigAggregate]) {
    let Some(graces) = aggs.iter().map(|a| &a.inversion_pct_by_grace).find(|g| !g.is_empty()) else { return };
    let graces: Vec<u64> = graces.iter().map(|(g, _)| *g).collect();
    let _ = writeln!(m, "\nInversion % of CPU in the BE phase (median over repetitions) had the tracer's grace period been each of these, and the share of the headline inversion during which the waiting LC task sat on another CPU's runqueue:\n");
    let head: Vec<String> = graces.iter().map(|g| format!("grace {g} us")).collect();
    let _ = writeln!(m, "| config | {} | queued on another CPU % |", head.join(" | "));
    let _ = writeln!(m, "|---|{}---|", "---|".repeat(graces.len()));
    for a in aggs {
        let cells: Vec<String> = graces
            .iter()
            .map(|g| {
                a.inversion_pct_by_grace
                    .iter()
                    .find(|(x, _)| x == g)
                    .and_then(|(_, s)| s.as_ref())
                    .map(|s| format!("{:.4}", s.median))
                    .unwrap_or_else(|| "-".into())
            })
            .collect();
        let _ = writeln!(m, "| {} | {} | {} |", a.config, cells.join(" | "), fmt_spread(&a.inversion_elsewhere_pct, 0));
    }
}

/// The markdown summary.
pub fn markdown(meta: &Meta, params: &crate::runner::RunParams, aggs: &[ConfigAggregate], runs: &[RunOutcome], figures: &[String]) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# schedbe-bench {}\n", meta.experiment);
    let _ = writeln!(m, "- command: `{}`", meta.command);
    let _ = writeln!(m, "- started: {}", meta.started);
    let _ = writeln!(
        m,
        "- machine: kernel {}, {} CPUs online ({}){}; sched_ext: {}",
        meta.kernel,
        meta.cpus_online,
        meta.cpu_model,
        if meta.hypervisor { ", virtual machine" } else { "" },
        meta.sched_ext
    );
    let _ = writeln!(
        m,
        "- load: {:.0}% of {} CPU(s), service {} us (burn: {}), {} connections (= server threads), Poisson arrivals{}; LC alone {:.0} s, then {} {:.0} s{}; {} repetition(s), configurations interleaved",
        100.0 * params.util,
        params.ncpus,
        params.service,
        params.burn,
        params.conns,
        if params.repeat_arrivals_secs > 0.0 { " (the BE phase repeats the LC-alone phase's arrivals)" } else { "" },
        params.lc_alone_secs,
        match (params.with_be, params.pods.is_some()) {
            (_, true) => "service1 + service2",
            (true, false) => "LC + BE",
            (false, false) => "LC alone again",
        },
        params.be_secs,
        if params.tail_secs > 0.0 { format!(", BE {:.0} s more after the client stops", params.tail_secs) } else { String::new() },
        runs.iter().map(|r| r.rep).max().map(|x| x + 1).unwrap_or(0)
    );
    if params.pods.is_some() {
        let _ = writeln!(m, "- LC = service1 (the LC server, in its pod); \"BE\" columns = service2: {} SCHED_OTHER threads burning CPU (resizing {} -> {}), in its pod, LC to every scheduler", params.be_threads, params.be_src, params.be_dst);
    } else if params.with_be {
        let _ = writeln!(m, "- BE: {} threads resizing {} -> {} (Lanczos3, fast_image_resize, SIMD {})", params.be_threads, params.be_src, params.be_dst, params.be_simd);
    }
    let _ = writeln!(
        m,
        "- windows: \"before\" = [t0+{:.1} s, BE start), \"after\" = [BE start+{:.1} s, end of sending); latency from the intended send time",
        params.warmup_secs, params.settle_secs
    );
    let _ = writeln!(m, "- {}", meta.calibration);
    let _ = writeln!(m, "- client: {}; orchestration: {}", meta.client_protection, meta.orchestrator_policy);
    let _ = writeln!(m, "- cgroups: {}; tracer: {:?}", meta.cgroups, params.trace);
    for n in &meta.notes {
        let _ = writeln!(m, "- note: {n}");
    }
    let _ = writeln!(m, "\nValues: median [min–max] over repetitions; spread = (max−min)/median of the ratio.\n");
    let _ = writeln!(m, "| config | runs ok | LC mean before (ms) | after (ms) | mean ratio | spread | LC p99 before (ms) | after (ms) | p99 ratio | spread | BE it/s | inversion % CPU | BE % of leftover CPU |");
    let _ = writeln!(m, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for a in aggs {
        let _ = writeln!(
            m,
            "| {} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            a.config,
            a.runs_ok,
            a.runs,
            fmt_spread(&a.mean_before_ms, 2),
            fmt_spread(&a.mean_after_ms, 2),
            fmt_spread(&a.mean_ratio, 2),
            fmt_rel(&a.mean_ratio),
            fmt_spread(&a.p99_before_ms, 2),
            fmt_spread(&a.p99_after_ms, 2),
            fmt_spread(&a.p99_ratio, 2),
            fmt_rel(&a.p99_ratio),
            fmt_spread(&a.be_iters_per_s, 1),
            fmt_spread(&a.inversion_pct, 4),
            fmt_spread(&a.be_share_of_leftover_pct, 1),
        );
    }
    let _ = writeln!(m, "\nLoad checks: offered load = service demand sent before BE / CPU time; LC / RT / busy CPU % = tracer, LC-alone phase (RT = client, orchestration, tracer; LC itself under fifo; busy = not idle: the utilization before BE); burn CPU ratio = CPU time of a burn / requested service (1 = as calibrated); speed = spin-loop speed just before the run / at calibration.\n");
    let _ = writeln!(m, "| config | description | LC mean whole run (ms) | LC p99 whole run (ms) | offered LC load | LC CPU % | RT CPU % | busy CPU % | burn CPU ratio | speed | inversion % CPU, LC-alone phase | idle while LC waits % | client p99 send lag (ms) | unanswered |");
    let _ = writeln!(m, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for a in aggs {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            a.config,
            a.description,
            fmt_spread(&a.overall_mean_ms, 2),
            fmt_spread(&a.overall_p99_ms, 2),
            fmt_spread(&a.achieved_util_before, 2),
            fmt_spread(&a.lc_cpu_pct_lc_phase, 1),
            fmt_spread(&a.other_cpu_pct_lc_phase, 1),
            fmt_spread(&a.busy_pct_lc_phase, 1),
            fmt_spread(&a.burn_cpu_ratio, 2),
            fmt_spread(&a.speed_vs_calibration, 2),
            fmt_spread(&a.inversion_pct_lc_phase, 4),
            fmt_spread(&a.idle_while_lc_waits_pct, 3),
            fmt_spread(&a.client_lag_p99_ms, 2),
            a.unanswered
        );
    }
    if aggs.iter().any(|a| a.bpf_cpu_pct_lc_phase.is_some()) {
        let _ = writeln!(m, "\nThe scheduler's BPF programs over the LC-alone window (--bpf-stats: run time and count of every program its process holds, from kernel.bpf_stats_enabled; per callback in bench.json, bpf_lc_phase):\n");
        let _ = writeln!(m, "| config | BPF % of CPU | ns per call |");
        let _ = writeln!(m, "|---|---|---|");
        for a in aggs.iter().filter(|a| a.bpf_cpu_pct_lc_phase.is_some()) {
            let _ = writeln!(m, "| {} | {} | {} |", a.config, fmt_spread(&a.bpf_cpu_pct_lc_phase, 2), fmt_spread(&a.bpf_ns_per_call_lc_phase, 0));
        }
    }
    let _ = writeln!(m, "\nWhere the LC mean goes (ms, median over repetitions, before → after BE starts), from each request's timestamps: client send lag + wait until its worker starts it (earlier requests on the connection, the worker's wakeup, waiting for a CPU) + CPU time of the burn + time the worker was preempted while serving + reply delivery (the client's wakeup and read). In each run the parts add up to the mean latency; the sum column adds the medians.\n");
    let _ = writeln!(m, "| config | send lag | wait to start | CPU | preempted while serving | reply | sum |");
    let _ = writeln!(m, "|---|---|---|---|---|---|---|");
    for a in aggs {
        let (b, f) = (&a.parts_before, &a.parts_after);
        let pair = |x: &Option<Spread>, y: &Option<Spread>| match (x, y) {
            (Some(x), Some(y)) => format!("{:.2} → {:.2}", x.median, y.median),
            _ => "-".into(),
        };
        let sum = |p: &PartsAggregate| {
            [&p.send_lag_ms, &p.to_start_ms, &p.cpu_ms, &p.preempted_ms, &p.reply_ms].iter().map(|s| s.as_ref().map(|s| s.median)).sum::<Option<f64>>()
        };
        let total = match (sum(b), sum(f)) {
            (Some(x), Some(y)) => format!("{x:.2} → {y:.2}"),
            _ => "-".into(),
        };
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | {} | {} |",
            a.config,
            pair(&b.send_lag_ms, &f.send_lag_ms),
            pair(&b.to_start_ms, &f.to_start_ms),
            pair(&b.cpu_ms, &f.cpu_ms),
            pair(&b.preempted_ms, &f.preempted_ms),
            pair(&b.reply_ms, &f.reply_ms),
            total
        );
    }
    inversion_table(&mut m, aggs);
    let _ = writeln!(m, "\n## Runs (in execution order)\n");
    let _ = writeln!(m, "| # | config | rep | seed | mean before/after (ms) | p99 before/after (ms) | BE it/s | inversion % (BE phase) | raw | problems |");
    let _ = writeln!(m, "|---|---|---|---|---|---|---|---|---|---|");
    for (i, r) in runs.iter().enumerate() {
        let problems = match &r.error {
            Some(e) => format!("FAILED: {e}"),
            None => format!("{} warning(s)", r.warnings.len()),
        };
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {} | {} | {} | {} |",
            i + 1,
            r.config,
            r.rep + 1,
            r.seed,
            r.before.mean_us / 1000.0,
            r.after.mean_us / 1000.0,
            r.before.p99_us / 1000.0,
            r.after.p99_us / 1000.0,
            r.be_iters_per_s.map(|b| format!("{b:.1}")).unwrap_or_else(|| "-".into()),
            r.trace_be.as_ref().map(|t| format!("{:.4}", 100.0 * t.inversion_frac)).unwrap_or_else(|| "-".into()),
            r.raw_dir,
            problems.replace('|', "/")
        );
    }
    let warned: Vec<&RunOutcome> = runs.iter().filter(|r| !r.warnings.is_empty()).collect();
    if !warned.is_empty() {
        let _ = writeln!(m, "\n## Warnings\n");
        for r in warned {
            for w in &r.warnings {
                let _ = writeln!(m, "- {} r{}: {}", r.config, r.rep + 1, w);
            }
        }
    }
    if !figures.is_empty() {
        let _ = writeln!(m, "\n## Figures\n");
        for f in figures {
            let _ = writeln!(m, "- [{f}]({f})");
        }
    }
    m
}

pub const PER_SECOND_HEADER: &str = "config,rep,t_s,phase,lc_count,lc_mean_us,lc_p50_us,lc_p99_us,lc_max_us,be_iters,send_lag_max_us";

pub fn write_per_second(path: &Path, runs: &[RunOutcome]) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut w = BufWriter::new(f);
    writeln!(w, "{PER_SECOND_HEADER}")?;
    for r in runs.iter().filter(|r| r.ok) {
        for x in &r.windows {
            writeln!(
                w,
                "{},{},{:.3},{},{},{:.1},{:.1},{:.1},{:.1},{},{:.1}",
                r.config,
                r.rep + 1,
                x.t_s,
                x.phase,
                x.lc.count,
                x.lc.mean_us,
                x.lc.p50_us,
                x.lc.p99_us,
                x.lc.max_us,
                x.be_iters,
                x.lag_max_us
            )?;
        }
    }
    w.flush().with_context(|| format!("write {}", path.display()))
}

pub const REQUESTS_HEADER: &str = "config,rep,conn,id,t_s,latency_us,send_lag_us,queue_us,service_us,server_us,cpu_us";

/// All answered requests; t_s is the intended send time since t0.
pub fn write_requests(path: &Path, runs: &[RunOutcome]) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut w = BufWriter::new(f);
    writeln!(w, "{REQUESTS_HEADER}")?;
    for r in runs.iter().filter(|r| r.ok) {
        for q in &r.records {
            writeln!(
                w,
                "{},{},{},{},{:.6},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1}",
                r.config,
                r.rep + 1,
                q.conn,
                q.id,
                q.intended_ns.saturating_sub(r.t0_ns) as f64 / 1e9,
                q.latency_ns() as f64 / 1000.0,
                q.lag_ns() as f64 / 1000.0,
                q.start_ns.saturating_sub(q.send_ns) as f64 / 1000.0,
                q.service_ns as f64 / 1000.0,
                q.end_ns.saturating_sub(q.start_ns) as f64 / 1000.0,
                q.cpu_ns as f64 / 1000.0
            )?;
        }
    }
    w.flush().with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencySummary;

    fn run(cfg: &str, rep: usize, before: f64, after: f64, ok: bool) -> RunOutcome {
        RunOutcome {
            config: cfg.into(),
            rep,
            ok,
            before: LatencySummary { count: 10, mean_us: before, p99_us: before * 2.0, ..Default::default() },
            after: LatencySummary { count: 10, mean_us: after, p99_us: after * 3.0, ..Default::default() },
            mean_ratio: crate::stats::ratio(after, before),
            p99_ratio: crate::stats::ratio(after * 3.0, before * 2.0),
            ..Default::default()
        }
    }

    #[test]
    fn aggregates_medians_and_spread() {
        let runs = vec![
            run("weights", 0, 1000.0, 2000.0, true),
            run("schedbe", 0, 1000.0, 1000.0, true),
            run("weights", 1, 1000.0, 1600.0, true),
            run("schedbe", 1, 1000.0, 1100.0, true),
            run("weights", 2, 1000.0, 1800.0, true),
            run("schedbe", 2, 1.0, 1.0, false),
        ];
        let cfgs = vec![("weights".to_string(), "w".to_string()), ("schedbe".to_string(), "s".to_string())];
        let a = aggregate(&cfgs, &runs);
        assert_eq!(a[0].runs_ok, 3);
        let mr = a[0].mean_ratio.as_ref().unwrap();
        assert!((mr.median - 1.8).abs() < 1e-12);
        assert!((mr.rel_spread.unwrap() - 0.4 / 1.8).abs() < 1e-12);
        assert!((a[0].p99_ratio.as_ref().unwrap().median - 2.7).abs() < 1e-12);
        assert_eq!((a[1].runs, a[1].runs_ok), (3, 2));
        assert!((a[1].mean_ratio.as_ref().unwrap().median - 1.05).abs() < 1e-12);
        assert!(a[1].inversion_pct.is_none());
        assert_eq!(fmt_spread(&a[0].mean_ratio, 2), "1.80 [1.60–2.00]");
        assert_eq!(fmt_spread(&None, 2), "-");
        assert_eq!(fmt_rel(&a[0].mean_ratio), "22%");
    }

    #[test]
    fn markdown_has_a_row_per_config_and_run() {
        let runs = vec![run("weights", 0, 1000.0, 2000.0, true), run("schedbe", 0, 1000.0, 1000.0, true)];
        let cfgs = vec![("weights".to_string(), "w".to_string()), ("schedbe".to_string(), "s".to_string())];
        let a = aggregate(&cfgs, &runs);
        let p = crate::runner::tests_params();
        let md = markdown(&Meta { experiment: "srv-bg".into(), ..Default::default() }, &p, &a, &runs, &["srv-bg-cmp.png".into()]);
        assert!(md.contains("| weights | 1/1 | 1.00 | 2.00 | 2.00 |"), "{md}");
        assert!(md.contains("| schedbe | 1/1 |"));
        assert!(md.contains("srv-bg-cmp.png"));
        assert_eq!(md.matches("\n| 1 | weights").count(), 1);
        assert!(md.contains("| config | send lag | wait to start | CPU | preempted while serving | reply | sum |"), "{md}");
        assert!(!md.contains("grace 200 us"), "no inversion table without traces");
    }

    #[test]
    fn inversion_by_grace_table() {
        let trace = |inv: u64, elsewhere: u64, g: Vec<(u64, f64)>| crate::tracer::TraceFigures {
            inversion_ns: inv,
            inversion_elsewhere_ns: elsewhere,
            inversion_by_grace: g,
            ..Default::default()
        };
        let mut w = run("weights", 0, 1000.0, 2000.0, true);
        w.trace_be = Some(trace(100, 80, vec![(0, 0.12), (200, 0.10)]));
        let mut s = run("schedbe", 0, 1000.0, 1000.0, true);
        s.trace_be = Some(trace(100, 25, vec![(0, 0.02), (200, 0.00002)]));
        let cfgs = vec![("weights".to_string(), "w".to_string()), ("schedbe".to_string(), "s".to_string())];
        let a = aggregate(&cfgs, &[w.clone(), s.clone()]);
        let md = markdown(&Meta::default(), &crate::runner::tests_params(), &a, &[w, s], &[]);
        assert!(md.contains("| config | grace 0 us | grace 200 us | queued on another CPU % |"), "{md}");
        assert!(md.contains("| weights | 12.0000 | 10.0000 | 80 |"), "{md}");
        assert!(md.contains("| schedbe | 2.0000 | 0.0020 | 25 |"), "{md}");
    }
}
