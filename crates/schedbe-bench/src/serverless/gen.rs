//! The serverless bench's load generator: replays a request trace open loop
//! against the sandboxes' UDP servers (serverless::pool) and stamps each
//! reply. A request's latency is its reply time minus its *scheduled*
//! arrival, so a late send (the generator itself delayed) counts against
//! the node, not for it.
//!
//! The sender and the receiver are two threads on one socket. They run at
//! SCHED_FIFO when asked: a client on another machine is not scheduled by
//! the node's policy, and sched_ext never schedules RT tasks, so every
//! configuration sees the same client.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use super::trace::Request;
use crate::sys::{monotonic_ns, sleep_until_ns, Policy};

/// What a replay saw.
pub struct Outcome {
    /// Per request (trace order): CLOCK_MONOTONIC of its reply, 0 if none came.
    pub done_ns: Vec<u64>,
    /// Per request: how late it was sent after its scheduled arrival, ns
    /// (u64::MAX if the send failed).
    pub send_lag_ns: Vec<u64>,
}

fn set_buf(sock: &UdpSocket, opt: libc::c_int, bytes: libc::c_int) {
    // SAFETY: setsockopt on our socket with an int option.
    unsafe {
        let p = &bytes as *const libc::c_int as *const libc::c_void;
        libc::setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, opt, p, std::mem::size_of::<libc::c_int>() as libc::socklen_t);
    }
}

/// Send `reqs` (arrival times relative to `t0_ns`) to `ports[request.function]`
/// and wait for the replies until `drain` after the last arrival.
pub fn replay(reqs: &[Request], ports: &[u16], t0_ns: u64, drain: Duration, rt: Option<u8>) -> Result<Outcome> {
    let sock = UdpSocket::bind(("127.0.0.1", 0)).context("bind the load generator's socket")?;
    set_buf(&sock, libc::SO_RCVBUFFORCE, 8 << 20);
    set_buf(&sock, libc::SO_SNDBUFFORCE, 8 << 20);
    sock.set_read_timeout(Some(Duration::from_millis(50))).context("socket timeout")?;
    let rx = sock.try_clone().context("clone the load generator's socket")?;
    let n = reqs.len();
    let last_ns = t0_ns + reqs.last().map_or(0, |r| r.t_ns);
    let end_ns = last_ns + drain.as_nanos() as u64;
    let sent_all = Arc::new(AtomicBool::new(false));
    let sent_flag = sent_all.clone();
    let receiver = std::thread::Builder::new()
        .name("sls-recv".into())
        .spawn(move || -> Vec<u64> {
            if let Some(p) = rt {
                let _ = Policy::Fifo(p).apply_to_current_thread(false);
            }
            let mut done = vec![0u64; n];
            let mut got = 0usize;
            let mut buf = [0u8; 16];
            loop {
                if let Ok((m, _)) = rx.recv_from(&mut buf) {
                    if m >= 4 {
                        let i = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                        if i < n && done[i] == 0 {
                            done[i] = monotonic_ns();
                            got += 1;
                        }
                    }
                }
                let all_sent = sent_flag.load(Ordering::Acquire);
                if (all_sent && got == n) || monotonic_ns() >= end_ns {
                    return done;
                }
            }
        })
        .context("start the receiver thread")?;
    if let Some(p) = rt {
        let _ = Policy::Fifo(p).apply_to_current_thread(false);
    }
    let mut lag = Vec::with_capacity(n);
    for (i, r) in reqs.iter().enumerate() {
        let at = t0_ns + r.t_ns;
        sleep_until_ns(at);
        let mut msg = [0u8; 8];
        msg[..4].copy_from_slice(&(i as u32).to_le_bytes());
        msg[4..].copy_from_slice(&(r.service_us.round().clamp(1.0, u32::MAX as f64) as u32).to_le_bytes());
        let port = ports.get(r.function).copied().with_context(|| format!("request {i}: function {} has no sandbox", r.function))?;
        match sock.send_to(&msg, ("127.0.0.1", port)) {
            Ok(_) => lag.push(monotonic_ns().saturating_sub(at)),
            Err(_) => lag.push(u64::MAX),
        }
    }
    sent_all.store(true, Ordering::Release);
    if rt.is_some() {
        let _ = Policy::Normal.apply_to_current_thread(false);
    }
    let done_ns = receiver.join().map_err(|_| anyhow::anyhow!("the receiver thread panicked"))?;
    Ok(Outcome { done_ns, send_lag_ns: lag })
}
