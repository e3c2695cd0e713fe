-- Humans, their API tokens, agents and endpoints (06-registry.md, 05-presence.md).
-- Every *_at column is Unix milliseconds (BIGINT): both dialects store time the
-- same way and `now` always comes from the server's injected clock.

CREATE TABLE humans (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    oidc_issuer   TEXT,
    oidc_subject  TEXT,
    created_at    BIGINT NOT NULL,
    UNIQUE (oidc_issuer, oidc_subject)
);

CREATE TABLE human_tokens (
    id            TEXT PRIMARY KEY,
    human_id      TEXT NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    token_hash    TEXT NOT NULL UNIQUE,
    token_prefix  TEXT NOT NULL,
    label         TEXT,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT,
    revoked_at    BIGINT,
    last_used_at  BIGINT
);
CREATE INDEX human_tokens_by_human ON human_tokens (human_id, created_at, id);

CREATE TABLE agents (
    id                         TEXT PRIMARY KEY,
    human_id                   TEXT NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    name                       TEXT NOT NULL,
    kind                       TEXT NOT NULL CHECK (kind IN ('heartbeat', 'session', 'task')),
    expected_interval_seconds  BIGINT CHECK (expected_interval_seconds > 0),
    description                TEXT,
    created_at                 BIGINT NOT NULL,
    updated_at                 BIGINT NOT NULL,
    UNIQUE (human_id, name)
);

CREATE TABLE endpoints (
    id                         TEXT PRIMARY KEY,
    agent_id                   TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    human_id                   TEXT NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    slug                       TEXT NOT NULL UNIQUE,
    credential_hash            TEXT NOT NULL UNIQUE,
    credential_prefix          TEXT NOT NULL,
    scope_queues               TEXT NOT NULL,  -- JSON array of queue names, immutable
    scope_verbs                TEXT NOT NULL,  -- JSON array of verb names, immutable
    state                      TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'revoked')),
    created_at                 BIGINT NOT NULL,
    revoked_at                 BIGINT,
    expires_at                 BIGINT,
    last_seen_at               BIGINT,
    last_contact_at            BIGINT,
    default_lease_ttl_seconds  BIGINT CHECK (default_lease_ttl_seconds BETWEEN 60 AND 86400),
    -- presence inputs and the transition ledger (05-presence.md)
    shift                      TEXT,
    presence_override          TEXT CHECK (presence_override IN ('in', 'out')),
    override_until             BIGINT,
    override_set_at            BIGINT,
    override_by                TEXT,
    presence_seen              TEXT NOT NULL DEFAULT 'in' CHECK (presence_seen IN ('in', 'out')),
    presence_changed_at        BIGINT,
    presence_changed_by        TEXT,
    -- the last heartbeat note, free status text for the board
    last_note                  TEXT,
    last_note_at               BIGINT
);
CREATE INDEX endpoints_by_human ON endpoints (human_id, created_at, id);
CREATE INDEX endpoints_by_agent ON endpoints (agent_id);
CREATE INDEX endpoints_expiring ON endpoints (expires_at)
    WHERE state = 'active' AND expires_at IS NOT NULL;
