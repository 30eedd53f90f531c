//! The open-loop run: one thread, ppoll over the connections, sends on the
//! precomputed Poisson schedule, replies matched FIFO per connection.

use std::collections::VecDeque;
use std::io::Write;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::parse::{get_request, parse_reply, Parsed, Reply};
use super::{connect, McLoad, McResult, FIFO_PRIO};
use crate::client::poll_until;
use crate::load::{Arrivals, ServiceDist};
use crate::stats::LatencyHist;
use crate::sys::{self, monotonic_ns, Policy};

/// Salt of the key sequence's seed (the arrivals use the seed itself).
const KEY_SEED_SALT: u64 = 0x6d63_2d6b_6579_7321;

/// The schedule: intended send times (ns) and key numbers, a function of the
/// seed alone, generated as the run goes (nothing in the run feeds back).
pub(crate) fn schedule(rate_per_s: f64, keys: usize, start_ns: u64, end_ns: u64, seed: u64) -> Result<impl Iterator<Item = (u64, usize)>> {
    if keys == 0 {
        bail!("memcached load: at least one key");
    }
    let mut key_rng = StdRng::seed_from_u64(seed ^ KEY_SEED_SALT);
    let arrivals = Arrivals::new(rate_per_s, ServiceDist::Fixed(1.0), start_ns, seed)?;
    Ok(arrivals.map(|(t, _)| t).take_while(move |&t| t < end_ns).map(move |t| (t, key_rng.random_range(0..keys))))
}

/// Tallies of the replies.
#[derive(Default)]
struct Tally {
    hits: u64,
    misses: u64,
    error_replies: u64,
    /// Outstanding requests of connections that died.
    lost: u64,
    first_error_reply: Option<String>,
}

struct Conn {
    stream: TcpStream,
    fd: libc::c_int,
    /// Received bytes not yet parsed into a reply.
    buf: Vec<u8>,
    /// Intended send times of the requests awaiting a reply, oldest first.
    pending: VecDeque<u64>,
    dead: bool,
}

impl Conn {
    fn die(&mut self, i: usize, why: String, t: &mut Tally, warnings: &mut Vec<String>) {
        if !self.dead {
            self.dead = true;
            t.lost += self.pending.len() as u64;
            warnings.push(format!("connection {i}: {why} ({} requests outstanding counted as errors)", self.pending.len()));
            self.pending.clear();
        }
    }

    /// Read what is there without blocking; match complete replies.
    fn on_readable(&mut self, i: usize, chunk: &mut [u8], hist: &mut LatencyHist, t: &mut Tally, warnings: &mut Vec<String>) {
        while !self.dead {
            // SAFETY: chunk is valid writable memory of its length.
            let n = unsafe { libc::recv(self.fd, chunk.as_mut_ptr().cast(), chunk.len(), libc::MSG_DONTWAIT) };
            if n == 0 {
                let why = if self.pending.is_empty() { "closed by the server".to_string() } else { "closed by the server with replies missing".to_string() };
                self.die(i, why, t, warnings);
                return;
            }
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.kind() {
                    std::io::ErrorKind::WouldBlock => return,
                    std::io::ErrorKind::Interrupted => continue,
                    _ => return self.die(i, format!("receive: {e}"), t, warnings),
                }
            }
            let recv_ns = monotonic_ns();
            self.buf.extend_from_slice(&chunk[..n as usize]);
            let mut off = 0;
            loop {
                match parse_reply(&self.buf[off..]) {
                    Ok(Parsed::Incomplete) => break,
                    Ok(Parsed::Done(reply, used)) => {
                        off += used;
                        let Some(intended) = self.pending.pop_front() else {
                            return self.die(i, format!("a reply ({reply:?}) to no request"), t, warnings);
                        };
                        match reply {
                            Reply::Hit => t.hits += 1,
                            Reply::Miss => t.misses += 1,
                            Reply::Error(e) => {
                                t.error_replies += 1;
                                t.first_error_reply.get_or_insert(e);
                                continue;
                            }
                        }
                        hist.record_ns(recv_ns.saturating_sub(intended));
                    }
                    Err(e) => return self.die(i, format!("protocol error: {e}"), t, warnings),
                }
            }
            self.buf.drain(..off);
        }
    }
}

/// Run `load` against its memcached; see the module documentation.
pub fn run(load: &McLoad) -> Result<McResult> {
    if load.conns == 0 || load.conns > 4096 {
        bail!("memcached load: conns must be in 1..=4096, got {}", load.conns);
    }
    if load.keys == 0 {
        bail!("memcached load: at least one key");
    }
    if !(load.rate_per_s.is_finite() && load.rate_per_s > 0.0) {
        bail!("memcached load: rate must be positive, got {}", load.rate_per_s);
    }
    if load.duration.is_zero() || load.duration > Duration::from_secs(86_400) {
        bail!("memcached load: duration must be in (0, 86400] s");
    }
    if !load.fifo {
        return run_here(load, Vec::new());
    }
    // A thread of its own, so the caller's policy stays as it was.
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("mc-client".into())
            .spawn_scoped(s, || {
                let mut warnings = Vec::new();
                if let Err(e) = Policy::Fifo(FIFO_PRIO).apply_to_current_thread(true) {
                    warnings.push(format!("could not switch to SCHED_FIFO {FIFO_PRIO}: {e:#}; running unprotected"));
                }
                run_here(load, warnings)
            })
            .context("spawn the client thread")?;
        h.join().map_err(|_| anyhow::anyhow!("the memcached client thread panicked"))?
    })
}

