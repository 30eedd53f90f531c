//! A run's records turned into figures (the types are params.rs's): latency
//! before and after BE, where the latency goes (LatencyParts::of), the
//! served load, BE throughput, and the per-window series.

use super::params::{LatencyParts, RunOutcome, RunParams, Window};
use crate::client::Record;
use crate::stats::{ratio, window_index, LatencyHist};
use crate::sys::secs_ns;

impl LatencyParts {
    /// Means over @records (answered ones only; server clocks are the
    /// client's: one machine, CLOCK_MONOTONIC).
    pub fn of<'a>(records: impl IntoIterator<Item = &'a Record>) -> LatencyParts {
        let (mut n, mut s) = (0u64, [0f64; 5]);
        for r in records.into_iter().filter(|r| r.recv_ns > 0 && r.end_ns >= r.start_ns) {
            let wall = r.end_ns - r.start_ns;
            let parts = [
                r.lag_ns(),
                r.start_ns.saturating_sub(r.send_ns),
                r.cpu_ns.min(wall),
                wall.saturating_sub(r.cpu_ns),
                r.recv_ns.saturating_sub(r.end_ns),
            ];
            n += 1;
            for (acc, v) in s.iter_mut().zip(parts) {
                *acc += v as f64;
            }
        }
        let m = |x: f64| if n > 0 { x / n as f64 / 1e6 } else { 0.0 };
        LatencyParts { n, send_lag_ms: m(s[0]), to_start_ms: m(s[1]), cpu_ms: m(s[2]), preempted_ms: m(s[3]), reply_ms: m(s[4]) }
    }
}

