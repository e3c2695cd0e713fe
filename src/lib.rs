//! Switchboard: a durable work queue for AI agents, reached over MCP.
//!
//! The modules, bottom layer first (a module uses only its own layer or the
//! ones below; `scripts/check-layers` enforces it; see `ARCHITECTURE.md`):
//!
//! - [`domain`] — the pure rules and types (no IO); [`mint`] — minting ids
//!   and secrets; [`clock`] — the one source of "now".
//! - [`store`] — the storage contract (capability traits) and its SQLite and
//!   PostgreSQL implementation, migrations, typed errors.
//! - [`bus`] — the cluster bus: in process, or PostgreSQL `LISTEN/NOTIFY`.
//! - [`delivery`] — the event path: sessions, doorbells, the re-ring sweep,
//!   presence and digests, the bus listener.
//! - [`ops`] — one function per write (validate, mint, write, tell, count)
//!   and the one error policy every surface renders.
//! - [`http`] — what the HTTP surfaces share: the error envelope, rate
//!   limits, the edge (host guard, client address, access log).
//! - The surfaces, each with its own state and `router(state)`: [`api`]
//!   (`/api/v1`), [`mcp`] (`/mcp/{slug}`), [`intake`] (webhooks),
//!   [`metrics`] (`/metrics`), [`board`] (the web board at `/`), [`oauth`]
//!   (the OAuth 2.1 authorization server's metadata, registration and
//!   token routes; its consent page is the board's).
//! - [`server`] — wiring: config → store → bus → delivery → surfaces → loops.
//! - [`cli`] — the command line (the server and the REST client).
#![warn(unreachable_pub)]

pub mod api;
pub mod board;
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
pub mod oauth;
pub mod ops;
pub mod server;
pub mod store;
#[cfg(feature = "testkit")]
pub mod testkit;
