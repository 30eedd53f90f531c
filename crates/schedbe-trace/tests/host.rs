//! End-to-end check of the tracer on the running kernel (root, stress-ng):
//!
//! ```text
//! sudo cargo test --release -p schedbe-trace --test host -- --ignored --nocapture
//! ```
//!
//! Starts, in cgroups it creates (and removes afterwards):
//! * BE by cpu.idle=1: `stress-ng -c N` (N = online CPUs);
//! * BE by a `--be-cgroup` pattern (cgroup v2 path, no cpu.idle): `stress-ng -c 1 --cpu-load 30`;
//! * LC: `stress-ng --cpu 2N --cpu-load 40`;
//! * other: `chrt -f 10 stress-ng -c 1 --cpu-load 10`;
//!
//! traces 2 s and checks that every workload is classified as it should be,
//! that the time accounting adds up, and that under EEVDF (not sched_ext)
//! some inversion shows.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use schedbe_trace::{cgroup2_root, run, TraceArgs};

struct Cleanup {
    children: Vec<Child>,
    dirs: Vec<PathBuf>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &mut self.children {
            // the stress-ng parent takes its workers down on SIGTERM
            // SAFETY: kill(2) on a child we spawned.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        for c in &mut self.children {
            let _ = c.wait();
        }
        for d in self.dirs.iter().rev() {
            for _ in 0..50 {
                if fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {cmd}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

fn spawn_in(cgroups: &[&Path], cmd: &str) -> Child {
    let mut script = String::new();
    for cg in cgroups {
        script.push_str(&format!("echo $$ > {}/cgroup.procs && ", cg.display()));
    }
    script.push_str("exec ");
    script.push_str(cmd);
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .spawn()
        .expect("spawn bash")
}

fn children_of(pid: u32) -> Vec<u32> {
    let out = Command::new("pgrep")
        .arg("-P")
        .arg(pid.to_string())
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

#[test]
#[ignore = "needs root, stress-ng and a kernel with BTF; run with --ignored"]
fn classifies_and_accounts_real_workloads() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !have("stress-ng") || !have("chrt") {
        eprintln!("skipped: needs root, stress-ng and chrt");
        return;
    }
    let cg2 = cgroup2_root().expect("cgroup v2 mounted somewhere");
    // Where the cpu controller (cpu.idle) lives: v2 unified, or v1 on hybrid hosts.
    let cpu_root = if fs::read_to_string(cg2.join("cgroup.controllers"))
        .unwrap_or_default()
        .contains("cpu")
    {
        let sc = cg2.join("cgroup.subtree_control");
        let _ = fs::write(&sc, "+cpu");
        cg2.clone()
    } else if Path::new("/sys/fs/cgroup/cpu/cpu.idle").exists() {
        PathBuf::from("/sys/fs/cgroup/cpu")
    } else {
        eprintln!("skipped: no cpu controller with cpu.idle");
        return;
    };
    let tag = std::process::id();
    let be_idle = cpu_root.join(format!("sbt-test-be-{tag}"));
    let lc = cpu_root.join(format!("sbt-test-lc-{tag}"));
    let pat_name = format!("sbt-test-pat-{tag}");
    let pat = cg2.join(&pat_name);
    let mut guard = Cleanup {
        children: vec![],
        dirs: vec![],
    };
    for d in [&be_idle, &lc, &pat] {
        fs::create_dir_all(d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
        guard.dirs.push(d.clone());
    }
    fs::write(be_idle.join("cpu.idle"), "1").expect("cpu.idle=1");

    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    guard.children.push(spawn_in(
        &[&be_idle],
        &format!("stress-ng -c {n} -t 60 --quiet --temp-path /tmp"),
    ));
    guard.children.push(spawn_in(
        &[&pat],
        "stress-ng -c 1 --cpu-load 30 -t 60 --quiet --temp-path /tmp",
    ));
    guard.children.push(spawn_in(
        &[&lc],
        &format!(
            "stress-ng --cpu {} --cpu-load 40 -t 60 --quiet --temp-path /tmp",
            2 * n
        ),
    ));
    // RT stays in the root cgroup: child cgroups get no RT runtime with RT_GROUP_SCHED
    guard.children.push(spawn_in(
        &[],
        "chrt -f 10 stress-ng -c 1 --cpu-load 10 -t 60 --quiet --temp-path /tmp",
    ));
    let want_workers = [n, 1, 2 * n, 1];
    let deadline = Instant::now() + Duration::from_secs(30);
    let kids: Vec<Vec<u32>> = loop {
        std::thread::sleep(Duration::from_millis(200));
        for (i, c) in guard.children.iter_mut().enumerate() {
            if let Ok(Some(st)) = c.try_wait() {
                panic!("workload {i} exited early: {st}");
            }
        }
        let kids: Vec<Vec<u32>> = guard.children.iter().map(|c| children_of(c.id())).collect();
        if kids.iter().zip(want_workers).all(|(k, w)| k.len() >= w) {
            break kids;
        }
        assert!(
            Instant::now() < deadline,
            "stress-ng workers did not all start: {kids:?}"
        );
    };
    std::thread::sleep(Duration::from_millis(300));

    // --cgroup: the pattern cgroup (always in the v2 hierarchy) and, on
    // unified hosts, the LC one
    let lc_name = format!("sbt-test-lc-{tag}");
    let mut per_cgroup = vec![pat_name.clone()];
    if cpu_root == cg2 {
        per_cgroup.push(lc_name.clone());
    }
    let args = TraceArgs {
        duration: 2.0,
        per_task: true,
        be_cgroups: vec![pat_name.clone()],
        cgroups: per_cgroup.clone(),
        ..Default::default()
    };
    let r = run(&args).expect("tracer runs");
    eprintln!("{}", r.verdict());
    eprintln!("totals {:?}", r.totals);
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }

    assert_eq!(r.dropped_events, 0);
    assert!(r.events > 100, "{} events", r.events);
    let t = r.totals;
    let expected = r.nr_cpus as u64 * r.duration_ns;
    assert!(
        t.cpu_ns.abs_diff(expected) * 1000 <= expected,
        "cpu_ns {} vs {expected}",
        t.cpu_ns
    );
    assert_eq!(t.lc_ns + t.be_ns + t.idle_ns + t.other_ns, t.cpu_ns);
    for c in &r.per_cpu {
        let s = &c.stats;
        assert_eq!(
            s.lc_ns + s.be_ns + s.idle_ns + s.other_ns,
            s.cpu_ns,
            "cpu {}",
            c.cpu
        );
        assert!(
            s.inversion_ns <= s.be_ns && s.idle_while_lc_waits_ns <= s.idle_ns,
            "cpu {}",
            c.cpu
        );
    }
    assert!(t.lc_ns > 0 && t.be_ns > 0 && t.other_ns > 0, "{t:?}");
    let w = r.lc_wait_us;
    assert!(
        w.count > 0 && w.p50 <= w.p99 && w.p99 <= w.max * 1.001 && w.mean > 0.0,
        "{w:?}"
    );

    let tasks = r.tasks.as_ref().expect("per-task table");
    let tier_of = |pid: u32| tasks.iter().find(|t| t.pid == pid).map(|t| t.tier.as_str());
    // Every worker that ran or waited in the window has its workload's tier;
    // each workload has at least one such worker (slow guests may leave a
    // worker still starting up).
    let expect = ["be", "be", "lc", "other"];
    for (i, (k, want)) in kids.iter().zip(expect).enumerate() {
        let seen: Vec<(u32, &str)> = k
            .iter()
            .filter_map(|&p| tier_of(p).map(|t| (p, t)))
            .collect();
        assert!(
            !seen.is_empty(),
            "workload {i} ({want}): no worker in the window: {k:?}"
        );
        for (pid, tier) in seen {
            assert_eq!(tier, want, "workload {i}, pid {pid}");
        }
    }
    let lc_row = kids[2]
        .iter()
        .find_map(|&p| tasks.iter().find(|t| t.pid == p));
    let row = lc_row.expect("LC worker row");
    assert!(row.comm.starts_with("stress-ng"), "comm {:?}", row.comm);
    assert!(row.run_ns > 0);

    // Per cgroup: the histogram covers the window and adds up to the CPU time.
    for key in &per_cgroup {
        let c = &r.cgroups[key];
        eprintln!("cgroup {key}: {c:?}");
        let window_ms = r.duration_ns as f64 / 1e6;
        let sum: f64 = c.time_at_cpus_ms.iter().sum();
        assert!((sum - window_ms).abs() < 1e-3, "{key}: {sum} ms vs {window_ms} ms");
        assert_eq!(c.time_at_cpus_ms.len(), c.max_cpus as usize + 1, "{key}");
        let cpu: f64 = c.time_at_cpus_ms.iter().enumerate().map(|(k, t)| k as f64 * t).sum();
        assert!((cpu - c.cpu_time_ms.total).abs() < 1e-3, "{key}: {cpu} vs {:?}", c.cpu_time_ms);
        assert!(c.max_cpus >= 1 && c.max_cpus as usize <= r.nr_cpus, "{key}");
    }
    // stress-ng -c 1: one worker and a mostly sleeping parent, all BE by pattern
    let c = &r.cgroups[&pat_name];
    assert!(c.max_cpus <= 2, "{c:?}");
    assert!(c.cpu_time_ms.be > 0.0 && c.cpu_time_ms.lc == 0.0, "{c:?}");

    let sched_ext =
        fs::read_to_string("/sys/kernel/sched_ext/state").is_ok_and(|s| s.trim() == "enabled");
    if !sched_ext {
        assert!(
            t.inversion_ns > 0,
            "EEVDF with BE filling the machine shows some inversion"
        );
    }
}
