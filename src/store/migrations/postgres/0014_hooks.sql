-- Outbound notify hooks (04-doorbells.md, "Hearers … notify hooks"): URLs of
-- an endpoint that get a payload-free, signed POST on each of its rings. The
-- signing secret is kept as such (HMAC needs it) and shown once on create.
-- A hook is enabled while `disabled_at` is NULL; `consecutive_failures`
-- counts final failures in a row and reaching 20 disables it (one guarded
-- statement, so exactly one instance sees the change).
CREATE TABLE hooks (
    id                   TEXT PRIMARY KEY,
    endpoint_id          TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    human_id             TEXT NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    url                  TEXT NOT NULL,
    secret               TEXT NOT NULL,
    consecutive_failures BIGINT NOT NULL DEFAULT 0,
    disabled_reason      TEXT,
    disabled_at          BIGINT,
    created_at           BIGINT NOT NULL
);
CREATE INDEX hooks_by_endpoint ON hooks (endpoint_id, created_at, id);
CREATE INDEX hooks_by_human ON hooks (human_id);

-- The last deliveries of each hook (about 50 per hook are kept): one row per
-- attempt, with the status or an error text (never a secret or a body).
CREATE TABLE hook_deliveries (
    id           TEXT PRIMARY KEY,
    hook_id      TEXT NOT NULL REFERENCES hooks (id) ON DELETE CASCADE,
    at           BIGINT NOT NULL,
    type         TEXT NOT NULL,
    todo_id      TEXT,
    outcome      TEXT NOT NULL,
    status       BIGINT,
    error        TEXT,
    duration_ms  BIGINT NOT NULL,
    attempt      BIGINT NOT NULL
);
CREATE INDEX hook_deliveries_by_hook ON hook_deliveries (hook_id, at, id);
