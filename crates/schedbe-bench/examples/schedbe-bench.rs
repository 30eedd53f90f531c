//! Standalone driver with the same command line as `schedbe bench ...`
//! (`schedbe-bench bench srv-bg ...`), for developing the harness without
//! building the scheduler. The real entry point is `schedbe bench`.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "schedbe-bench")]
struct Cli {
    #[command(subcommand)]
    cmd: Top,
}

#[derive(Subcommand)]
enum Top {
    /// The evaluation harness
    #[command(subcommand)]
    Bench(schedbe_bench::BenchCmd),
}

fn main() {
    let Top::Bench(cmd) = Cli::parse().cmd;
    if let Err(e) = schedbe_bench::cli_main(&cmd) {
        eprintln!("schedbe bench: error: {e:#}");
        std::process::exit(1);
    }
}
