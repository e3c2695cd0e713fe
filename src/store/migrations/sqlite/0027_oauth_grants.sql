-- OAuth grants (docs/oauth.md): one per connection of a client to an
-- endpoint, which its tokens are credentials of. Tokens are stored hashed,
-- access and refresh alike; a refresh token is spent by one guarded UPDATE,
-- and presenting a spent one revokes its grant (reuse detection: the whole
-- family dies). A grant dies with its endpoint (revoke, expiry, delete).
CREATE TABLE oauth_grants (
    id            TEXT PRIMARY KEY,
    client_id     TEXT NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    human_id      TEXT NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    endpoint_id   TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    resource      TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT,
    revoked_at    BIGINT
);
CREATE INDEX oauth_grants_by_client ON oauth_grants (client_id);
CREATE INDEX oauth_grants_by_human ON oauth_grants (human_id);
CREATE INDEX oauth_grants_by_endpoint ON oauth_grants (endpoint_id, created_at, id);

CREATE TABLE oauth_tokens (
    token_hash  TEXT PRIMARY KEY,
    grant_id    TEXT NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    spent_at    BIGINT
);
CREATE INDEX oauth_tokens_by_grant ON oauth_tokens (grant_id);
CREATE INDEX oauth_tokens_expiring ON oauth_tokens (expires_at);
