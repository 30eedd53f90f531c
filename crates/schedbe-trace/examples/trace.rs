//! Standalone `schedbe trace` for trying the tracer without the scheduler
//! binary: `cargo run --release -p schedbe-trace --example trace -- --duration 2`.
use clap::Parser;

#[derive(Parser)]
#[command(about = "Measure LC/BE inversions under the running scheduler")]
struct Cli {
    #[command(flatten)]
    args: schedbe_trace::TraceArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = schedbe_trace::cli_main(&cli.args) {
        eprintln!("schedbe trace: error: {e:#}");
        std::process::exit(1);
    }
}
