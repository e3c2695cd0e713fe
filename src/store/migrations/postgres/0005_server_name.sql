-- The name MCP clients know an endpoint by (`.mcp.json` key, `claude mcp add`,
-- Codex's `[mcp_servers.<name>]`, the channels flag). NULL = the default,
-- `switchboard-<agent>`, so the name survives a re-vend.
ALTER TABLE endpoints ADD COLUMN server_name TEXT;
