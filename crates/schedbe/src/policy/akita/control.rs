//! The Akita daemon's control socket: `schedbe akita add|remove|list` talk to
//! a running `schedbe run --policy akita` through it.
//!
//! Root only, twice over: the socket lives in a 0700 root directory with mode
//! 0600, and the daemon checks each caller's uid (SO_PEERCRED) and refuses
//! anyone but root, because adding or removing a VM moves tasks between
//! servers and changes every co-located VM's deadlines.
//!
//! Protocol: one JSON request line, one JSON reply line, then the connection
//! closes.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use crossbeam::channel::{Receiver, Sender};
use log::warn;
use serde::{Deserialize, Serialize};

pub const DEFAULT_SOCKET: &str = "/run/schedbe/akita.sock";
/// A request line longer than this is not a request.
const MAX_REQUEST: u64 = 1 << 20;
const IO_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Request {
    /// `[[vm]]` tables in vms.toml's syntax.
    Add { toml: String },
    Remove { name: String },
    List,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    pub message: String,
}

/// A request from a caller the listener has checked, and where its reply goes.
pub struct Call {
    pub req: Request,
    pub reply: Sender<Reply>,
}

/// The uid of the process at the other end of `s`.
fn peer_uid(s: &UnixStream) -> Result<u32> {
    let mut cred = libc::ucred { pid: 0, uid: u32::MAX, gid: u32::MAX };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    use std::os::fd::AsRawFd;
    // SAFETY: getsockopt writes at most `len` bytes into the ucred we own.
    let rc = unsafe {
        libc::getsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, &mut cred as *mut _ as *mut libc::c_void, &mut len)
    };
    if rc != 0 {
        bail!("SO_PEERCRED: {}", std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// The bound socket: calls arrive on it for the daemon's loop to answer, and
/// dropping it removes the socket file, on every exit path (a failed attach
/// included), so no stale socket outlives the daemon.
pub struct Control {
    rx: Receiver<Call>,
    path: PathBuf,
}

impl Control {
    /// The calls, for the daemon's loop to wait on beside its other work.
    pub fn calls(&self) -> &Receiver<Call> {
        &self.rx
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Bind the socket (replacing a stale one) and serve it on a thread.
pub fn listen(path: &Path) -> Result<Control> {
    let dir = path.parent().context("control socket path has no directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).with_context(|| format!("cannot chmod {}", dir.display()))?;
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).with_context(|| format!("cannot bind {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).with_context(|| format!("cannot chmod {}", path.display()))?;
    let (tx, rx) = crossbeam::channel::bounded(4);
    std::thread::Builder::new()
        .name("akita-control".into())
        .spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(s) => {
                        if let Err(e) = serve(s, &tx) {
                            warn!("control socket: {e:#}");
                        }
                    }
                    Err(e) => warn!("control socket accept: {e}"),
                }
            }
        })
        .context("cannot start the control socket thread")?;
    Ok(Control { rx, path: path.to_path_buf() })
}

fn serve(s: UnixStream, tx: &Sender<Call>) -> Result<()> {
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut w = s.try_clone()?;
    let reply = match peer_uid(&s) {
        Ok(0) => {
            let mut line = String::new();
            BufReader::new(&s).take(MAX_REQUEST).read_line(&mut line)?;
            match serde_json::from_str::<Request>(&line) {
                Ok(req) => {
                    let (rtx, rrx) = crossbeam::channel::bounded(1);
                    tx.send(Call { req, reply: rtx }).context("the daemon is gone")?;
                    rrx.recv_timeout(IO_TIMEOUT).unwrap_or(Reply { ok: false, message: "the daemon did not answer".into() })
                }
                Err(e) => Reply { ok: false, message: format!("malformed request: {e}") },
            }
        }
        Ok(uid) => Reply { ok: false, message: format!("permission denied: only root may change Akita's VMs (caller uid {uid})") },
        Err(e) => Reply { ok: false, message: format!("cannot identify the caller: {e:#}") },
    };
    writeln!(w, "{}", serde_json::to_string(&reply)?)?;
    Ok(())
}

/// Client side: send one request, return the daemon's reply.
pub fn call(path: &Path, req: &Request) -> Result<Reply> {
    let s = UnixStream::connect(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            anyhow::anyhow!("permission denied on {}: only root may change Akita's VMs", path.display())
        }
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            anyhow::anyhow!("no Akita daemon at {} (is `schedbe run akita` running?)", path.display())
        }
        _ => anyhow::anyhow!("cannot connect to {}: {e}", path.display()),
    })?;
    s.set_read_timeout(Some(IO_TIMEOUT * 2))?;
    let mut w = s.try_clone()?;
    writeln!(w, "{}", serde_json::to_string(req)?)?;
    let mut line = String::new();
    BufReader::new(&s).take(MAX_REQUEST).read_line(&mut line).context("no reply from the daemon")?;
    serde_json::from_str(&line).with_context(|| format!("malformed reply from the daemon: {line:?}"))
}
