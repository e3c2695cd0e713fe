-- Delivery history and trusted senders (08-intake.md, "Delivery history",
-- "Trusted senders and quarantine"). A webhook's `senders` is JSON
-- (`{"trust":"logins","logins":[…],"match":"sender"}`); NULL trusts everyone.
ALTER TABLE webhooks ADD COLUMN senders TEXT;

-- One row per delivery to a webhook, whatever became of it. The body is
-- kept only once verified (a refused delivery keeps its size alone); the
-- headers are the sanitized ones of the intake event. `event` and
-- `sender` repeat the envelope's, for the listing's filters.
CREATE TABLE deliveries (
    id               TEXT PRIMARY KEY,
    webhook_id       TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    human_id         TEXT NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    endpoint_id      TEXT NOT NULL,
    received_at      BIGINT NOT NULL,
    decision         TEXT NOT NULL CHECK (decision IN ('accepted', 'duplicate', 'dropped',
                       'quarantined', 'refused', 'released', 'discarded')),
    reason           TEXT,
    rule             TEXT,
    event            TEXT,
    sender           TEXT,
    envelope         TEXT NOT NULL,
    headers          TEXT NOT NULL DEFAULT '{}',
    body             BYTEA,
    body_size        BIGINT NOT NULL DEFAULT 0,
    title            TEXT,
    kind             TEXT,
    source           TEXT,
    idempotency_key  TEXT,
    todo_id          TEXT,
    replay_of        TEXT,
    settled_at       BIGINT
);
CREATE INDEX deliveries_by_webhook ON deliveries (webhook_id, received_at, id);
CREATE INDEX deliveries_by_age ON deliveries (received_at, id);
CREATE INDEX deliveries_by_human ON deliveries (human_id);