/// Before/after figures and per-window series from the raw records.
pub fn compute_figures(p: &RunParams, o: &mut RunOutcome, be_times: &[u64], has_be: bool, be_start_actual: u64) {
    let t0 = o.t0_ns;
    let be_phase = t0 + secs_ns(p.lc_alone_secs);
    let before = (t0 + secs_ns(p.warmup_secs), be_phase);
    let after = (be_start_actual.max(be_phase) + secs_ns(p.settle_secs), o.send_end_ns);
    let mut hb = LatencyHist::new();
    let mut ha = LatencyHist::new();
    let mut served_ns_before: u128 = 0;
    let mut finished_ns_before: u128 = 0;
    let mut hall = LatencyHist::new();
    let mut burn: Vec<f64> = Vec::new();
    for r in &o.records {
        if r.end_ns >= before.0 && r.end_ns < before.1 {
            finished_ns_before += r.service_ns as u128;
        }
        if r.intended_ns >= before.0 && r.intended_ns < o.send_end_ns {
            hall.record_ns(r.latency_ns());
        }
        if r.intended_ns >= before.0 && r.intended_ns < before.1 {
            hb.record_ns(r.latency_ns());
            served_ns_before += r.service_ns as u128;
            if r.service_ns > 0 && r.cpu_ns > 0 {
                burn.push(r.cpu_ns as f64 / r.service_ns as f64);
            }
        } else if r.intended_ns >= after.0 && r.intended_ns < after.1 {
            ha.record_ns(r.latency_ns());
        }
    }
    o.before = hb.summary();
    o.after = ha.summary();
    let within = |w: (u64, u64)| move |r: &&Record| r.intended_ns >= w.0 && r.intended_ns < w.1;
    o.parts_before = LatencyParts::of(o.records.iter().filter(within(before)));
    o.parts_after = LatencyParts::of(o.records.iter().filter(within(after)));
    o.overall = hall.summary();
    burn.sort_by(|a, b| a.total_cmp(b));
    o.burn_cpu_ratio = crate::stats::median_sorted(&burn);
    let svc_us = p.service.mean_us();
    if o.before.count > 0 && o.before.mean_us > 20.0 * svc_us {
        o.warnings.push(format!(
            "LC overloaded before BE started: mean latency {:.1} ms is over 20x the {:.1} ms service time \
             (burn CPU ratio {:.2}); lower --util or lengthen --service",
            o.before.mean_us / 1000.0,
            svc_us / 1000.0,
            o.burn_cpu_ratio.unwrap_or(f64::NAN)
        ));
    }
    o.mean_ratio = ratio(o.after.mean_us, o.before.mean_us);
    o.p99_ratio = ratio(o.after.p99_us, o.before.p99_us);
    let bw = before.1.saturating_sub(before.0);
    let per_cpu_window = |ns: u128| if bw > 0 { Some(ns as f64 / (bw as f64 * p.ncpus.max(1) as f64)) } else { None };
    o.achieved_util_before = per_cpu_window(served_ns_before);
    o.served_util_before = per_cpu_window(finished_ns_before);
    if has_be && after.1 > after.0 {
        let n = be_times.iter().filter(|&&t| t >= after.0 && t < after.1).count();
        o.be_iters_per_s = Some(n as f64 / ((after.1 - after.0) as f64 / 1e9));
    }
    // windows, up to the last record / BE iteration
    let width = secs_ns(p.window_secs).max(1_000_000);
    let last = o.records.iter().map(|r| r.intended_ns).max().unwrap_or(o.send_end_ns).max(be_times.last().copied().unwrap_or(0)).max(o.send_end_ns);
    let n = (window_index(last, t0, width).unwrap_or(0) + 1).min(1_000_000);
    let mut hs: Vec<LatencyHist> = (0..n).map(|_| LatencyHist::new()).collect();
    let mut lag = vec![0u64; n];
    let mut be_n = vec![0u64; n];
    for r in &o.records {
        if let Some(i) = window_index(r.intended_ns, t0, width).filter(|&i| i < n) {
            hs[i].record_ns(r.latency_ns());
            lag[i] = lag[i].max(r.lag_ns());
        }
    }
    for &t in be_times {
        if let Some(i) = window_index(t, t0, width).filter(|&i| i < n) {
            be_n[i] += 1;
        }
    }
    o.windows = (0..n)
        .map(|i| {
            let ws = t0 + i as u64 * width;
            let phase = if ws < be_phase {
                "lc"
            } else if ws < o.send_end_ns {
                if has_be { "lc+be" } else { "lc2" }
            } else {
                "drain"
            };
            Window { t_s: (i as u64 * width) as f64 / 1e9, phase: phase.into(), lc: hs[i].summary(), be_iters: be_n[i], lag_max_us: lag[i] as f64 / 1000.0 }
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::params::tests_params;

    #[test]
    fn latency_parts_add_up() {
        // ms: send lag 1, wait to start 2, 8 of service wall of which 3 CPU and
        // 5 preempted, reply 4: 15 in all
        let r = Record { conn: 0, id: 0, intended_ns: 100, send_ns: 1_000_100, start_ns: 3_000_100, end_ns: 11_000_100,
                         recv_ns: 15_000_100, service_ns: 3_000_000, cpu_ns: 3_000_000 };
        let unanswered = Record { recv_ns: 0, ..r };
        let p = LatencyParts::of([&r, &r, &unanswered]);
        assert_eq!(p.n, 2);
        let got = [p.send_lag_ms, p.to_start_ms, p.cpu_ms, p.preempted_ms, p.reply_ms];
        for (g, want) in got.iter().zip([1.0, 2.0, 3.0, 5.0, 4.0]) {
            assert!((g - want).abs() < 1e-9, "{got:?}");
        }
        assert!((got.iter().sum::<f64>() - r.latency_ns() as f64 / 1e6).abs() < 1e-9);
        assert_eq!(LatencyParts::of([] as [&Record; 0]), LatencyParts::default());
    }

    #[test]
    fn figures_from_records() {
        let p = tests_params();
        let t0 = 1_000_000_000_000u64;
        let mut o = RunOutcome { t0_ns: t0, send_end_ns: t0 + 4_000_000_000, ..Default::default() };
        // 1 request every 10 ms; latency 1 ms before BE, 2 ms after.
        for k in 0..400u64 {
            let t = t0 + k * 10_000_000;
            let lat = if t < t0 + 2_000_000_000 { 1_000_000 } else { 2_000_000 };
            // the server ends each request 0.5 ms after it was due
            o.records.push(Record { conn: 0, id: k, intended_ns: t, send_ns: t + 1000, recv_ns: t + lat, service_ns: 1_000_000, end_ns: t + 500_000, ..Default::default() });
        }
        let be: Vec<u64> = (0..100u64).map(|k| t0 + 2_000_000_000 + k * 20_000_000).collect();
        compute_figures(&p, &mut o, &be, true, t0 + 2_000_000_000);
        assert_eq!(o.before.count, 150);
        assert_eq!(o.after.count, 150);
        assert!((o.mean_ratio.unwrap() - 2.0).abs() < 1e-9);
        assert!((o.be_iters_per_s.unwrap() - 50.0).abs() < 1e-9);
        // 1 ms of demand every 10 ms on 1 CPU
        assert!((o.achieved_util_before.unwrap() - 0.1).abs() < 1e-9);
        // finished in the window: the same 150 requests (each ends before the next is due)
        assert!((o.served_util_before.unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(o.windows.len(), 5);
        assert_eq!(o.windows[0].phase, "lc");
        assert_eq!(o.windows[2].phase, "lc+be");
        assert_eq!(o.windows[2].be_iters, 50);
        assert_eq!(o.windows[0].lc.count, 100);
        assert_eq!(o.windows[4].phase, "drain");
        assert!((o.windows[1].lag_max_us - 1.0).abs() < 1e-9);
    }
}
