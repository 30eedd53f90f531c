//! `schedbe-bench mc-client`

use std::time::Duration;

use anyhow::{bail, Result};

use super::{preload, run, McLoad, DEFAULT_ADDR};

#[derive(clap::Args, Debug, Clone)]
pub struct McClientArgs {
    /// memcached address, host:port
    #[arg(long, default_value = DEFAULT_ADDR)]
    pub connect: String,
    /// Mean request rate (Poisson arrivals), requests per second
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Seconds of sending
    #[arg(long, default_value_t = 10.0)]
    pub duration_s: f64,
    /// TCP connections (requests go round robin; several may be outstanding on each)
    #[arg(long, default_value_t = 4)]
    pub conns: usize,
    /// Keys key:0 .. key:<KEYS-1>, picked uniformly
    #[arg(long, default_value_t = 1000)]
    pub keys: usize,
    /// Value size in bytes, for --preload
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Seed of the arrival times and the keys
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Store every key first (set, expecting STORED)
    #[arg(long)]
    pub preload: bool,
    /// Print the result as JSON (else a one-line summary)
    #[arg(long)]
    pub json: bool,
    /// Run the client thread SCHED_FIFO 60 with SCHED_RESET_ON_FORK (the default)
    #[arg(long, overrides_with = "no_fifo")]
    pub fifo: bool,
    /// Leave the client thread's policy alone
    #[arg(long, overrides_with = "fifo")]
    pub no_fifo: bool,
    /// Start the schedule at this CLOCK_MONOTONIC time in ns (default: 50 ms after connecting)
    #[arg(long)]
    pub start_at_ns: Option<u64>,
}

impl McClientArgs {
    pub fn to_load(&self) -> Result<McLoad> {
        if !(self.duration_s.is_finite() && self.duration_s > 0.0 && self.duration_s <= 86_400.0) {
            bail!("--duration-s must be in (0, 86400]");
        }
        Ok(McLoad {
            addr: self.connect.clone(),
            rate_per_s: self.rate,
            duration: Duration::from_secs_f64(self.duration_s),
            conns: self.conns,
            keys: self.keys,
            seed: self.seed,
            fifo: !self.no_fifo,
            start_at_ns: self.start_at_ns,
            ..McLoad::default()
        })
    }
}

/// Entry point of `schedbe-bench mc-client`.
pub fn cli(a: &McClientArgs) -> Result<()> {
    let load = a.to_load()?;
    if a.preload {
        preload(&load.addr, load.keys, a.value_size)?;
    }
    let r = run(&load)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!("{}", r.summary_line());
    }
    for w in &r.warnings {
        eprintln!("mc-client: warning: {w}");
    }
    Ok(())
}
