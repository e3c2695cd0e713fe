-- OAuth 2.1 (03-mcp.md, "Authorization with OAuth 2.1"; docs/oauth.md):
-- the clients that may ask for a token, and the authorization codes handed
-- to them. A client is registered (RFC 7591: `oc_…`) or is the URL of its
-- metadata document (`kind = 'document'`, fetched and cached: `fetched_at`).
-- A code is stored hashed, lives at most 60 s and is redeemed by one DELETE.
CREATE TABLE oauth_clients (
    id             TEXT PRIMARY KEY,
    kind           TEXT NOT NULL CHECK (kind IN ('registered', 'document')),
    name           TEXT,
    client_uri     TEXT,
    redirect_uris  TEXT NOT NULL,  -- JSON array of strings
    created_at     BIGINT NOT NULL,
    fetched_at     BIGINT
);

CREATE TABLE oauth_codes (
    code_hash       TEXT PRIMARY KEY,
    client_id       TEXT NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    human_id        TEXT NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    endpoint_id     TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    redirect_uri    TEXT NOT NULL,
    code_challenge  TEXT NOT NULL,
    resource        TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL
);
CREATE INDEX oauth_codes_by_client ON oauth_codes (client_id);
CREATE INDEX oauth_codes_by_human ON oauth_codes (human_id);
CREATE INDEX oauth_codes_by_endpoint ON oauth_codes (endpoint_id);
CREATE INDEX oauth_codes_expiring ON oauth_codes (expires_at);
