//! BPF CPU cost of a loaded scheduler, per program (callback): with
//! kernel.bpf_stats_enabled=1 the kernel counts each program's runs and run
//! time, shown in the fdinfo of its fds (run_cnt, run_time_ns). The
//! programs of a scheduler are those its process holds open; their names
//! (the kernel keeps 15 characters) come from BPF_OBJ_GET_INFO_BY_FD
//! through libbpf-rs. Counting costs two clock reads per program run,
//! which the measured workloads then include.
//!
//! Used by `schedbe-bench overhead` (around each workload of its count pass), the LC-server
//! experiments' `--bpf-stats` (the LC-alone phase, runner.rs) and the
//! serverless experiments.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

const SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// kernel.bpf_stats_enabled set to 1 while this lives; the old value is
/// written back on drop.
pub struct StatsEnabled {
    old: String,
}

pub fn enable_stats() -> Result<StatsEnabled> {
    let old = std::fs::read_to_string(SYSCTL).with_context(|| format!("read {SYSCTL}"))?.trim().to_string();
    std::fs::write(SYSCTL, "1").with_context(|| format!("write 1 to {SYSCTL}"))?;
    Ok(StatsEnabled { old })
}

impl StatsEnabled {
    /// Was it already on (someone else's counting) when this turned it on?
    pub fn was_on(&self) -> bool {
        self.old != "0"
    }
}

impl Drop for StatsEnabled {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(SYSCTL, &self.old) {
            eprintln!("bench: warning: could not restore {SYSCTL} to {}: {e}", self.old);
        }
    }
}

/// One program's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgStat {
    pub id: u32,
    pub prog_type: u32,
    pub run_time_ns: u64,
    pub run_cnt: u64,
}

/// Counters from one fdinfo text; None for fds that are not BPF programs
/// (links and maps have no run_cnt).
pub fn parse_fdinfo(text: &str) -> Option<ProgStat> {
    let mut kv: BTreeMap<&str, &str> = BTreeMap::new();
    for l in text.lines() {
        if let Some((k, v)) = l.split_once(':') {
            kv.insert(k.trim(), v.trim());
        }
    }
    kv.get("prog_type")?;
    Some(ProgStat {
        id: kv.get("prog_id")?.parse().ok()?,
        prog_type: kv.get("prog_type")?.parse().ok()?,
        run_time_ns: kv.get("run_time_ns")?.parse().ok()?,
        run_cnt: kv.get("run_cnt")?.parse().ok()?,
    })
}

/// The programs process @pid holds, by id.
pub fn snapshot(pid: u32) -> Result<BTreeMap<u32, ProgStat>> {
    let dir = format!("/proc/{pid}/fdinfo");
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&dir).with_context(|| format!("read {dir}"))? {
        let Ok(e) = e else { continue };
        if let Some(s) = std::fs::read_to_string(e.path()).ok().as_deref().and_then(parse_fdinfo) {
            out.insert(s.id, s);
        }
    }
    Ok(out)
}

/// Program names by id (all loaded programs; needs CAP_SYS_ADMIN).
pub fn names() -> BTreeMap<u32, String> {
    libbpf_rs::query::ProgInfoIter::default().map(|p| (p.id, p.name.to_string_lossy().into_owned())).collect()
}

fn type_name(t: u32) -> String {
    // enum bpf_prog_type (include/uapi/linux/bpf.h)
    match t {
        5 => "tracepoint".into(),
        17 => "raw_tracepoint".into(),
        26 => "tracing".into(),
        27 => "struct_ops".into(),
        31 => "syscall".into(),
        _ => format!("type {t}"),
    }
}

/// One program over a workload.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CallbackCost {
    pub name: String,
    pub prog_type: String,
    pub calls: u64,
    pub total_ns: u64,
    pub ns_per_call: Option<f64>,
}

/// A scheduler's BPF programs over a workload.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct BpfCost {
    pub elapsed_s: f64,
    pub ncpus: usize,
    pub total_ns: u64,
    pub calls: u64,
    /// total_ns / (elapsed x ncpus), in %.
    pub cpu_pct: f64,
    /// Most expensive first; programs that did not run are left out.
    pub callbacks: Vec<CallbackCost>,
}

