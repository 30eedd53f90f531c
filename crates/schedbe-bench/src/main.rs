//! `schedbe-bench`: the evaluation harness (docs/bench.md). A binary of its
//! own, so the scheduler that runs as root on every node carries none of it.
//! It finds the scheduler binary for the `schedbe` configurations and for
//! `schedbe trace` by [`schedbe_bench::scx::resolve_schedbe_bin`].

use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "schedbe-bench",
    version,
    about = "The SCHED_BE papers' experiments: an LC server, an open-loop client and BE work under each configuration (docs/bench.md)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: schedbe_bench::BenchCmd,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match schedbe_bench::cli_main(&cli.cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("schedbe-bench: error: {e:#}");
            ExitCode::from(1)
        }
    }
}
