//! The memcached text protocol, as far as the load generator needs it: the
//! request lines it sends and a streaming parser of `get` replies.
//!
//! A `get` is answered by zero or more `VALUE <key> <flags> <bytes> [<cas>]`
//! header lines, each followed by a data block of `<bytes>` bytes and
//! `\r\n`, and then `END\r\n`; or by one error line (`ERROR`,
//! `CLIENT_ERROR ...`, `SERVER_ERROR ...`) instead.

/// One complete reply to a `get`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// At least one VALUE block, then END.
    Hit,
    /// END alone: the key is not there.
    Miss,
    /// An error line (text without the `\r\n`).
    Error(String),
}

/// What [`parse_reply`] found at the start of a buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not all of the reply has arrived yet.
    Incomplete,
    /// A reply, and how many bytes of the buffer it took.
    Done(Reply, usize),
}

/// Longest line accepted (keys are at most 250 bytes; error texts short).
pub const MAX_LINE: usize = 4096;

/// Largest data block accepted (memcached's item size limit is 1 MB by
/// default, at most 1 GB).
pub const MAX_VALUE: usize = 1 << 30;

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

fn is_error_line(line: &[u8]) -> bool {
    line == b"ERROR" || line.starts_with(b"SERVER_ERROR") || line.starts_with(b"CLIENT_ERROR")
}

/// Byte count of a `VALUE <key> <flags> <bytes> [<cas>]` header.
fn value_bytes(line: &[u8]) -> Result<usize, String> {
    let text = std::str::from_utf8(line).map_err(|_| format!("VALUE line is not UTF-8: {:?}", String::from_utf8_lossy(line)))?;
    let f: Vec<&str> = text.split(' ').collect();
    if !(f.len() == 4 || f.len() == 5) || f[0] != "VALUE" || f[1].is_empty() || f[2].parse::<u32>().is_err() {
        return Err(format!("malformed VALUE line {text:?}"));
    }
    let n: usize = f[3].parse().map_err(|_| format!("malformed VALUE line {text:?}: bad byte count"))?;
    if n > MAX_VALUE {
        return Err(format!("VALUE line {text:?}: {n} bytes is over the {MAX_VALUE}-byte limit"));
    }
    Ok(n)
}

/// Parse the reply to one `get` at the start of `buf`. `Err` is a protocol
/// violation: the stream cannot be trusted any more (replies would no longer
/// match requests), so the caller should give the connection up.
pub fn parse_reply(buf: &[u8]) -> Result<Parsed, String> {
    let mut pos = 0;
    let mut values = 0usize;
    loop {
        let rest = &buf[pos..];
        let Some(eol) = find_crlf(rest) else {
            if rest.len() > MAX_LINE {
                return Err(format!("no line end in {} bytes: {:?}...", rest.len(), String::from_utf8_lossy(&rest[..64])));
            }
            return Ok(Parsed::Incomplete);
        };
        if eol > MAX_LINE {
            return Err(format!("line of {eol} bytes (limit {MAX_LINE})"));
        }
        let line = &rest[..eol];
        let next = pos + eol + 2;
        if line == b"END" {
            return Ok(Parsed::Done(if values > 0 { Reply::Hit } else { Reply::Miss }, next));
        }
        if line.starts_with(b"VALUE ") {
            let n = value_bytes(line)?;
            let end = next + n + 2;
            if buf.len() < end {
                return Ok(Parsed::Incomplete);
            }
            if &buf[end - 2..end] != b"\r\n" {
                return Err(format!("data block of {n} bytes not followed by \\r\\n"));
            }
            values += 1;
            pos = end;
            continue;
        }
        let text = String::from_utf8_lossy(line).into_owned();
        if is_error_line(line) && values == 0 {
            return Ok(Parsed::Done(Reply::Error(text), next));
        }
        return Err(format!("unexpected line {text:?} in a get reply"));
    }
}

/// Name of key number `i`.
pub fn key(i: usize) -> String {
    format!("key:{i}")
}

/// `get key:<i>\r\n`
pub fn get_request(i: usize) -> Vec<u8> {
    format!("get key:{i}\r\n").into_bytes()
}

/// Bytes of the value stored under key `i` (printable, `size` long).
pub fn value(i: usize, size: usize) -> Vec<u8> {
    (0..size).map(|j| b'a' + ((i + j) % 26) as u8).collect()
}

