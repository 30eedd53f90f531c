//! The stats server every policy runs while loaded: scx_stats' protocol on
//! its usual socket, so that `schedbe stats` (and scx tools) read whichever
//! policy runs. Each policy's top-level stats struct names the policy in the
//! user attribute `_schedbe_policy` (`#[stat(top, _schedbe_policy = "...")]`),
//! which is how `schedbe stats` tells them, and a peer's server, apart.
//!
//! Root only: the socket is created with mode 0700 (umask 077 while it is
//! bound), owned by root, and connecting to a Unix socket needs write
//! permission on it. The server answers only `stats` and `stats_meta`
//! requests, which read.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use crossbeam::channel::{Receiver, Sender};
use log::warn;
use scx_stats::prelude::*;
use serde_json::Value;

/// Where scx_stats servers listen (scx_stats' default path, spelled out so
/// that server and client agree).
pub const SOCKET: &str = "/var/run/scx/root/stats";
/// The user attribute of a top-level stats struct that names the policy.
pub const POLICY_ATTR: &str = "_schedbe_policy";

/// Server data whose "top" target answers each client with the difference
/// between a policy's cumulative sample now and at that client's previous
/// request (`delta(cur, prev)`), as `schedbe run --stats` prints it.
pub fn deltas<S: Send + 'static>(metas: Vec<StatsMeta>, delta: fn(&S, &S) -> Result<Value>) -> StatsServerData<(), S> {
    let open: Box<dyn StatsOpener<(), S>> = Box::new(move |(req_ch, res_ch)| {
        req_ch.send(())?;
        let mut prev = res_ch.recv()?;
        let read: Box<dyn StatsReader<(), S>> = Box::new(move |_args, (req_ch, res_ch)| {
            req_ch.send(())?;
            let cur = res_ch.recv()?;
            let d = delta(&cur, &prev);
            prev = cur;
            d
        });
        Ok(read)
    });
    metas.into_iter().fold(StatsServerData::new(), |d, m| d.add_meta(m)).add_ops("top", StatsOps { open, close: None })
}

/// A launched server and the channels a policy's loop answers it through.
/// Dropping it stops the server and removes the socket.
pub struct Server<S: Send + 'static> {
    server: Option<StatsServer<(), S>>,
    chans: Option<(Sender<S>, Receiver<()>)>,
    path: PathBuf,
}

impl<S: Send + 'static> Server<S> {
    /// Listen at SOCKET. A server that cannot start is logged, not fatal:
    /// the scheduler runs without it.
    pub fn launch(data: StatsServerData<(), S>) -> Self {
        Self::launch_at(data, Path::new(SOCKET))
    }

    pub(crate) fn launch_at(data: StatsServerData<(), S>, path: &Path) -> Self {
        // SAFETY: umask only sets this process's file-creation mask; it is
        // restored right after, and the other threads create no files meanwhile.
        let old = unsafe { libc::umask(0o077) };
        let launched = StatsServer::new(data).set_path(path).launch();
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        match launched {
            Ok(s) => Self { chans: Some(s.channels()), server: Some(s), path: path.to_path_buf() },
            Err(e) => {
                warn!("stats server not started: {e:#}");
                Self { server: None, chans: None, path: path.to_path_buf() }
            }
        }
    }

    /// Wait up to `wait` for a stats client's request and answer it with `sample()`.
    pub fn wait(&self, wait: Duration, sample: impl FnOnce() -> Result<S>) -> Result<()> {
        self.wait_or::<()>(None, wait, sample).map(|_| ())
    }

    /// As `wait`, but return early with what arrives on `other` meanwhile.
    pub fn wait_or<T>(&self, other: Option<&Receiver<T>>, wait: Duration, sample: impl FnOnce() -> Result<S>) -> Result<Option<T>> {
        let (no_req, no_other) = (crossbeam::channel::never(), crossbeam::channel::never());
        let req = self.chans.as_ref().map_or(&no_req, |c| &c.1);
        crossbeam::select! {
            recv(req) -> r => {
                r?;
                if let Some((res, _)) = &self.chans {
                    res.send(sample()?).map_err(|_| anyhow::anyhow!("the stats server is gone"))?;
                }
                Ok(None)
            }
            recv(other.unwrap_or(&no_other)) -> t => Ok(t.ok()),
            default(wait) => Ok(None),
        }
    }
}

impl<S: Send + 'static> Drop for Server<S> {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            // its drop wakes the listener through the socket; the socket goes
            // then, so a client finds no server rather than a refusing one
            drop(server);
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