/// The difference of two snapshots of the same process.
pub fn cost(before: &BTreeMap<u32, ProgStat>, after: &BTreeMap<u32, ProgStat>, names: &BTreeMap<u32, String>, elapsed_s: f64, ncpus: usize) -> BpfCost {
    let mut cbs: Vec<CallbackCost> = after
        .values()
        .map(|a| {
            let b = before.get(&a.id).cloned().unwrap_or_default();
            let calls = a.run_cnt.saturating_sub(b.run_cnt);
            let total_ns = a.run_time_ns.saturating_sub(b.run_time_ns);
            CallbackCost {
                name: names.get(&a.id).cloned().unwrap_or_else(|| format!("prog{}", a.id)),
                prog_type: type_name(a.prog_type),
                calls,
                total_ns,
                ns_per_call: (calls > 0).then(|| total_ns as f64 / calls as f64),
            }
        })
        .filter(|c| c.calls > 0)
        .collect();
    cbs.sort_by(|x, y| y.total_ns.cmp(&x.total_ns).then_with(|| x.name.cmp(&y.name)));
    let total_ns: u64 = cbs.iter().map(|c| c.total_ns).sum();
    let denom = elapsed_s * ncpus as f64 * 1e9;
    BpfCost {
        elapsed_s,
        ncpus,
        total_ns,
        calls: cbs.iter().map(|c| c.calls).sum(),
        cpu_pct: if denom > 0.0 { 100.0 * total_ns as f64 / denom } else { 0.0 },
        callbacks: cbs,
    }
}

/// The counters of one scheduler process between two instants.
pub struct Window {
    pid: u32,
    start: std::time::Instant,
    before: BTreeMap<u32, ProgStat>,
    /// Looked up at open(): the scheduler's programs are loaded by then,
    /// and close() then reads only the counters.
    names: BTreeMap<u32, String>,
}

impl Window {
    /// Start counting now (kernel.bpf_stats_enabled must be on).
    pub fn open(pid: u32) -> Result<Window> {
        let names = names();
        Ok(Window { pid, start: std::time::Instant::now(), before: snapshot(pid)?, names })
    }

    /// The cost since open(), as a share of this process's CPUs (all of
    /// them unless it is pinned).
    pub fn close(self) -> Result<BpfCost> {
        let after = snapshot(self.pid)?;
        let ncpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        Ok(cost(&self.before, &after, &self.names, self.start.elapsed().as_secs_f64(), ncpus))
    }
}

/// Whether the kernel can count (the sysctl exists).
pub fn available() -> bool {
    Path::new(SYSCTL).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    // /proc/PID/fdinfo of a BPF program fd, a link fd and a map fd (kernel 6.x)
    const PROG: &str = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1045\nprog_type:\t27\nprog_jited:\t1\nprog_tag:\t6deef7357e7b4530\nmemlock:\t4096\nprog_id:\t123\nrun_time_ns:\t5000\nrun_cnt:\t10\nrecursion_misses:\t0\nverified_insns:\t208\n";
    const LINK: &str = "pos:\t0\nflags:\t02000000\nmnt_id:\t15\nino:\t1045\nlink_type:\tstruct_ops\nlink_id:\t7\nprog_tag:\t6deef7357e7b4530\nprog_id:\t123\n";
    const MAP: &str = "pos:\t0\nflags:\t02000002\nmap_type:\t2\nkey_size:\t4\nvalue_size:\t8\nmax_entries:\t1\nmap_flags:\t0\nmap_id:\t9\n";

    #[test]
    fn fdinfo() {
        assert_eq!(parse_fdinfo(PROG), Some(ProgStat { id: 123, prog_type: 27, run_time_ns: 5000, run_cnt: 10 }));
        assert_eq!(parse_fdinfo(LINK), None);
        assert_eq!(parse_fdinfo(MAP), None);
    }

    #[test]
    fn cost_per_callback() {
        let st = |id, t, n| (id, ProgStat { id, prog_type: 27, run_time_ns: t, run_cnt: n });
        let before: BTreeMap<u32, ProgStat> = [st(1, 1000, 10), st(2, 0, 0)].into();
        let after: BTreeMap<u32, ProgStat> = [st(1, 3000, 30), st(2, 8000, 2), st(3, 500, 0)].into();
        let names: BTreeMap<u32, String> = [(1, "x_enqueue".to_string())].into();
        let c = cost(&before, &after, &names, 2.0, 4);
        assert_eq!(c.callbacks.len(), 2, "prog 3 never ran");
        assert_eq!(c.callbacks[0].name, "prog2");
        assert_eq!(c.callbacks[0].ns_per_call, Some(4000.0));
        assert_eq!(c.callbacks[1].name, "x_enqueue");
        assert_eq!((c.callbacks[1].calls, c.callbacks[1].total_ns), (20, 2000));
        assert_eq!((c.total_ns, c.calls), (10_000, 22));
        // 10 us of 2 s x 4 CPUs
        assert!((c.cpu_pct - 100.0 * 10_000.0 / 8e9).abs() < 1e-12);
        assert_eq!(cost(&before, &after, &names, 0.0, 4).cpu_pct, 0.0);
    }
}
