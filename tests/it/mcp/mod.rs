//! MCP end to end: the transport, the official TypeScript SDK client,
//! doorbells and presence (helpers in `support::mcp`).

mod admission;
mod bulk;
mod chained;
mod doorbells;
mod interop;
mod presence;
mod transport;
