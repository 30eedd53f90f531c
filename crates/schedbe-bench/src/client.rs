//! `schedbe-bench client`: the open-loop load generator. Requests leave on a
//! Poisson schedule computed in advance from a seed; latency is measured
//! from the *intended* send time, so a late sender (or a server that makes
//! the sender wait) shows up as latency, never as silently missing load
//! (no coordinated omission). The sender's own lag is recorded per request
//! and reported.
//!
//! One thread does everything: it sleeps in ppoll until the next intended
//! send time or a response, whichever comes first, so a request costs the
//! machine about two client wakeups (which matters under emulation, where a
//! wakeup costs ~15x native), and there is one RT thread, not one per
//! connection.
//!
//! Not starving the client: by default it runs SCHED_FIFO (priority 60)
//! with SCHED_RESET_ON_FORK; `--cpus` can instead (or also) pin it to CPUs
//! the experiment does not use. The summary says which.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::Shutdown;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::endpoint::{Endpoint, Stream};
use crate::load::{rate_for_util, util_for_rate, Arrivals, ServiceDist};
use crate::proto::{Request, Response, RESPONSE_LEN};
use crate::stats::{LatencyHist, LatencySummary};
use crate::sys::{self, monotonic_ns, Policy};

#[derive(clap::Args, Debug, Clone)]
pub struct ClientArgs {
    /// Server endpoint: tcp:127.0.0.1:PORT, unix:/path or unix:@name
    #[arg(long, default_value = "unix:@schedbe-bench-lc")]
    pub connect: String,
    /// Connections (= server threads)
    #[arg(long, default_value_t = 16)]
    pub conns: usize,
    /// Target utilization of the server's CPUs (rate = util * cpus / mean service)
    #[arg(long, default_value_t = 0.85, conflicts_with = "rate")]
    pub util: f64,
    /// Requests per second (instead of --util)
    #[arg(long)]
    pub rate: Option<f64>,
    /// Number of CPUs the server may use, for --util (default: this process's CPUs)
    #[arg(long)]
    pub server_cpus: Option<usize>,
    /// Service demand per request: fixed:US, exp:US (mean), or US
    #[arg(long, default_value = "fixed:2000")]
    pub service: String,
    /// Seconds of sending
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Start sending at this CLOCK_MONOTONIC time in ns (default: 100 ms from now)
    #[arg(long)]
    pub start_at_ns: Option<u64>,
    /// Seed of the arrival and service-time sequence
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Repeat the arrivals of the first SECS seconds for the rest of the run
    /// (0: one Poisson sequence throughout)
    #[arg(long, default_value_t = 0.0)]
    pub repeat_every_secs: f64,
    /// Per-request records (CSV)
    #[arg(long)]
    pub records: Option<PathBuf>,
    /// Summary (JSON); default stdout
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// SCHED_FIFO priority of every client thread, with SCHED_RESET_ON_FORK (0: leave the policy alone)
    #[arg(long, default_value_t = 60)]
    pub rt_prio: u8,
    /// Pin the client to these CPUs (e.g. one the experiment does not use)
    #[arg(long)]
    pub cpus: Option<String>,
    /// How to spread requests: least (fewest outstanding, round robin) or random
    #[arg(long, default_value = "least")]
    pub pick: String,
    /// After sending, wait at most this long for outstanding responses
    #[arg(long, default_value_t = 30.0)]
    pub drain_timeout: f64,
    /// Keep retrying the first connection this long (the server may still be starting)
    #[arg(long, default_value_t = 20.0)]
    pub connect_timeout: f64,
    /// Print live statistics to stderr every N seconds (0: never)
    #[arg(long, default_value_t = 0.0)]
    pub progress_secs: f64,
    /// Prefix for progress lines
    #[arg(long, default_value = "client")]
    pub label: String,
}

/// One answered request. Times are CLOCK_MONOTONIC ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Record {
    pub conn: u32,
    pub id: u64,
    pub intended_ns: u64,
    pub send_ns: u64,
    pub recv_ns: u64,
    pub service_ns: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub cpu_ns: u64,
}

impl Record {
    pub const CSV_HEADER: &'static str = "conn,id,intended_ns,send_ns,recv_ns,service_ns,start_ns,end_ns,cpu_ns";

    /// End-to-end latency from the intended send time.
    pub fn latency_ns(&self) -> u64 {
        self.recv_ns.saturating_sub(self.intended_ns)
    }

