//! What every HTTP surface shares and none owns: the error envelope
//! (`{"error": {"code", "message", "field"?}}`, `07`/`08`) that the API and
//! webhook intake answer in, and the token-bucket rate limiter the API,
//! intake and MCP each keep their own instances of.
//!
//! It sits below the surfaces (`api`, `mcp`, `intake`, `metrics`) so that
//! they need not import one another.

pub mod connections;
pub mod error;
pub mod ratelimit;
