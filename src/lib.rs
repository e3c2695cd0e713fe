//! Switchboard: a durable work queue for AI agents, reached over MCP.
//!
//! The crate is laid out by concern: [`domain`] holds the pure rules,
//! [`store`] the storage contract and its SQLite/PostgreSQL backends,
//! [`server`] the HTTP server and its background loops, [`intake`] webhook
//! deliveries, [`cli`] the command line.

pub mod api;
pub mod bus;
pub mod cli;
pub mod clock;
pub mod delivery;
pub mod domain;
pub mod http;
pub mod intake;
pub mod mcp;
pub mod metrics;
pub mod mint;
pub mod server;
pub mod store;
