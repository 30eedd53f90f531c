//! `schedbe stats`: print the running policy's stats, read from its
//! scx_stats server (stats_server.rs), whichever policy it is. Without a
//! schedbe stats server (nothing loaded, another scheduler, a stale socket)
//! it fails at once rather than waiting for one.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use scx_stats::prelude::*;
use serde_json::Value;

use crate::stats_server::{POLICY_ATTR, SOCKET};

/// How long one request may take: the answer comes from the policy's main
/// loop, which waits at most a few hundred ms between jobs.
const TIMEOUT: Duration = Duration::from_millis(1500);
/// How long a lost server is looked for again (a reload at the kernel's
/// request replaces it) before `schedbe stats` gives up.
const RECONNECT: Duration = Duration::from_secs(5);

/// What runs, as sched_ext reports it, for the error message.
fn sched_ext_runs() -> String {
    let read = |f: &str| std::fs::read_to_string(format!("/sys/kernel/sched_ext/{f}")).map(|s| s.trim().to_string()).unwrap_or_default();
    match (read("state").as_str(), read("root/ops")) {
        ("enabled", ops) if !ops.is_empty() => format!("; sched_ext runs {ops}"),
        _ => String::new(),
    }
}

fn connect() -> Result<StatsClient> {
    connect_at(Path::new(SOCKET))
}

fn connect_at(path: &Path) -> Result<StatsClient> {
    let ms = TIMEOUT.as_millis() as u64;
    StatsClient::new().set_path(path).connect(Some(ms)).map_err(|e| {
        let at = path.display();
        match e.downcast_ref::<std::io::Error>().map(|e| e.kind()) {
            Some(ErrorKind::PermissionDenied) => anyhow!("permission denied on {at}: schedbe's stats are root only"),
            _ => anyhow!("no schedbe stats server at {at} (is schedbe run running?{})", sched_ext_runs()),
        }
    })
}

/// The policy the server reports: its top-level stats struct's POLICY_ATTR.
fn policy(c: &mut StatsClient) -> Result<String> {
    policy_at(c, Path::new(SOCKET))
}

fn policy_at(c: &mut StatsClient, path: &Path) -> Result<String> {
    let at = path.display();
    let metas: BTreeMap<String, StatsMeta> =
        c.request("stats_meta", vec![]).with_context(|| format!("no schedbe stats server at {at}: it does not answer"))?;
    let top = metas.values().find(|m| m.attrs.top.is_some());
    match top.and_then(|m| m.attrs.user.get(POLICY_ATTR)) {
        Some(p) => Ok(p.clone()),
        None => {
            let name = top.map_or("none", |m| m.name.as_str());
            bail!("no schedbe stats server at {at}: it serves another scheduler's stats (top-level {name}{})", sched_ext_runs())
        }
    }
}

/// One reading as `schedbe run --stats` prints it under `policy`.
fn print(out: &mut impl Write, policy: &str, v: Value, json: bool, rows: u64) -> Result<()> {
    if json {
        writeln!(out, "{v}")?;
        return Ok(());
    }
    match policy {
        "sched-be" => {
            let m: crate::policy::sched_be::stats::Metrics = serde_json::from_value(v)?;
            if rows.is_multiple_of(20) {
                writeln!(out, "{}", crate::policy::sched_be::stats::Metrics::HEADER)?;
            }
            m.format_row(out)?;
        }
        "llf" => {
            let s: crate::policy::llf::stats::LlfStats = serde_json::from_value(v)?;
            writeln!(out, "{}", s.format_row())?;
        }
        "akita" => {
            let r: crate::policy::akita::stats::Report = serde_json::from_value(v)?;
            write!(out, "{}", r.render(rows == 0))?;
        }
        other => bail!("the stats server reports policy {other:?}, which this schedbe does not know"),
    }
    out.flush()?;
    Ok(())
}

/// Connect again within RECONNECT, to a server of the same policy.
fn reconnect(policy: &str, lost: anyhow::Error) -> Result<StatsClient> {
    let until = Instant::now() + RECONNECT;
    loop {
        if let Ok(mut c) = connect() {
            if policy == self::policy(&mut c)? {
                return Ok(c);
            }
        }
        if Instant::now() >= until {
            return Err(lost.context(format!("lost the stats server at {SOCKET} (schedbe run stopped?)")));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `schedbe stats`: print the running policy's stats every `intv`.
pub fn monitor(intv: Duration, json: bool, shutdown: Arc<AtomicBool>) -> Result<()> {
    let mut c = connect()?;
    let policy = policy(&mut c)?;
    let mut rows = 0u64;
    while !shutdown.load(Ordering::Relaxed) {
        let v: Value = match c.request("stats", vec![]) {
            Ok(v) => v,
            Err(e) => {
                c = reconnect(&policy, e)?;
                continue;
            }
        };
        print(&mut std::io::stdout(), &policy, v, json, rows)?;
        rows += 1;
        std::thread::sleep(intv);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::sched_be::stats::Metrics;
    use crate::stats_server::Server;

    /// A client reads deltas of the policy's cumulative samples, through the
    /// loop's `wait`, and sees the policy and the socket's mode.
    #[test]
    fn serves_deltas_root_only() {
        let dir = std::env::temp_dir().join(format!("schedbe-stats-test-{}", std::process::id()));
        let path = dir.join("stats");
        let server = Server::launch_at(crate::policy::sched_be::stats::server_data(), &path);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let client = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut c = connect_at(&path).unwrap();
                let policy = policy_at(&mut c, &path).unwrap();
                let a: Metrics = c.request("stats", vec![]).unwrap();
                let b: Metrics = c.request("stats", vec![]).unwrap();
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                (policy, a, b)
            })
        };
        let mut n = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            server
                .wait(Duration::from_millis(50), || {
                    n += 1;
                    Ok(Metrics { interval_ms: 1000.0 * n as f64, nr_cpus: 2, lc_ms: 100.0 * n as f64 * n as f64, ..Default::default() })
                })
                .unwrap();
        }
        let (policy, _, b) = client.join().unwrap();
        assert_eq!(policy, "sched-be");
        // sample 3 less sample 2 (1 opened the target, 2 answered the first read)
        assert_eq!((b.interval_ms, b.lc_ms), (1000.0, 500.0));
        drop(server);
        assert!(!path.exists(), "the socket outlives the server");
        assert!(connect_at(&path).is_err());
        let _ = std::fs::remove_dir(&dir);
    }
}
