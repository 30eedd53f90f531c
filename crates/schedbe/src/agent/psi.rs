//! The kernel's CPU contention signals, parsed from text so that tests (and
//! `schedbe agent` on a fake tree) need no real /proc or cgroupfs:
//! - PSI, /proc/pressure/cpu and a cgroup's cpu.pressure
//!   (Documentation/accounting/psi.rst): `some` and `full` lines of
//!   `avg10=P avg60=P avg300=P total=US`, percentages and µs of stall;
//! - a cgroup's cpu.stat `usage_usec` (Documentation/admin-guide/cgroup-v2.rst);
//! - the run queue: `procs_running` of /proc/stat and the 4th field of
//!   /proc/loadavg (`RUNNABLE/TOTAL`), and the CPU count (`cpuN` lines).
//!
//! Unknown keys inside a PSI line are ignored (the kernel may add some);
//! a missing or malformed one of the four, an unknown line kind, or a
//! repeated line is an error.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::files::Files;

/// One PSI line: share of wall time (percent) that tasks stalled on the CPU,
/// over the last 10, 60, 300 s, and the total stall time in µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct PsiLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total_us: u64,
}

/// A pressure file. `full` is absent in /proc/pressure/cpu before Linux 5.13.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Pressure {
    pub some: PsiLine,
    pub full: Option<PsiLine>,
}

fn parse_line(fields: &str) -> Result<PsiLine> {
    let (mut a10, mut a60, mut a300, mut total) = (None, None, None, None);
    for kv in fields.split_whitespace() {
        let Some((k, v)) = kv.split_once('=') else { bail!("{kv:?} is not KEY=VALUE") };
        let pct = |v: &str| -> Result<f64> {
            let x: f64 = v.parse().map_err(|_| anyhow::anyhow!("{k}={v:?} is not a number"))?;
            if !(0.0..=100.0).contains(&x) {
                bail!("{k}={x} is not a percentage");
            }
            Ok(x)
        };
        match k {
            "avg10" => a10 = Some(pct(v)?),
            "avg60" => a60 = Some(pct(v)?),
            "avg300" => a300 = Some(pct(v)?),
            "total" => total = Some(v.parse::<u64>().map_err(|_| anyhow::anyhow!("total={v:?} is not a count of µs"))?),
            _ => {}
        }
    }
    match (a10, a60, a300, total) {
        (Some(avg10), Some(avg60), Some(avg300), Some(total_us)) => Ok(PsiLine { avg10, avg60, avg300, total_us }),
        _ => bail!("needs avg10, avg60, avg300 and total"),
    }
}

/// Parse the text of a PSI file.
pub fn parse_pressure(text: &str) -> Result<Pressure> {
    let (mut some, mut full) = (None, None);
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let (kind, rest) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
        let slot = match kind {
            "some" => &mut some,
            "full" => &mut full,
            _ => bail!("line {}: {kind:?} is neither \"some\" nor \"full\"", i + 1),
        };
        if slot.is_some() {
            bail!("line {}: a second {kind:?} line", i + 1);
        }
        *slot = Some(parse_line(rest).with_context(|| format!("line {} ({kind})", i + 1))?);
    }
    let Some(some) = some else { bail!("no \"some\" line") };
    Ok(Pressure { some, full })
}

/// `usage_usec` of a cgroup's cpu.stat: CPU time of all its tasks, descendants included.
pub fn parse_cpu_stat_usage(text: &str) -> Result<u64> {
    for line in text.lines() {
        let mut it = line.split_whitespace();
        if it.next() == Some("usage_usec") {
            let v = it.next().unwrap_or("");
            return v.parse().map_err(|_| anyhow::anyhow!("usage_usec {v:?} is not a number"));
        }
    }
    bail!("no usage_usec line")
}

/// Runnable tasks (running or waiting for a CPU), online CPUs, and the
/// CPUs' (busy, all) time since boot in ticks, when /proc/stat has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RunQueue {
    pub runnable: u64,
    pub cpus: u64,
    pub cpu_ticks: Option<(u64, u64)>,
}

/// The aggregate `cpu` line's (busy, all): all is user + nice + system +
/// idle + iowait + irq + softirq + steal (guest time is inside user), busy
/// is all but idle and iowait. None if it has fewer than the first four.
fn cpu_ticks(fields: &[&str]) -> Option<(u64, u64)> {
    let v: Vec<u64> = fields.iter().take(8).map_while(|f| f.parse().ok()).collect();
    if v.len() < 4 {
        return None;
    }
    let all: u64 = v.iter().sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((all - idle, all))
}

/// `procs_running` (if present), the number of `cpuN` lines (at least one)
/// and the `cpu` line's ticks of /proc/stat.
type StatFields = (Option<u64>, u64, Option<(u64, u64)>);

fn stat_fields(text: &str) -> Result<StatFields> {
    let mut running = None;
    let mut cpus = 0;
    let mut ticks = None;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        match it.next() {
            Some("cpu") => ticks = cpu_ticks(&it.collect::<Vec<_>>()),
            Some("procs_running") => {
                let v = it.next().unwrap_or("");
                running = Some(v.parse().map_err(|_| anyhow::anyhow!("procs_running {v:?} is not a number"))?);
            }
            Some(k) if k.len() > 3 && k.starts_with("cpu") && k[3..].bytes().all(|b| b.is_ascii_digit()) => cpus += 1,
            _ => {}
        }
    }
    if cpus == 0 {
        bail!("no cpuN lines");
    }
    Ok((running, cpus, ticks))
}