/// `set key:<i> 0 0 <size>\r\n<value>\r\n`
pub fn set_request(i: usize, size: usize) -> Vec<u8> {
    let mut r = format!("set key:{i} 0 0 {size}\r\n").into_bytes();
    r.extend_from_slice(&value(i, size));
    r.extend_from_slice(b"\r\n");
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `chunks` one after another, as reads would deliver them, and
    /// collect the replies the way the client does.
    fn feed(chunks: &[&[u8]]) -> (Vec<Reply>, usize) {
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for c in chunks {
            buf.extend_from_slice(c);
            while let Parsed::Done(r, n) = parse_reply(&buf).unwrap() {
                out.push(r);
                buf.drain(..n);
            }
        }
        (out, buf.len())
    }

    #[test]
    fn hit_split_across_reads() {
        let (r, left) = feed(&[b"VAL", b"UE key 0 3\r\nabc\r\nEND\r\n"]);
        assert_eq!(r, vec![Reply::Hit]);
        assert_eq!(left, 0);
        // Every split point of a hit followed by a miss.
        let whole: &[u8] = b"VALUE key:7 0 5 99\r\na\r\nbc\r\nEND\r\nEND\r\n";
        for cut in 0..=whole.len() {
            let (r, left) = feed(&[&whole[..cut], &whole[cut..]]);
            assert_eq!(r, vec![Reply::Hit, Reply::Miss], "cut {cut}");
            assert_eq!(left, 0);
        }
        // Byte by byte.
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(feed(&bytes).0, vec![Reply::Hit, Reply::Miss]);
    }

    #[test]
    fn incomplete_until_end() {
        assert_eq!(parse_reply(b"").unwrap(), Parsed::Incomplete);
        assert_eq!(parse_reply(b"VALUE key 0 3\r\nab").unwrap(), Parsed::Incomplete);
        assert_eq!(parse_reply(b"VALUE key 0 3\r\nabc\r\n").unwrap(), Parsed::Incomplete);
        assert_eq!(parse_reply(b"VALUE key 0 3\r\nabc\r\nEN").unwrap(), Parsed::Incomplete);
        assert_eq!(parse_reply(b"VALUE key 0 3\r\nabc\r\nEND\r\nxx").unwrap(), Parsed::Done(Reply::Hit, 25));
    }

    #[test]
    fn miss_and_pipelined() {
        assert_eq!(parse_reply(b"END\r\n").unwrap(), Parsed::Done(Reply::Miss, 5));
        let (r, left) = feed(&[b"END\r\nEND\r\nVALUE k 1 0\r\n\r\nEND\r\nEN"]);
        assert_eq!(r, vec![Reply::Miss, Reply::Miss, Reply::Hit]);
        assert_eq!(left, 2);
        // Several VALUE blocks (a multi-get) are one reply.
        assert_eq!(parse_reply(b"VALUE a 0 1\r\nx\r\nVALUE b 0 1\r\ny\r\nEND\r\n").unwrap(), Parsed::Done(Reply::Hit, 37));
        // Data may contain \r\n and END.
        assert_eq!(parse_reply(b"VALUE a 0 5\r\nEND\r\n\r\nEND\r\n").unwrap(), Parsed::Done(Reply::Hit, 25));
    }

    #[test]
    fn error_lines_are_replies() {
        let (r, left) = feed(&[b"SERVER_ERROR out of mem", b"ory writing get response\r\nEND\r\n"]);
        assert_eq!(r, vec![Reply::Error("SERVER_ERROR out of memory writing get response".into()), Reply::Miss]);
        assert_eq!(left, 0);
        assert_eq!(parse_reply(b"ERROR\r\n").unwrap(), Parsed::Done(Reply::Error("ERROR".into()), 7));
        assert!(matches!(parse_reply(b"CLIENT_ERROR bad command line format\r\n").unwrap(), Parsed::Done(Reply::Error(_), 38)));
    }

    #[test]
    fn protocol_violations() {
        for bad in [
            &b"STORED\r\n"[..],
            b"VALUE key 0\r\n",
            b"VALUE key x 3\r\nabc\r\nEND\r\n",
            b"VALUE key 0 -1\r\n",
            b"VALUE key 0 3\r\nabcd\r\nEND\r\n",
            b"VALUE key 0 1\r\na\r\nSERVER_ERROR x\r\n",
            b"VALUE key 0 99999999999\r\n",
        ] {
            assert!(parse_reply(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(parse_reply(&vec![b'x'; MAX_LINE + 1]).is_err());
        assert_eq!(parse_reply(&[b'x'; 100]).unwrap(), Parsed::Incomplete);
    }

    #[test]
    fn requests() {
        assert_eq!(get_request(12), b"get key:12\r\n");
        assert_eq!(set_request(1, 3), b"set key:1 0 0 3\r\nbcd\r\n");
        assert_eq!(set_request(0, 0), b"set key:0 0 0 0\r\n\r\n");
        assert_eq!(key(5), "key:5");
        assert!(value(3, 1000).iter().all(|c| c.is_ascii_lowercase()));
    }
}
