//! How to point an MCP client at a freshly vended endpoint: the snippets
//! the vend response, `switchboard vend` and the board's Vend page show.
//! Pure text from the server name, the MCP URL and the credential.

use serde_json::Value;

use super::server_key::token_env_var;

/// Ready-to-paste setups for Claude Code and Codex. They carry the token:
/// only a vend shows them, once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSnippets {
    /// The name the client knows the endpoint by.
    pub server_name: String,
    /// The environment variable the configs read the token from.
    pub token_env: String,
    /// `export SWITCHBOARD_TOKEN_…='sbk_…'`
    pub export: String,
    /// Claude Code, for you only (`--scope local`: kept out of the project's files).
    pub claude_mcp_add: String,
    /// Starts Claude Code so that it delivers doorbells (≥ 2.1.80).
    pub claude_launch: String,
    /// Codex: a block for `~/.codex/config.toml` (bearer tokens only from the environment).
    pub codex_toml: String,
}

impl ClientSnippets {
    pub fn new(server_name: &str, mcp_url: &str, token: &str) -> Self {
        let token_env = token_env_var(server_name);
        Self {
            export: format!("export {token_env}='{token}'"),
            claude_mcp_add: format!(
                "claude mcp add --transport http --scope local {server_name} {mcp_url} \
                 --header \"Authorization: Bearer {token}\""
            ),
            claude_launch: format!(
                "claude --dangerously-load-development-channels server:{server_name}"
            ),
            codex_toml: format!(
                "[mcp_servers.{server_name}]\nurl = \"{mcp_url}\"\n\
                 bearer_token_env_var = \"{token_env}\"\n"
            ),
            server_name: server_name.to_owned(),
            token_env,
        }
    }
}

/// Claude Code's `.mcp.json` block for one endpoint, keyed by its server
/// name, the token read from the environment (safe to commit).
pub fn mcp_json(server_name: &str, url: &str) -> Value {
    let token_env = token_env_var(server_name);
    serde_json::json!({
        "mcpServers": {
            server_name: {
                "type": "http",
                "url": url,
                "headers": { "Authorization": format!("Bearer ${{{token_env}}}") }
            }
        }
    })
}

/// An endpoint's MCP URL under the server's public URL.
pub fn mcp_url(public_url: &str, slug: &str) -> String {
    format!("{}/mcp/{slug}", public_url.trim_end_matches('/'))
}

/// A webhook's ingest URL under the server's public URL (the URL token is
/// the webhook's secret: shown once, never logged).
pub fn ingest_url(public_url: &str, url_token: &str) -> String {
    format!(
        "{}/webhooks/w/{url_token}",
        public_url.trim_end_matches('/')
    )
}
