-- Intake events, webhooks, todos and their attempt history (02-queue.md, 08-intake.md).

CREATE TABLE webhooks (
    id              TEXT PRIMARY KEY,
    endpoint_id     TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    human_id        TEXT NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    queue           TEXT NOT NULL,
    token_hash      TEXT NOT NULL UNIQUE,
    -- HMAC needs the secret itself, so a signed webhook keeps it; NULL = unsigned.
    signing_secret  TEXT,
    created_at      BIGINT NOT NULL,
    rotated_at      BIGINT
);
CREATE INDEX webhooks_by_endpoint ON webhooks (endpoint_id, created_at, id);

CREATE TABLE intake_events (
    id            TEXT PRIMARY KEY,
    endpoint_id   TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    webhook_id    TEXT,
    trust_mode    TEXT NOT NULL CHECK (trust_mode IN ('operator', 'token', 'signed')),
    actor         TEXT NOT NULL,
    received_at   BIGINT NOT NULL,
    headers       TEXT NOT NULL DEFAULT '{}',
    content_type  TEXT,
    body          BLOB,
    body_size     BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE todos (
    id                TEXT PRIMARY KEY,
    endpoint_id       TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    queue             TEXT NOT NULL,
    title             TEXT NOT NULL,
    kind              TEXT,
    source            TEXT,
    payload           TEXT,
    idempotency_key   TEXT,
    event_id          TEXT REFERENCES intake_events (id) ON DELETE SET NULL,
    state             TEXT NOT NULL CHECK (state IN ('pending', 'claimed', 'done', 'failed')),
    owner             TEXT,
    lease_expires_at  BIGINT,
    lease_token_hash  TEXT,
    attempt           BIGINT NOT NULL DEFAULT 0,
    max_attempts      BIGINT NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
    attempts_total    BIGINT NOT NULL DEFAULT 0,
    attempts_pruned   BIGINT NOT NULL DEFAULT 0,
    next_retry_at     BIGINT,
    result            TEXT,
    last_note         TEXT,
    ring_attempts     BIGINT NOT NULL DEFAULT 0,
    last_ringed_at    BIGINT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    claimed_at        BIGINT,
    completed_at      BIGINT
);

-- claim_next on one named queue: FIFO, ending in id so no sort is needed.
CREATE INDEX todos_pending_by_queue ON todos (endpoint_id, queue, created_at, id)
    WHERE state = 'pending';
-- claim_next over all of an endpoint's queues.
CREATE INDEX todos_pending_by_endpoint ON todos (endpoint_id, created_at, id)
    WHERE state = 'pending';
-- takeover of lapsed leases and the reaper.
CREATE INDEX todos_claimed_by_endpoint ON todos (endpoint_id, lease_expires_at)
    WHERE state = 'claimed';
CREATE INDEX todos_claimed_by_lease ON todos (lease_expires_at)
    WHERE state = 'claimed';
-- retries whose window elapses.
CREATE INDEX todos_retry_by_endpoint ON todos (endpoint_id, next_retry_at)
    WHERE state = 'failed' AND next_retry_at IS NOT NULL;
CREATE INDEX todos_retry_due ON todos (next_retry_at)
    WHERE state = 'failed' AND next_retry_at IS NOT NULL;
-- dedup among live todos only: a done or dead-lettered todo frees its key.
CREATE UNIQUE INDEX todos_live_key ON todos (endpoint_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL
      AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
-- retention of finished history.
CREATE INDEX todos_terminal_by_age ON todos (completed_at)
    WHERE state = 'done' OR (state = 'failed' AND next_retry_at IS NULL);
-- listings, newest first.
CREATE INDEX todos_by_endpoint_created ON todos (endpoint_id, created_at, id);

CREATE TABLE todo_attempts (
    todo_id            TEXT NOT NULL REFERENCES todos (id) ON DELETE CASCADE,
    seq                BIGINT NOT NULL,
    attempt            BIGINT NOT NULL,
    claimant           TEXT,
    claimed_at         BIGINT NOT NULL,
    last_heartbeat_at  BIGINT,
    note               TEXT,
    ended_at           BIGINT,
    outcome            TEXT CHECK (outcome IN
                         ('completed', 'failed', 'released', 'lease_expired', 'reaped', 'revoked')),
    disposition        TEXT CHECK (disposition IN
                         ('done', 'retry_scheduled', 'requeued', 'dead_lettered')),
    summary            TEXT,
    summary_truncated  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (todo_id, seq)
);
-- At most one open attempt per todo.
CREATE UNIQUE INDEX todo_attempts_one_open ON todo_attempts (todo_id) WHERE ended_at IS NULL;