    /// How late the client sent it.
    pub fn lag_ns(&self) -> u64 {
        self.send_ns.saturating_sub(self.intended_ns)
    }

    pub fn to_csv(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{}",
            self.conn, self.id, self.intended_ns, self.send_ns, self.recv_ns, self.service_ns, self.start_ns, self.end_ns, self.cpu_ns
        )
    }

    pub fn from_csv(line: &str) -> Result<Record> {
        let v: Vec<u64> = line
            .trim()
            .split(',')
            .map(|f| f.parse::<u64>())
            .collect::<std::result::Result<_, _>>()
            .with_context(|| format!("bad record line {line:?}"))?;
        if v.len() != 9 || v[0] > u32::MAX as u64 {
            bail!("bad record line {line:?}: expected 9 fields");
        }
        Ok(Record {
            conn: v[0] as u32,
            id: v[1],
            intended_ns: v[2],
            send_ns: v[3],
            recv_ns: v[4],
            service_ns: v[5],
            start_ns: v[6],
            end_ns: v[7],
            cpu_ns: v[8],
        })
    }
}

pub fn write_records(path: &Path, recs: &[Record]) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut w = BufWriter::new(f);
    writeln!(w, "{}", Record::CSV_HEADER)?;
    for r in recs {
        writeln!(w, "{}", r.to_csv())?;
    }
    w.flush().with_context(|| format!("write {}", path.display()))
}

pub fn read_records(path: &Path) -> Result<Vec<Record>> {
    let f = std::fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line.with_context(|| format!("read {}", path.display()))?;
        if i == 0 && line.starts_with("conn,") || line.trim().is_empty() {
            continue;
        }
        out.push(Record::from_csv(&line).with_context(|| format!("{}:{}", path.display(), i + 1))?);
    }
    Ok(out)
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ClientSummary {
    pub endpoint: String,
    pub conns: usize,
    pub rate_per_s: f64,
    pub target_util: f64,
    pub server_cpus: usize,
    pub service: ServiceDist,
    pub seed: u64,
    pub start_ns: u64,
    /// Intended time of the last send window end.
    pub end_ns: u64,
    pub sent: u64,
    pub received: u64,
    /// Sent but not answered before the drain timeout.
    pub unanswered: u64,
    /// How the client kept itself from being starved.
    pub protection: String,
    /// The policy client threads actually ran at.
    pub client_policy: String,
    pub client_cpus: String,
    /// Send lag (actual - intended send time) over all sends, in us.
    pub send_lag: LatencySummary,
    /// Fraction of sends more than 1 ms late.
    pub late_1ms_frac: f64,
    /// Latency from the intended send time over all answered requests.
    pub latency: LatencySummary,
    pub warnings: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pick {
    Least,
    Random,
}

/// Receiving side of one connection: a buffer for a partly read response.
struct Conn {
    stream: Stream,
    fd: libc::c_int,
    buf: [u8; RESPONSE_LEN],
    got: usize,
    outstanding: u32,
    /// The server closed it (or it failed) after our shutdown(Write).
    closed: bool,
    error: Option<String>,
}

impl Conn {
    /// Read what is there without blocking; push complete responses.
    fn drain_readable(&mut self, i: usize, out: &mut Vec<Record>, progress: &mut LatencyHist) {
        loop {
            // SAFETY: buf[got..] is valid writable memory of that length.
            let n = unsafe {
                libc::recv(self.fd, self.buf[self.got..].as_mut_ptr().cast(), RESPONSE_LEN - self.got, libc::MSG_DONTWAIT)
            };
            if n > 0 {
                self.got += n as usize;
                if self.got == RESPONSE_LEN {
                    let recv_ns = monotonic_ns();
                    let resp = Response::decode(&self.buf);
                    self.got = 0;
                    let rec = Record {
                        conn: i as u32,
                        id: resp.req.id,
                        intended_ns: resp.req.intended_ns,
                        send_ns: resp.req.send_ns,
                        recv_ns,
                        service_ns: resp.req.service_ns,
                        start_ns: resp.start_ns,
                        end_ns: resp.end_ns,
                        cpu_ns: resp.cpu_ns,
                    };
                    self.outstanding = self.outstanding.saturating_sub(1);
                    progress.record_ns(rec.latency_ns());
                    out.push(rec);
                }
                continue;
            }
            if n == 0 {
                if self.got != 0 {
                    self.error = Some(format!("connection {i}: truncated response at end of stream"));
                }
                self.closed = true;
                return;
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::WouldBlock => return,
                std::io::ErrorKind::Interrupted => continue,
                _ => {
                    self.error = Some(format!("connection {i}: {e}"));
                    self.closed = true;
                    return;
                }
            }
        }
    }
}

/// Wait until a connection is readable or CLOCK_MONOTONIC reaches
/// `until_ns` (ppoll: nanosecond timeout; RT threads get no timer slack).
pub(crate) fn poll_until(pfds: &mut [libc::pollfd], until_ns: u64) -> usize {
    let now = monotonic_ns();
    let left = until_ns.saturating_sub(now);
    let ts = libc::timespec { tv_sec: (left / 1_000_000_000) as libc::time_t, tv_nsec: (left % 1_000_000_000) as libc::c_long };
    for p in pfds.iter_mut() {
        p.revents = 0;
    }
    // SAFETY: pfds is a valid slice of pollfd; ts a valid timespec; no sigmask.
    let rc = unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, &ts, std::ptr::null()) };
    if rc < 0 { 0 } else { rc as usize }
}

