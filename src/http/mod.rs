//! What every HTTP surface shares and none owns: the error envelope
//! (`{"error": {"code", "message", "field"?}}`, `docs/api.md`, `docs/intake.md`) that the API and
//! webhook intake answer in, the token-bucket rate limiter the API, intake
//! and MCP each keep their own instances of, and the edge of the whole
//! router: the `Host`/`Origin` guard ([`host_guard`]), the client address
//! behind trusted proxies ([`client_addr`]) and the access log with its
//! request id ([`access_log`]).
//!
//! Who is calling ([`auth`]: a bearer header or the board's cookie, the
//! human or endpoint it authenticates) is here too, for every surface.
//!
//! It sits below the surfaces (`api`, `mcp`, `intake`, `metrics`, `board`)
//! so that they need not import one another.

pub mod access_log;
pub mod auth;
pub mod cidr;
pub mod client_addr;
pub mod connections;
pub mod error;
pub mod host_guard;
pub mod ratelimit;
