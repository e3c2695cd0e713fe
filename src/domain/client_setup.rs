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
    /// Claude Code unattended, one pass over the queue (`claude -p`), allowed
    /// the endpoint's tools only.
    pub claude_unattended: String,
    /// The runner over Claude Code: a `claude -p` run on every doorbell
    /// (`switchboard work`, token from `token_env`).
    pub work_claude: String,
    /// The runner over Codex: a `codex exec` run on every doorbell.
    pub work_codex: String,
}

/// What an unattended run is told to do (the vended `claude -p` and
/// `codex exec` lines).
pub const UNATTENDED_PROMPT: &str = "Work the switchboard queue: claim_next, do the todo, complete it with next: {} (which claims the next one), and go on until nothing is left.";

impl ClientSnippets {
    pub fn new(server_name: &str, mcp_url: &str, token: &str) -> Self {
        let token_env = token_env_var(server_name);
        let claude_unattended =
            format!("claude -p \"{UNATTENDED_PROMPT}\" --allowedTools \"mcp__{server_name}\"");
        let work = format!("switchboard work {mcp_url} --token-env {token_env} --");
        Self {
            work_claude: format!("{work} {claude_unattended}"),
            // `codex exec` refuses to start outside a git repository (or a
            // directory its config trusts) unless told: a runner started
            // anywhere would fail every run.
            work_codex: format!("{work} codex exec --skip-git-repo-check \"{UNATTENDED_PROMPT}\""),
            claude_unattended,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unattended_lines_name_the_server_and_the_token_variable() {
        let s = ClientSnippets::new("switchboard-rev", "http://h/mcp/ab12", "sbk_secret");
        assert_eq!(
            s.claude_unattended,
            format!("claude -p \"{UNATTENDED_PROMPT}\" --allowedTools \"mcp__switchboard-rev\"")
        );
        assert_eq!(
            s.work_claude,
            format!(
                "switchboard work http://h/mcp/ab12 --token-env SWITCHBOARD_TOKEN_SWITCHBOARD_REV \
                 -- {}",
                s.claude_unattended
            )
        );
        assert_eq!(
            s.work_codex,
            format!(
                "switchboard work http://h/mcp/ab12 --token-env SWITCHBOARD_TOKEN_SWITCHBOARD_REV \
                 -- codex exec --skip-git-repo-check \"{UNATTENDED_PROMPT}\""
            )
        );
        for line in [&s.claude_unattended, &s.work_claude, &s.work_codex] {
            assert!(!line.contains("sbk_secret"), "no token in {line}");
        }
    }
}