pub fn run(a: &ClientArgs) -> Result<()> {
    let ep: Endpoint = a.connect.parse()?;
    let service: ServiceDist = a.service.parse()?;
    let pick = match a.pick.as_str() {
        "least" => Pick::Least,
        "random" => Pick::Random,
        p => bail!("--pick {p:?}: expected least or random"),
    };
    if a.conns == 0 || a.conns > 4096 {
        bail!("--conns must be in 1..=4096");
    }
    if !(a.duration.is_finite() && a.duration > 0.0 && a.duration <= 86_400.0) {
        bail!("--duration must be in (0, 86400] seconds");
    }
    let mut warnings = Vec::new();
    let client_cpus = match &a.cpus {
        Some(c) => {
            let cpus = sys::parse_cpu_list(c)?;
            sys::set_affinity(&cpus)?;
            sys::format_cpu_list(&cpus)
        }
        None => "any".to_string(),
    };
    let server_cpus = match a.server_cpus {
        Some(n) => n,
        None => sys::allowed_cpus()?.len(),
    };
    let rate = match a.rate {
        Some(r) => r,
        None => rate_for_util(a.util, server_cpus, service.mean_us())?,
    };
    let target_util = util_for_rate(rate, server_cpus, service.mean_us());
    let rt = if a.rt_prio > 0 { Some(Policy::Fifo(a.rt_prio.min(99))) } else { None };
    if let Some(p) = rt {
        if let Err(e) = p.apply_to_current_thread(true) {
            let w = format!("could not switch to SCHED_FIFO: {e:#}; running unprotected");
            eprintln!("{}: warning: {w}", a.label);
            warnings.push(w);
        }
    }
    let client_policy = sys::current_policy_desc();
    let prio = match rt {
        Some(Policy::Fifo(x)) => x,
        _ => 0,
    };
    let protection = match (rt, &a.cpus) {
        (Some(_), None) => format!("one client thread (ppoll over all connections) at SCHED_FIFO priority {prio} with SCHED_RESET_ON_FORK"),
        (Some(_), Some(_)) => format!("one client thread (ppoll over all connections) at SCHED_FIFO priority {prio} with SCHED_RESET_ON_FORK, pinned to CPUs {client_cpus}"),
        (None, Some(_)) => format!("one client thread pinned to CPUs {client_cpus} (no RT priority)"),
        (None, None) => "none (an ordinary SCHED_NORMAL thread: may be starved by the workloads)".to_string(),
    };

    // Connect (retrying while the server starts).
    let deadline = monotonic_ns() + (a.connect_timeout.max(0.0) * 1e9) as u64;
    let mut conns: Vec<Conn> = Vec::with_capacity(a.conns);
    while conns.len() < a.conns {
        match ep.connect() {
            Ok(s) => {
                let fd = s.raw_fd();
                conns.push(Conn { stream: s, fd, buf: [0; RESPONSE_LEN], got: 0, outstanding: 0, closed: false, error: None });
            }
            Err(e) if monotonic_ns() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e).with_context(|| format!("connect {ep} (connection {})", conns.len())),
        }
    }
    let mut pfds: Vec<libc::pollfd> = conns.iter().map(|c| libc::pollfd { fd: c.fd, events: libc::POLLIN, revents: 0 }).collect();

    // The open-loop schedule, one thread: sleep in ppoll until the next
    // intended send or a response, whichever comes first.
    let start_ns = a.start_at_ns.unwrap_or_else(|| monotonic_ns() + 100_000_000);
    let end_ns = start_ns + (a.duration * 1e9) as u64;
    let mut recs: Vec<Record> = Vec::with_capacity((rate * a.duration * 1.05) as usize + 16);
    let mut progress = LatencyHist::new();
    let mut lag = LatencyHist::new();
    let mut late_1ms = 0u64;
    let mut sent = 0u64;
    let mut rr = 0usize;
    let mut pick_rng = 0x2545_F491_4F6C_DD1Du64 ^ a.seed;
    let progress_ns = (a.progress_secs.max(0.0) * 1e9) as u64;
    let printer = Printer::start(&a.label);
    let mut next_progress = if progress_ns > 0 { start_ns + progress_ns } else { u64::MAX };
    let mut interval_lag_max = 0u64;
    let period_ns = (a.repeat_every_secs.max(0.0) * 1e9) as u64;
    let schedule: Vec<(u64, u64)> = if period_ns > 0 {
        crate::load::repeated(Arrivals::new(rate, service, start_ns, a.seed)?, start_ns, period_ns, end_ns)
    } else {
        Arrivals::new(rate, service, start_ns, a.seed)?.take_while(|&(t, _)| t < end_ns).collect()
    };
    let mut arrivals = schedule.into_iter().peekable();
    let receive = |conns: &mut Vec<Conn>, pfds: &mut Vec<libc::pollfd>, recs: &mut Vec<Record>, progress: &mut LatencyHist| {
        for (i, p) in pfds.iter_mut().enumerate() {
            if p.revents != 0 && !conns[i].closed {
                conns[i].drain_readable(i, recs, progress);
                if conns[i].closed {
                    p.fd = -1; // ppoll ignores negative fds
                }
            }
        }
    };
    loop {
        let next_send = arrivals.peek().map(|&(t, _)| t).unwrap_or(end_ns);
        let wake = next_send.min(next_progress);
        if monotonic_ns() < wake {
            if poll_until(&mut pfds, wake) > 0 {
                receive(&mut conns, &mut pfds, &mut recs, &mut progress);
            }
            continue;
        }
        if next_progress <= next_send && next_progress <= monotonic_ns() {
            printer.progress(next_progress, start_ns, sent, recs.len(), &mut progress, interval_lag_max);
            interval_lag_max = 0;
            next_progress += progress_ns;
            continue;
        }
        let Some((intended_ns, service_ns)) = arrivals.next() else { break };
        let c = match pick {
            Pick::Least => {
                let n = conns.len();
                let mut best = rr % n;
                let mut best_v = u32::MAX;
                for k in 0..n {
                    let j = (rr + k) % n;
                    let v = conns[j].outstanding;
                    if v < best_v {
                        best = j;
                        best_v = v;
                        if v == 0 {
                            break;
                        }
                    }
                }
                rr = best + 1;
                best
            }
            Pick::Random => {
                pick_rng ^= pick_rng << 13;
                pick_rng ^= pick_rng >> 7;
                pick_rng ^= pick_rng << 17;
                (pick_rng % conns.len() as u64) as usize
            }
        };
        let send_ns = monotonic_ns();
        let req = Request { id: sent, intended_ns, send_ns, service_ns };
        conns[c].outstanding += 1;
        // Blocking write: 32 bytes fit the socket buffer unless the server
        // stopped reading; then the delay shows up as send lag and latency.
        conns[c].stream.write_all(&req.encode()).with_context(|| format!("send on connection {c} (server gone?)"))?;
        let l = send_ns.saturating_sub(intended_ns);
        lag.record_ns(l);
        interval_lag_max = interval_lag_max.max(l);
        if l > 1_000_000 {
            late_1ms += 1;
        }
        sent += 1;
    }
    // No more requests: the server finishes what it has, then closes.
    for c in &conns {
        let _ = c.stream.shutdown(Shutdown::Write);
    }
    let drain_deadline = monotonic_ns() + (a.drain_timeout.max(0.0) * 1e9) as u64;
    while conns.iter().any(|c| !c.closed) && monotonic_ns() < drain_deadline {
        let until = if progress_ns > 0 { next_progress.min(drain_deadline) } else { drain_deadline };
        if poll_until(&mut pfds, until) > 0 {
            receive(&mut conns, &mut pfds, &mut recs, &mut progress);
        }
        let now = monotonic_ns();
        if now >= next_progress {
            printer.progress(now, start_ns, sent, recs.len(), &mut progress, interval_lag_max);
            interval_lag_max = 0;
            next_progress = now + progress_ns;
        }
    }
    let rx_errors: Vec<String> = conns.iter().filter_map(|c| c.error.clone()).collect();
    if let Some(e) = rx_errors.first() {
        warnings.push(format!("{} connection(s) ended with an error (first: {e})", rx_errors.len()));
    }
    drop(conns);
    recs.sort_by_key(|r| r.intended_ns);
    let received = recs.len() as u64;
    let unanswered = sent.saturating_sub(received);
    if unanswered > 0 {
        warnings.push(format!("{unanswered} of {sent} requests unanswered after the {} s drain timeout", a.drain_timeout));
    }
    let send_lag = lag.summary();
    let mean_service_us = service.mean_us();
    if send_lag.p99_us > 0.1 * mean_service_us {
        warnings.push(format!(
            "client lag: p99 send lag {:.0} us is over 10% of the mean service time ({mean_service_us:.0} us); latencies include it (measured from intended send times)",
            send_lag.p99_us
        ));
    }
    let latency = crate::stats::summarize_ns(recs.iter().map(|r| r.latency_ns()));
    let summary = ClientSummary {
        endpoint: ep.to_string(),
        conns: a.conns,
        rate_per_s: rate,
        target_util,
        server_cpus,
        service,
        seed: a.seed,
        start_ns,
        end_ns,
        sent,
        received,
        unanswered,
        protection,
        client_policy,
        client_cpus,
        late_1ms_frac: if sent > 0 { late_1ms as f64 / sent as f64 } else { 0.0 },
        send_lag,
        latency,
        warnings,
    };
    if let Some(p) = &a.records {
        write_records(p, &recs)?;
    }
    let js = serde_json::to_string_pretty(&summary)?;
    match &a.summary {
        Some(p) => std::fs::write(p, js + "\n").with_context(|| format!("write {}", p.display()))?,
        None => println!("{js}"),
    }
    for w in &summary.warnings {
        eprintln!("{}: warning: {w}", a.label);
    }
    Ok(())
}

