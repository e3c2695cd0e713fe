//! The integration tests, in one test binary (`cargo test --test it`): one
//! link of the crate instead of one per file. Modules follow the surfaces:
//! `api::` (the REST API), `mcp::` (MCP end to end), `delivery::` (doorbells
//! and presence in process), `cli::`, `binary` (the process itself), `intake`,
//! `metrics`, `maintenance`, `shift` and `store_conformance` (both backends).
//! Shared helpers live in `support/`; `support::server` starts servers.
//!
//! Run a subset with a module prefix: `cargo test --test it mcp::transport::`.

mod api;
mod binary;
mod cli;
mod delivery;
mod intake;
mod maintenance;
mod mcp;
mod metrics;
mod shift;
mod store_conformance;
mod support;

// The conformance modules reach their shared helpers as `crate::common`.
use store_conformance::common;
