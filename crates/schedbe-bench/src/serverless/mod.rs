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
//! - `cli`: `schedbe bench serverless-trace`
//!
//! The bench runner does not run this workload yet.

pub mod azure;
mod cli;
pub mod dist;
pub mod model;
pub mod trace;

pub use cli::{band_table, run, TraceArgs};
pub use model::{bands_by_rate, Function, Group, ModelParams, Workload};
