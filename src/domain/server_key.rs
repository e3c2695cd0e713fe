//! The name an MCP client knows an endpoint by (its "server key"): the key
//! of `.mcp.json`'s `mcpServers`, `claude mcp add <key>`, Codex's
//! `[mcp_servers.<key>]`, and Claude Code's
//! `--dangerously-load-development-channels server:<key>`.
//!
//! Claude Code names each tool `mcp__<key>__<tool>`, and Claude's API
//! refuses tool names over 64 characters: a session whose key is too long
//! breaks. The key is stable (by default derived from the agent's name, not
//! the random slug), so tool names, permission rules and the channels flag
//! survive a re-vend.

use super::Invalid;

/// The longest tool name Claude's API accepts.
pub const MAX_TOOL_NAME: usize = 64;

/// The length of Switchboard's longest MCP tool name (`set_default_lease`);
/// the MCP layer checks in a test that this is so.
pub const LONGEST_TOOL_NAME: usize = 17;

/// The default key of an agent's endpoints.
pub fn default_server_key(agent: &str) -> String {
    format!("switchboard-{agent}")
}

/// How long a key may be when the longest tool name is `longest_tool` long.
pub fn max_server_key_len(longest_tool: usize) -> usize {
    // mcp__<key>__<tool>
    MAX_TOOL_NAME.saturating_sub("mcp__".len() + "__".len() + longest_tool)
}

/// A key is `[a-z0-9][a-z0-9_-]*`, short enough that every
/// `mcp__<key>__<tool>` stays within [`MAX_TOOL_NAME`].
pub fn validate_server_key(
    key: &str,
    longest_tool: usize,
    field: &'static str,
) -> Result<(), Invalid> {
    let max = max_server_key_len(longest_tool);
    let well_formed = key
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !well_formed {
        return Err(Invalid::new(
            field,
            "must be lowercase letters, digits, '-' or '_', starting with a letter or digit",
        ));
    }
    if key.len() > max {
        return Err(Invalid::new(
            field,
            format!(
                "must be at most {max} characters (got {}): Claude Code names tools \
                 mcp__<key>__<tool>, and tool names over {MAX_TOOL_NAME} characters break the session",
                key.len()
            ),
        ));
    }
    Ok(())
}

/// The environment variable a client config reads the endpoint's token
/// from: `SWITCHBOARD_TOKEN_` + the key in upper case, `-` as `_`.
pub fn token_env_var(key: &str) -> String {
    let tail: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("SWITCHBOARD_TOKEN_{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET_DEFAULT_LEASE: usize = "set_default_lease".len();

    #[test]
    fn the_default_key_is_stable_and_names_the_agent() {
        assert_eq!(default_server_key("reviewer"), "switchboard-reviewer");
        assert_eq!(
            token_env_var("switchboard-reviewer"),
            "SWITCHBOARD_TOKEN_SWITCHBOARD_REVIEWER"
        );
    }

    #[test]
    fn every_tool_name_fits_in_64_characters() {
        let max = max_server_key_len(SET_DEFAULT_LEASE);
        assert_eq!(max, 40);
        let longest = "k".repeat(max);
        assert!(validate_server_key(&longest, SET_DEFAULT_LEASE, "name").is_ok());
        assert_eq!(
            format!("mcp__{longest}__set_default_lease").len(),
            MAX_TOOL_NAME
        );
        let err = validate_server_key(&"k".repeat(max + 1), SET_DEFAULT_LEASE, "name").unwrap_err();
        assert_eq!(err.field, "name");
        assert!(err.message.contains("at most 40"), "{}", err.message);
    }

    #[test]
    fn malformed_keys_are_refused() {
        for bad in ["", "-x", "Upper", "has space", "dot.ted", "é"] {
            assert!(
                validate_server_key(bad, SET_DEFAULT_LEASE, "name").is_err(),
                "{bad:?}"
            );
        }
        assert!(validate_server_key("a_b-9", SET_DEFAULT_LEASE, "name").is_ok());
    }
}
