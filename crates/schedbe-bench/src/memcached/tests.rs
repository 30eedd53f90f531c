use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::run::schedule;
use super::*;

#[test]
fn schedule_is_a_function_of_the_seed() {
    let a: Vec<_> = schedule(1000.0, 50, 0, 2_000_000_000, 7).unwrap().collect();
    let b: Vec<_> = schedule(1000.0, 50, 0, 2_000_000_000, 7).unwrap().collect();
    let c: Vec<_> = schedule(1000.0, 50, 0, 2_000_000_000, 8).unwrap().collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!((1800..2200).contains(&a.len()), "{}", a.len());
    assert!(a.windows(2).all(|w| w[0].0 <= w[1].0));
    assert!(a.iter().all(|&(t, k)| t < 2_000_000_000 && k < 50));
    // Every key is used, none much more than the others.
    let mut n = [0usize; 50];
    a.iter().for_each(|&(_, k)| n[k] += 1);
    assert!(n.iter().all(|&x| (15..70).contains(&x)), "{n:?}");
    assert!(schedule(1000.0, 0, 0, 1, 1).is_err());
    assert!(schedule(0.0, 5, 0, 1, 1).is_err());
}

/// A stand-in for memcached: key k%4==0 is a miss, k%4==3 a SERVER_ERROR,
/// the others hits; every reply goes out in two writes.
fn fake_server(conns: usize) -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let mut hs = Vec::new();
        for _ in 0..conns {
            let (s, _) = l.accept().unwrap();
            hs.push(std::thread::spawn(move || {
                let mut w = s.try_clone().unwrap();
                w.set_nodelay(true).unwrap();
                for line in BufReader::new(s).lines() {
                    let Ok(line) = line else { return };
                    let k: usize = line.strip_prefix("get key:").unwrap().trim().parse().unwrap();
                    let reply = match k % 4 {
                        0 => "END\r\n".to_string(),
                        3 => "SERVER_ERROR out of memory writing get response\r\n".to_string(),
                        _ => format!("VALUE key:{k} 0 4\r\nv{k:03}\r\nEND\r\n"),
                    };
                    let (a, b) = reply.as_bytes().split_at(reply.len() / 2);
                    if w.write_all(a).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                    if w.write_all(b).is_err() {
                        return;
                    }
                }
            }));
        }
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    (addr, h)
}

#[test]
fn open_loop_against_a_fake_server() {
    let (addr, server) = fake_server(3);
    let load = McLoad { addr, rate_per_s: 2000.0, duration: Duration::from_millis(300), conns: 3, keys: 20, seed: 5, ..McLoad::default() };
    let r = run(&load).unwrap();
    server.join().unwrap();
    let expect: Vec<usize> = schedule(load.rate_per_s, load.keys, r.start_ns, r.end_ns, load.seed).unwrap().map(|(_, k)| k).collect();
    let count = |f: &dyn Fn(usize) -> bool| expect.iter().filter(|&&k| f(k)).count() as u64;
    assert_eq!(r.scheduled, expect.len() as u64);
    assert_eq!(r.sent, r.scheduled);
    assert_eq!(r.misses, count(&|k| k % 4 == 0));
    assert_eq!(r.error_replies, count(&|k| k % 4 == 3));
    assert_eq!(r.hits, count(&|k| k % 4 == 1 || k % 4 == 2));
    assert_eq!(r.errors, r.error_replies);
    assert_eq!((r.unanswered, r.send_failed), (0, 0));
    assert_eq!(r.received + r.errors, r.scheduled);
    assert_eq!(r.latency.count, r.received);
    assert!(r.latency.p50_us >= 200.0 && r.latency.p999_us >= r.latency.p99_us && r.latency.max_us >= r.latency.p999_us);
    assert!(r.warnings.iter().any(|w| w.contains("SERVER_ERROR")), "{:?}", r.warnings);
    let js = serde_json::to_value(&r).unwrap();
    assert!(js["latency"]["p999_us"].is_number() && js["sender_lag_max_us"].is_number());
}

#[test]
fn silent_server_means_unanswered_errors() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    // Accepts (the backlog does) but never answers.
    let load = McLoad {
        addr,
        rate_per_s: 200.0,
        duration: Duration::from_millis(200),
        conns: 2,
        drain_timeout: Duration::from_millis(100),
        ..McLoad::default()
    };
    let r = run(&load).unwrap();
    drop(l);
    assert!(r.sent > 10);
    assert_eq!(r.received, 0);
    assert_eq!(r.unanswered, r.sent);
    assert_eq!(r.errors, r.scheduled);
    assert_eq!(r.latency.count, 0);
}

#[test]
fn preload_reports_refusals() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert_eq!(line, "set key:0 0 0 3\r\n");
        line.clear();
        r.read_line(&mut line).unwrap();
        assert_eq!(line, "abc\r\n");
        w.write_all(b"SERVER_ERROR out of memory storing object\r\n").unwrap();
    });
    let e = preload(&addr, 1, 3).unwrap_err();
    h.join().unwrap();
    let msg = format!("{e:#}");
    assert!(msg.contains("key:0") && msg.contains("SERVER_ERROR out of memory"), "{msg}");
    assert!(preload(&addr, 0, 3).is_ok());
}

/// A memcached child, killed when dropped.
struct Memcached(Child);

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const MEMCACHED: &str = "/usr/bin/memcached";

fn start_memcached() -> (Memcached, String) {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut cmd = Command::new(MEMCACHED);
    cmd.args(["-p", &port.to_string(), "-t", "1", "-U", "0", "-l", "127.0.0.1"]);
    // memcached refuses to run as root without -u.
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } == 0 {
        cmd.args(["-u", "root"]);
    }
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start memcached");
    (Memcached(child), format!("127.0.0.1:{port}"))
}

/// Needs /usr/bin/memcached; skipped (passes with a note) without it.
#[test]
fn against_memcached() {
    if !Path::new(MEMCACHED).exists() {
        eprintln!("skipped: no {MEMCACHED}");
        return;
    }
    let (_mc, addr) = start_memcached();
    preload(&addr, 100, 100).unwrap();
    let load = McLoad { addr, rate_per_s: 500.0, duration: Duration::from_secs(1), conns: 4, keys: 100, seed: 3, ..McLoad::default() };
    let r = run(&load).unwrap();
    eprintln!("{}", r.summary_line());
    assert!(r.received >= 450, "{r:?}");
    assert_eq!(r.errors, 0, "{r:?}");
    assert_eq!(r.hits, r.received, "every key was preloaded");
}
