//! An open-loop memcached load generator (`schedbe-bench mc-client`), for
//! the Akita paper's Fig. 5: a memcached server's latency (p50, p99, p99.9)
//! alone and next to CPU-bound VMs.
//!
//! - [`preload`] stores `key:0 .. key:<keys-1>` with values of a given size.
//! - [`run`] sends `get key:<k>` (k uniform over the keys) on a Poisson
//!   schedule that depends only on the seed (the same arrivals as
//!   `schedbe-bench client`: [`crate::load::Arrivals`]), round robin over a few TCP
//!   connections, several requests outstanding per connection (memcached
//!   answers in order per connection, so replies are matched FIFO). Latency
//!   is measured from the *intended* send time: a late sender shows up as
//!   latency, never as missing load (no coordinated omission).
//!
//! One thread does everything, as in `schedbe-bench client`: it sleeps in ppoll
//! until the next intended send or a reply, so a request costs about two
//! client wakeups; with `fifo` that thread runs SCHED_FIFO 60 (with
//! SCHED_RESET_ON_FORK) so the workloads next to memcached cannot starve it.

mod cli;
pub mod parse;
mod run;
#[cfg(test)]
mod tests;

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::stats::LatencySummary;

pub use cli::{cli, McClientArgs};
pub use run::run;

/// Default memcached address of the experiments (not memcached's 11211, so
/// a system memcached does not get in the way).
pub const DEFAULT_ADDR: &str = "127.0.0.1:11311";

/// SCHED_FIFO priority of the client thread with `fifo` (as `schedbe-bench client`).
pub const FIFO_PRIO: u8 = 60;

/// One open-loop run against a memcached server.
#[derive(Clone, Debug)]
pub struct McLoad {
    /// host:port
    pub addr: String,
    /// Mean request rate of the Poisson arrivals.
    pub rate_per_s: f64,
    /// How long to send.
    pub duration: Duration,
    /// TCP connections; requests go to them round robin.
    pub conns: usize,
    /// Keys are `key:0 .. key:<keys-1>`, picked uniformly.
    pub keys: usize,
    /// Seed of the arrival times and of the keys.
    pub seed: u64,
    /// Run the client thread SCHED_FIFO [`FIFO_PRIO`] (a separate thread, so
    /// the caller's policy does not change); if that fails, a warning.
    pub fifo: bool,
    /// CLOCK_MONOTONIC time of the schedule's start (default: 50 ms after
    /// the connections are up).
    pub start_at_ns: Option<u64>,
    /// After the last send, wait this long for outstanding replies; the
    /// ones still missing then count as errors.
    pub drain_timeout: Duration,
    /// Keep retrying the connections this long (memcached may be starting).
    pub connect_timeout: Duration,
}

