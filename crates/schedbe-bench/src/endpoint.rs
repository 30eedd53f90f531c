//! Where the LC server listens: loopback TCP, a Unix socket path, or a Linux
//! abstract Unix socket (no file to clean up; the default).

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{bail, Context, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `tcp:HOST:PORT` (loopback only: the harness never sends elsewhere).
    Tcp(String),
    /// `unix:/path`
    Unix(PathBuf),
    /// `unix:@name` or `@name`
    Abstract(String),
}

impl FromStr for Endpoint {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        if let Some(rest) = s.strip_prefix("tcp:") {
            let host = rest.rsplit_once(':').map(|(h, _)| h).unwrap_or("");
            let port_ok = rest.rsplit_once(':').map(|(_, p)| p.parse::<u16>().is_ok()).unwrap_or(false);
            if !port_ok {
                bail!("endpoint {s:?}: expected tcp:HOST:PORT");
            }
            if !(host == "localhost" || host.starts_with("127.") || host == "[::1]") {
                bail!("endpoint {s:?}: only loopback addresses (127.0.0.0/8, localhost, [::1])");
            }
            return Ok(Endpoint::Tcp(rest.to_string()));
        }
        let rest = s.strip_prefix("unix:").unwrap_or(s);
        if let Some(name) = rest.strip_prefix('@') {
            if name.is_empty() || name.len() > 100 {
                bail!("endpoint {s:?}: abstract name must be 1..=100 bytes");
            }
            return Ok(Endpoint::Abstract(name.to_string()));
        }
        if rest.starts_with('/') && s.starts_with("unix:") {
            if rest.len() > 100 {
                bail!("endpoint {s:?}: Unix socket path too long");
            }
            return Ok(Endpoint::Unix(PathBuf::from(rest)));
        }
        bail!("endpoint {s:?}: expected tcp:127.0.0.1:PORT, unix:/path or unix:@name")
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(a) => write!(f, "tcp:{a}"),
            Endpoint::Unix(p) => write!(f, "unix:{}", p.display()),
            Endpoint::Abstract(n) => write!(f, "unix:@{n}"),
        }
    }
}

pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Endpoint {
    pub fn bind(&self) -> Result<Listener> {
        Ok(match self {
            Endpoint::Tcp(a) => Listener::Tcp(TcpListener::bind(a).with_context(|| format!("bind {self}"))?),
            Endpoint::Unix(p) => {
                if p.exists() {
                    std::fs::remove_file(p).with_context(|| format!("remove stale socket {}", p.display()))?;
                }
                Listener::Unix(UnixListener::bind(p).with_context(|| format!("bind {self}"))?)
            }
            Endpoint::Abstract(n) => {
                let addr = UnixAddr::from_abstract_name(n.as_bytes())?;
                Listener::Unix(UnixListener::bind_addr(&addr).with_context(|| format!("bind {self}"))?)
            }
        })
    }

    pub fn connect(&self) -> io::Result<Stream> {
        Ok(match self {
            Endpoint::Tcp(a) => {
                let s = TcpStream::connect(a)?;
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
            Endpoint::Unix(p) => Stream::Unix(UnixStream::connect(p)?),
            Endpoint::Abstract(n) => Stream::Unix(UnixStream::connect_addr(&UnixAddr::from_abstract_name(n.as_bytes())?)?),
        })
    }
}

impl Listener {
    pub fn accept(&self) -> io::Result<Stream> {
        Ok(match self {
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
            Listener::Unix(l) => Stream::Unix(l.accept()?.0),
        })
    }
}

impl Stream {
    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        assert_eq!("tcp:127.0.0.1:7000".parse::<Endpoint>().unwrap(), Endpoint::Tcp("127.0.0.1:7000".into()));
        assert_eq!("unix:@x".parse::<Endpoint>().unwrap(), Endpoint::Abstract("x".into()));
        assert_eq!("@x".parse::<Endpoint>().unwrap(), Endpoint::Abstract("x".into()));
        assert_eq!("unix:/tmp/s".parse::<Endpoint>().unwrap(), Endpoint::Unix("/tmp/s".into()));
        for bad in ["tcp:10.0.0.1:80", "tcp:127.0.0.1", "tcp:127.0.0.1:99999", "unix:rel", "@", "x"] {
            assert!(bad.parse::<Endpoint>().is_err(), "{bad}");
        }
        for s in ["tcp:127.0.0.1:7000", "unix:@x", "unix:/tmp/s"] {
            assert_eq!(s.parse::<Endpoint>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn abstract_roundtrip() {
        let ep: Endpoint = format!("unix:@schedbe-bench-test-{}", std::process::id()).parse().unwrap();
        let l = ep.bind().unwrap();
        let mut c = ep.connect().unwrap();
        let mut s = l.accept().unwrap();
        c.write_all(b"hi").unwrap();
        let mut b = [0u8; 2];
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"hi");
    }
}
