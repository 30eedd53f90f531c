//! Unit tests of the Akita module; numbers are worked out by hand in the
//! comments. Servers are written in ms, as in Table 1.

mod check;
mod config;
mod edfvd;
mod placement;

use super::edfvd::Server;

/// A HI server from milliseconds.
fn hi(c_opt: u64, c_pes: u64, period: u64) -> Server {
    Server::Hi { c_opt_us: c_opt * 1000, c_pes_us: c_pes * 1000, period_us: period * 1000 }
}

/// A LO server from milliseconds.
fn lo(c_opt: u64, period: u64) -> Server {
    Server::Lo { c_opt_us: c_opt * 1000, period_us: period * 1000 }
}

/// Table 1, type 1 (HI 5/25/100) and type 2 (LO 25/100).
fn type1() -> Server {
    hi(5, 25, 100)
}

fn type2() -> Server {
    lo(25, 100)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// examples/akita/vms.toml, which the tests and the docs share.
const EXAMPLE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/akita/vms.toml"));

#[test]
fn cpu_lists_print_short_and_never_overflow() {
    use super::cpus::{format, parse};
    assert_eq!(format(&[0, 1, 2, 3, 6]), "0-3,6");
    assert_eq!(format(&parse("5,0-2,1").unwrap()), "0-2,5");
    assert_eq!(format(&[]), "");
    assert_eq!(format(&[u32::MAX - 1, u32::MAX]), "4294967294-4294967295");
}