/// The runnable count of /proc/loadavg (`L1 L5 L15 RUNNABLE/TOTAL LASTPID`).
pub fn parse_loadavg_runnable(text: &str) -> Result<u64> {
    let f: Vec<&str> = text.split_whitespace().collect();
    let Some((r, _)) = f.get(3).and_then(|x| x.split_once('/')) else { bail!("no RUNNABLE/TOTAL field in {:?}", text.trim()) };
    r.parse().map_err(|_| anyhow::anyhow!("runnable count {r:?} is not a number"))
}

/// Read a file of a (possibly fake) /proc or cgroupfs.
pub fn read(files: &mut Files, path: &Path) -> Result<String> {
    files.read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The node's signals under `proc_root` (/proc normally): PSI and the run queue.
/// /proc/stat gives both runnable tasks and CPUs; /proc/loadavg is the
/// fallback for the runnable count when /proc/stat has no procs_running.
pub fn node(files: &mut Files, proc_root: &Path) -> Result<(Pressure, RunQueue)> {
    let p = proc_root.join("pressure/cpu");
    let pressure = parse_pressure(&read(files, &p)?).with_context(|| p.display().to_string())?;
    let s = proc_root.join("stat");
    let (running, cpus, cpu_ticks) = stat_fields(&read(files, &s)?).with_context(|| s.display().to_string())?;
    let runnable = match running {
        Some(r) => r,
        None => {
            let l = proc_root.join("loadavg");
            parse_loadavg_runnable(&read(files, &l)?).with_context(|| format!("{} (no procs_running in {})", l.display(), s.display()))?
        }
    };
    let rq = RunQueue { runnable, cpus, cpu_ticks };
    Ok((pressure, rq))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CG: &str = "some avg10=12.50 avg60=3.10 avg300=0.75 total=123456\nfull avg10=1.00 avg60=0.20 avg300=0.00 total=789\n";

    #[test]
    fn pressure_parses() {
        let p = parse_pressure(CG).unwrap();
        assert_eq!(p.some, PsiLine { avg10: 12.5, avg60: 3.1, avg300: 0.75, total_us: 123_456 });
        assert_eq!(p.full.unwrap().total_us, 789);
        let old = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=0 extra=7\n").unwrap();
        assert_eq!(old.full, None);
    }

    #[test]
    fn malformed_pressure_is_an_error() {
        let cases = [
            ("", "no \"some\" line"),
            ("full avg10=0 avg60=0 avg300=0 total=0", "no \"some\" line"),
            ("some avg10=0 avg60=0 avg300=0", "needs avg10"),
            ("some avg10=x avg60=0 avg300=0 total=0", "avg10=\"x\""),
            ("some avg10=101 avg60=0 avg300=0 total=0", "not a percentage"),
            ("some avg10=1 avg60=0 avg300=0 total=-1", "total"),
            ("some avg10 avg60=0 avg300=0 total=1", "not KEY=VALUE"),
            ("some avg10=1 avg60=0 avg300=0 total=1\nsome avg10=1 avg60=0 avg300=0 total=1", "second"),
            ("most avg10=1 avg60=0 avg300=0 total=1", "line 1"),
        ];
        for (text, want) in cases {
            let e = format!("{:#}", parse_pressure(text).unwrap_err());
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn cpu_stat_proc_stat_loadavg() {
        let stat = "usage_usec 5000123\nuser_usec 4000000\nsystem_usec 1000123\nnr_periods 0\n";
        assert_eq!(parse_cpu_stat_usage(stat).unwrap(), 5_000_123);
        assert!(parse_cpu_stat_usage("user_usec 1\n").is_err());
        assert!(parse_cpu_stat_usage("usage_usec lots\n").is_err());
        let ps = "cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2 3 4\ncpufreq 9\nintr 5\nprocs_running 7\nprocs_blocked 1\n";
        // all = 1+2+3+4 = 10, idle 4 (no iowait field)
        assert_eq!(stat_fields(ps).unwrap(), (Some(7), 2, Some((6, 10))));
        let full = "cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 1\n";
        assert_eq!(stat_fields(full).unwrap().2, Some((170, 990)));
        assert_eq!(stat_fields("cpu0 1\n").unwrap(), (None, 1, None));
        assert_eq!(stat_fields("cpu 1\ncpu0 1\n").unwrap().2, None, "too few fields");
        assert!(stat_fields("procs_running 3\n").is_err(), "no CPUs");
        assert!(stat_fields("cpu0 1\nprocs_running x\n").is_err());
        assert_eq!(parse_loadavg_runnable("0.52 0.58 0.59 3/1234 5678\n").unwrap(), 3);
        assert!(parse_loadavg_runnable("0.52 0.58 0.59\n").is_err());
        assert!(parse_loadavg_runnable("0.52 0.58 0.59 x/1 2\n").is_err());
    }

    #[test]
    fn node_signals_from_a_fake_proc() {
        let t = crate::testtree::TempTree::new("psi");
        let mut f = Files::new();
        t.write(Path::new("pressure/cpu"), CG);
        t.write(Path::new("stat"), "cpu0 1\ncpu1 1\nprocs_running 5\n");
        t.write(Path::new("loadavg"), "0.1 0.1 0.1 9/100 1\n");
        let (p, rq) = node(&mut f, t.root()).unwrap();
        assert_eq!((p.some.avg10, rq), (12.5, RunQueue { runnable: 5, cpus: 2, cpu_ticks: None }));
        // Without procs_running, the runnable count comes from loadavg.
        t.write(Path::new("stat"), "cpu0 1\ncpu1 1\n");
        assert_eq!(node(&mut f, t.root()).unwrap().1, RunQueue { runnable: 9, cpus: 2, cpu_ticks: None });
        std::fs::remove_file(t.root().join("loadavg")).unwrap();
        assert!(format!("{:#}", node(&mut f, t.root()).unwrap_err()).contains("loadavg"));
    }
}