/// Progress lines go to stderr from a thread of their own. The sending thread
/// never writes to the console itself: a write to a slow console blocks for
/// milliseconds, and every progress line would then show up as send lag
/// (docs/results-kubernetes.md, "A harness fix on the way").
struct Printer {
    label: String,
    tx: Option<std::sync::mpsc::SyncSender<String>>,
}

impl Printer {
    fn start(label: &str) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel::<String>(64);
        // SCHED_RESET_ON_FORK (set with the client's RT priority) makes this
        // thread SCHED_OTHER; should it fail to start, lines go nowhere.
        let spawned = std::thread::Builder::new().name("client-progress".into()).spawn(move || {
            for line in rx {
                eprintln!("{line}");
            }
        });
        Printer { label: label.to_string(), tx: spawned.ok().map(|_| tx) }
    }

    /// The interval's line, from `h`, which starts over. Never blocks: a line
    /// that finds the queue full is dropped.
    fn progress(&self, now: u64, start: u64, sent: u64, done: usize, h: &mut LatencyHist, lag_max: u64) {
        let s = h.summary();
        *h = LatencyHist::new();
        let line = format!(
            "{}: t={:5.1}s sent {sent} done {done} | last interval: {} done, mean {:.2} ms, p99 {:.2} ms, max send lag {:.2} ms",
            self.label,
            now.saturating_sub(start) as f64 / 1e9,
            s.count,
            s.mean_us / 1000.0,
            s.p99_us / 1000.0,
            lag_max as f64 / 1e6
        );
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_csv_roundtrip() {
        let r = Record { conn: 3, id: 9, intended_ns: 100, send_ns: 150, recv_ns: 2_100, service_ns: 1_000, start_ns: 200, end_ns: 1_200, cpu_ns: 990 };
        assert_eq!(Record::from_csv(&r.to_csv()).unwrap(), r);
        assert_eq!(r.latency_ns(), 2_000);
        assert_eq!(r.lag_ns(), 50);
        assert!(Record::from_csv("1,2,3").is_err());
        assert!(Record::from_csv("a,b,c,d,e,f,g,h,i").is_err());
        let dir = std::env::temp_dir().join(format!("sbb-rec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("r.csv");
        write_records(&p, &[r, r]).unwrap();
        assert_eq!(read_records(&p).unwrap(), vec![r, r]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