/// The loop, on the calling thread at its current policy.
fn run_here(load: &McLoad, mut warnings: Vec<String>) -> Result<McResult> {
    let client_policy = sys::current_policy_desc();
    let mut conns = Vec::with_capacity(load.conns);
    for i in 0..load.conns {
        let stream = connect(&load.addr, load.connect_timeout).with_context(|| format!("connection {i}"))?;
        // A write blocks only if memcached stops reading; then give up on
        // the connection rather than on the whole run.
        stream.set_write_timeout(Some(Duration::from_secs(1))).context("SO_SNDTIMEO")?;
        let fd = stream.as_raw_fd();
        conns.push(Conn { stream, fd, buf: Vec::with_capacity(4096), pending: VecDeque::new(), dead: false });
    }
    let mut pfds: Vec<libc::pollfd> = conns.iter().map(|c| libc::pollfd { fd: c.fd, events: libc::POLLIN, revents: 0 }).collect();

    let start_ns = load.start_at_ns.unwrap_or_else(|| monotonic_ns() + 50_000_000);
    let end_ns = start_ns + load.duration.as_nanos() as u64;
    let mut sched = schedule(load.rate_per_s, load.keys, start_ns, end_ns, load.seed)?.peekable();
    let mut hist = LatencyHist::new();
    let mut lag = LatencyHist::new();
    let mut lag_max_ns = 0u64;
    let mut t = Tally::default();
    let (mut scheduled, mut sent, mut send_failed, mut rr) = (0u64, 0u64, 0u64, 0usize);
    let mut chunk = vec![0u8; 1 << 16];

    let mut receive = |conns: &mut Vec<Conn>, pfds: &mut Vec<libc::pollfd>, t: &mut Tally, warnings: &mut Vec<String>| {
        for (i, (c, p)) in conns.iter_mut().zip(pfds.iter_mut()).enumerate() {
            if p.revents != 0 && !c.dead {
                c.on_readable(i, &mut chunk, &mut hist, t, warnings);
            }
            if c.dead {
                p.fd = -1; // ppoll ignores negative fds
            }
        }
    };

    while let Some(&(next, _)) = sched.peek() {
        let now = monotonic_ns();
        if now < next {
            if poll_until(&mut pfds, next) > 0 {
                receive(&mut conns, &mut pfds, &mut t, &mut warnings);
            }
            continue;
        }
        // Send everything due by `now`, then look at replies again (a zero
        // timeout poll if more are due by then).
        while let Some((intended, k)) = sched.next_if(|&(x, _)| x <= now) {
            scheduled += 1;
            let i = rr % conns.len();
            rr += 1;
            let c = &mut conns[i];
            if c.dead {
                send_failed += 1;
                continue;
            }
            let send_ns = monotonic_ns();
            match c.stream.write_all(&get_request(k)) {
                Ok(()) => {
                    c.pending.push_back(intended);
                    sent += 1;
                    let l = send_ns.saturating_sub(intended);
                    lag.record_ns(l);
                    lag_max_ns = lag_max_ns.max(l);
                }
                Err(e) => {
                    send_failed += 1;
                    c.die(i, format!("send: {e}"), &mut t, &mut warnings);
                    pfds[i].fd = -1;
                }
            }
        }
        if poll_until(&mut pfds, 0) > 0 {
            receive(&mut conns, &mut pfds, &mut t, &mut warnings);
        }
    }

    // Done sending: wait (a while) for what is still outstanding.
    let drain_until = monotonic_ns().max(end_ns) + load.drain_timeout.as_nanos() as u64;
    while conns.iter().any(|c| !c.dead && !c.pending.is_empty()) && monotonic_ns() < drain_until {
        if poll_until(&mut pfds, drain_until) > 0 {
            receive(&mut conns, &mut pfds, &mut t, &mut warnings);
        }
    }
    let still: u64 = conns.iter().map(|c| c.pending.len() as u64).sum();
    if still > 0 {
        warnings.push(format!("{still} requests unanswered {:.1} s after the end of sending", load.drain_timeout.as_secs_f64()));
    }
    if let Some(e) = &t.first_error_reply {
        warnings.push(format!("{} error replies (first: {e:?})", t.error_replies));
    }
    drop(conns);
    let unanswered = still + t.lost;
    let lag_s = lag.summary();
    Ok(McResult {
        addr: load.addr.clone(),
        rate_per_s: load.rate_per_s,
        duration_s: load.duration.as_secs_f64(),
        conns: load.conns,
        keys: load.keys,
        seed: load.seed,
        start_ns,
        end_ns,
        scheduled,
        sent,
        received: t.hits + t.misses,
        hits: t.hits,
        misses: t.misses,
        errors: t.error_replies + unanswered + send_failed,
        error_replies: t.error_replies,
        unanswered,
        send_failed,
        latency: hist.summary(),
        sender_lag_max_us: lag_max_ns as f64 / 1000.0,
        sender_lag_p99_us: lag_s.p99_us,
        client_policy,
        warnings,
    })
}
