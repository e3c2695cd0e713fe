//! The MCP server (`docs/mcp.md`): our own JSON-RPC over Streamable HTTP at
//! `/mcp/{slug}`, sessions bound to endpoints, and the agent verbs.
//!
//! We do not use an SDK: we need to know exactly whether a session's GET
//! stream is open (the doorbell depends on it), and the surface is small.

mod extract;
pub mod instructions;
pub mod jsonrpc;
pub mod prompts;
mod response;
pub mod tools;
mod transport;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::post;

use crate::delivery::Delivery;
use crate::delivery::sessions::SessionRegistry;
use crate::http::ratelimit::{Rate, RateLimiter};
use crate::store::Store;

/// Protocol versions we speak, newest first.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// A POST body may be at most 1 MiB.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone)]
pub struct McpConfig {
    /// Per endpoint (default 20/s, burst 40).
    pub rate: Rate,
    /// SSE keep-alive comment period.
    pub keepalive: Duration,
    /// A session with nothing in flight this long is closed.
    pub idle_limit: Duration,
    /// Period of the session janitor.
    pub janitor_interval: Duration,
    /// A payload whose JSON text is longer than this many bytes is left out
    /// of claim results (`payload_size` and `payload_preview` instead;
    /// `get_todo` returns it whole). Default 16 KiB.
    pub claim_payload_inline_max: usize,
    /// Sessions one endpoint may hold open on this instance; one more
    /// closes one of them, streamless first (`--max-sessions-per-endpoint`).
    pub max_sessions_per_endpoint: usize,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            rate: Rate::new(20.0, 40.0),
            keepalive: Duration::from_secs(15),
            idle_limit: Duration::from_secs(30 * 60),
            janitor_interval: Duration::from_secs(60),
            claim_payload_inline_max: tools::CLAIM_PAYLOAD_INLINE_MAX,
            max_sessions_per_endpoint: crate::delivery::sessions::DEFAULT_MAX_SESSIONS_PER_ENDPOINT,
        }
    }
}

#[derive(Debug)]
pub struct McpContext {
    pub config: McpConfig,
    /// The URL clients reach this server at: a 401 names the MCP URL's
    /// protected-resource metadata under it.
    pub public_url: String,
    pub sessions: Arc<SessionRegistry>,
    rate: RateLimiter,
    /// When each endpoint's `last_seen_at` was last written (ms), to write at
    /// most once per second per endpoint.
    last_stamp: Mutex<HashMap<String, i64>>,
}

impl McpContext {
    /// `sessions` is delivery's registry: MCP sessions are who hears doorbells.
    pub fn new(config: McpConfig, sessions: Arc<SessionRegistry>) -> Self {
        Self {
            rate: RateLimiter::new(config.rate),
            config,
            public_url: String::new(),
            sessions,
            last_stamp: Mutex::new(HashMap::new()),
        }
    }
}

impl McpContext {
    /// The public URL the 401's `resource_metadata` is under.
    pub fn with_public_url(mut self, public_url: &str) -> Self {
        public_url
            .trim_end_matches('/')
            .clone_into(&mut self.public_url);
        self
    }
}

/// The MCP handlers' state.
#[derive(Clone)]
pub struct McpState {
    pub store: Arc<dyn Store>,
    pub delivery: Arc<Delivery>,
    pub mcp: Arc<McpContext>,
}

/// `/mcp/{slug}`, with its state.
pub fn router(state: McpState) -> Router {
    Router::new()
        .route(
            "/mcp/{slug}",
            post(transport::post_message)
                .get(transport::open_stream)
                .delete(transport::end_session),
        )
        // Also on what axum answers itself (405 with Allow).
        .layer(axum::middleware::map_response(response::secure))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::tools::tool::ToolName;
    use crate::domain::server_key::{LONGEST_TOOL_NAME, MAX_TOOL_NAME, max_server_key_len};

    /// Vend refuses server names that would push `mcp__<name>__<tool>`
    /// past 64 characters; that check knows the longest tool name.
    #[test]
    fn the_longest_tool_name_is_the_one_vend_allows_for() {
        let longest = ToolName::ALL
            .iter()
            .map(|t| t.as_str().len())
            .max()
            .unwrap();
        assert_eq!(longest, LONGEST_TOOL_NAME);
        let name = "n".repeat(max_server_key_len(longest));
        for tool in ToolName::ALL {
            assert!(format!("mcp__{name}__{}", tool.as_str()).len() <= MAX_TOOL_NAME);
        }
    }
}