impl Default for McLoad {
    fn default() -> Self {
        McLoad {
            addr: DEFAULT_ADDR.to_string(),
            rate_per_s: 1000.0,
            duration: Duration::from_secs(10),
            conns: 4,
            keys: 1000,
            seed: 1,
            fifo: false,
            start_at_ns: None,
            drain_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// What a run measured. `scheduled = received + errors`, and
/// `errors = error_replies + unanswered + send_failed`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct McResult {
    pub addr: String,
    pub rate_per_s: f64,
    pub duration_s: f64,
    pub conns: usize,
    pub keys: usize,
    pub seed: u64,
    /// CLOCK_MONOTONIC ns: the schedule's start and end.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Requests the schedule had in the duration.
    pub scheduled: u64,
    /// Requests written to a connection.
    pub sent: u64,
    /// Answered with a value or END (hits + misses).
    pub received: u64,
    pub hits: u64,
    pub misses: u64,
    /// error_replies + unanswered + send_failed.
    pub errors: u64,
    /// Answered with ERROR, CLIENT_ERROR or SERVER_ERROR.
    pub error_replies: u64,
    /// Sent, but no reply within the drain timeout (or the connection died).
    pub unanswered: u64,
    /// Could not be written (its connection had failed).
    pub send_failed: u64,
    /// From the intended send time to the complete reply, over `received`.
    pub latency: LatencySummary,
    /// How late the client sent (actual - intended send time).
    pub sender_lag_max_us: f64,
    pub sender_lag_p99_us: f64,
    /// The client thread's scheduling policy during the run.
    pub client_policy: String,
    pub warnings: Vec<String>,
}

impl McResult {
    /// One line for humans.
    pub fn summary_line(&self) -> String {
        let l = &self.latency;
        format!(
            "mc-client {}: {:.0} req/s for {:.1} s on {} conns: sent {} received {} (hits {}, misses {}) errors {} | latency us: p50 {:.0} p99 {:.0} p99.9 {:.0} mean {:.1} max {:.0} | sender lag max {:.0} us | {}",
            self.addr,
            self.rate_per_s,
            self.duration_s,
            self.conns,
            self.sent,
            self.received,
            self.hits,
            self.misses,
            self.errors,
            l.p50_us,
            l.p99_us,
            l.p999_us,
            l.mean_us,
            l.max_us,
            self.sender_lag_max_us,
            self.client_policy
        )
    }
}

/// Connect to `addr`, retrying until `timeout` has passed; TCP_NODELAY set.
pub(crate) fn connect(addr: &str, timeout: Duration) -> Result<TcpStream> {
    let t0 = Instant::now();
    loop {
        let attempt = addr
            .to_socket_addrs()
            .with_context(|| format!("memcached address {addr:?} (expected host:port)"))
            .and_then(|mut it| it.next().with_context(|| format!("memcached address {addr:?} resolves to nothing")))
            .and_then(|sa| TcpStream::connect_timeout(&sa, Duration::from_secs(1)).with_context(|| format!("connect to memcached at {addr}")));
        match attempt {
            Ok(s) => {
                s.set_nodelay(true).context("TCP_NODELAY")?;
                return Ok(s);
            }
            Err(e) if t0.elapsed() >= timeout => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Store `key:0 .. key:<keys-1>`, each a `value_size`-byte value, on the
/// memcached at `addr` (sets pipelined in batches; each must be `STORED`).
pub fn preload(addr: &str, keys: usize, value_size: usize) -> Result<()> {
    if value_size > parse::MAX_VALUE {
        bail!("preload: value size {value_size} is over {} bytes", parse::MAX_VALUE);
    }
    if keys == 0 {
        return Ok(());
    }
    let stream = connect(addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).context("SO_RCVTIMEO")?;
    stream.set_write_timeout(Some(Duration::from_secs(10))).context("SO_SNDTIMEO")?;
    let mut rd = BufReader::new(stream.try_clone().context("clone the socket")?);
    let mut wr = BufWriter::with_capacity(1 << 16, stream);
    // ~64 KiB of sets at a time: far below what the socket buffers hold, so
    // the pipeline cannot deadlock.
    let batch = ((1usize << 16) / (value_size + 32)).clamp(1, 256);
    let mut line = Vec::with_capacity(128);
    let mut i = 0;
    while i < keys {
        let hi = (i + batch).min(keys);
        for k in i..hi {
            wr.write_all(&parse::set_request(k, value_size)).with_context(|| format!("preload {addr}: send set {}", parse::key(k)))?;
        }
        wr.flush().with_context(|| format!("preload {addr}: send sets"))?;
        for k in i..hi {
            line.clear();
            let n = rd.read_until(b'\n', &mut line).with_context(|| format!("preload {addr}: reply to set {}", parse::key(k)))?;
            if n == 0 {
                bail!("preload {addr}: connection closed before the reply to set {}", parse::key(k));
            }
            if line != b"STORED\r\n" {
                bail!(
                    "preload {addr}: set {} ({value_size} bytes): expected STORED, got {:?}",
                    parse::key(k),
                    String::from_utf8_lossy(&line).trim_end()
                );
            }
        }
        i = hi;
    }
    Ok(())
}
