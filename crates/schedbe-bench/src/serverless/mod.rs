//! A serverless node's workload for a least-loaded-first (LLF) policy
//! (shared/papers/003, CFS-LLF): ~100 function sandboxes with Azure-shaped
//! invocation rates and execution times, split into 10 demand bands
//! (group-high is the top band, group-low the other nine), scaled to a
//! target utilisation, with a latency target per request. See
//! docs/serverless.md.
//!
//! - `model`: the functions, bands, utilisation scaling, latency targets
//! - `trace`: Poisson request arrivals and CPU demands, as CSV
//! - `azure`: the Azure Functions 2019 invocation CSVs, read and written
//! - `dist`: the normal quantile and per-function seed streams
//! - `cli`: `schedbe-bench serverless-trace`
//! - `sweep`: `schedbe-bench serverless`, the experiment: loads x
//!   configurations x repetitions, the table and the outputs
//! - `runner`: one run (pods, servers, scheduler, agent, tracer, replay)
//! - `pool`: the sandboxes' servers (`schedbe-bench fn-pool`)
//! - `gen`: the open-loop load generator
//! - `metrics`: attainment per group, the agent's detection, the floor

pub mod azure;
mod cli;
pub mod dist;
pub mod gen;
pub mod metrics;
pub mod model;
pub mod pool;
pub mod runner;
pub mod sweep;
pub mod trace;

pub use cli::{band_table, run, TraceArgs};
pub use pool::PoolArgs;
pub use sweep::ServerlessArgs;
pub use model::{bands_by_rate, Function, Group, ModelParams, Workload};
