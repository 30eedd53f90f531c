//! Wire format between the open-loop client and the LC server: fixed-size,
//! little-endian records. The server echoes the request and adds its own
//! timestamps (CLOCK_MONOTONIC, same machine), so the client needs no
//! per-request state.

use std::io::{self, Read, Write};

/// One request: "burn `service_ns` of CPU".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Request {
    pub id: u64,
    /// When the open-loop schedule said to send it.
    pub intended_ns: u64,
    /// When the client actually wrote it (>= intended_ns).
    pub send_ns: u64,
    pub service_ns: u64,
}

/// The server's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Response {
    pub req: Request,
    /// The worker thread returned from read() with the request.
    pub start_ns: u64,
    /// The burn finished (the response is written right after).
    pub end_ns: u64,
    /// Thread CPU time the burn took.
    pub cpu_ns: u64,
}

pub const REQUEST_LEN: usize = 32;
pub const RESPONSE_LEN: usize = 56;

fn put(buf: &mut [u8], i: usize, v: u64) {
    buf[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
}

fn get(buf: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[i * 8..i * 8 + 8]);
    u64::from_le_bytes(b)
}

impl Request {
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        for (i, v) in [self.id, self.intended_ns, self.send_ns, self.service_ns].into_iter().enumerate() {
            put(&mut b, i, v);
        }
        b
    }

    pub fn decode(b: &[u8; REQUEST_LEN]) -> Request {
        Request { id: get(b, 0), intended_ns: get(b, 1), send_ns: get(b, 2), service_ns: get(b, 3) }
    }
}

impl Response {
    pub fn encode(&self) -> [u8; RESPONSE_LEN] {
        let mut b = [0u8; RESPONSE_LEN];
        b[..REQUEST_LEN].copy_from_slice(&self.req.encode());
        for (i, v) in [self.start_ns, self.end_ns, self.cpu_ns].into_iter().enumerate() {
            put(&mut b, 4 + i, v);
        }
        b
    }

    pub fn decode(b: &[u8; RESPONSE_LEN]) -> Response {
        let mut rq = [0u8; REQUEST_LEN];
        rq.copy_from_slice(&b[..REQUEST_LEN]);
        Response { req: Request::decode(&rq), start_ns: get(b, 4), end_ns: get(b, 5), cpu_ns: get(b, 6) }
    }
}

/// Read exactly N bytes; Ok(None) on a clean end of stream before the first byte.
pub fn read_record<const N: usize>(r: &mut impl Read) -> io::Result<Option<[u8; N]>> {
    let mut buf = [0u8; N];
    let mut got = 0;
    while got < N {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "truncated record")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(buf))
}

pub fn write_record(w: &mut impl Write, b: &[u8]) -> io::Result<()> {
    w.write_all(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let rq = Request { id: 7, intended_ns: 1 << 40, send_ns: (1 << 40) + 5, service_ns: 2_000_000 };
        assert_eq!(Request::decode(&rq.encode()), rq);
        let rs = Response { req: rq, start_ns: 11, end_ns: u64::MAX, cpu_ns: 3 };
        assert_eq!(Response::decode(&rs.encode()), rs);
    }

    #[test]
    fn read_record_eof_and_truncation() {
        let mut empty: &[u8] = &[];
        assert!(read_record::<4>(&mut empty).unwrap().is_none());
        let mut short: &[u8] = &[1, 2];
        assert!(read_record::<4>(&mut short).is_err());
        let mut ok: &[u8] = &[1, 2, 3, 4, 5];
        assert_eq!(read_record::<4>(&mut ok).unwrap(), Some([1, 2, 3, 4]));
    }
}
