-- A todo can be cancelled by a human (07-operator.md): a terminal state
-- `cancelled`, who cancelled it, and the attempt outcome/disposition that
-- records a cancel of a claimed todo.
--
-- SQLite cannot alter a CHECK constraint, so `todos` and `todo_attempts` are
-- rebuilt (https://www.sqlite.org/lang_altertable.html, "other kinds of table
-- schema changes"), inside this migration's transaction. Foreign keys stay on
-- (PRAGMA foreign_keys is a no-op inside a transaction), so the order matters:
-- dropping `todos` runs an implicit DELETE that would cascade into
-- `todo_attempts`, so the attempts are first moved to a constraint-free copy
-- and their table is dropped before `todos` is; the new `todo_attempts` is
-- created once the new `todos` has its name. Every index is recreated.

CREATE TABLE todos_new (
    id                  TEXT PRIMARY KEY,
    endpoint_id         TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    queue               TEXT NOT NULL,
    title               TEXT NOT NULL,
    kind                TEXT,
    source              TEXT,
    payload             TEXT,
    idempotency_key     TEXT,
    event_id            TEXT REFERENCES intake_events (id) ON DELETE SET NULL,
    state               TEXT NOT NULL
                          CHECK (state IN ('pending', 'claimed', 'done', 'failed', 'cancelled')),
    owner               TEXT,
    lease_expires_at    BIGINT,
    lease_token_hash    TEXT,
    attempt             BIGINT NOT NULL DEFAULT 0,
    max_attempts        BIGINT NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
    attempts_total      BIGINT NOT NULL DEFAULT 0,
    attempts_pruned     BIGINT NOT NULL DEFAULT 0,
    next_retry_at       BIGINT,
    result              TEXT,
    last_note           TEXT,
    ring_attempts       BIGINT NOT NULL DEFAULT 0,
    last_ringed_at      BIGINT,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    claimed_at          BIGINT,
    completed_at        BIGINT,
    ready_rung_attempt  BIGINT,
    -- `human:<id>` while the todo is cancelled.
    cancelled_by        TEXT
);

INSERT INTO todos_new (id, endpoint_id, queue, title, kind, source, payload, idempotency_key,
    event_id, state, owner, lease_expires_at, lease_token_hash, attempt, max_attempts,
    attempts_total, attempts_pruned, next_retry_at, result, last_note, ring_attempts,
    last_ringed_at, created_at, updated_at, claimed_at, completed_at, ready_rung_attempt)
SELECT id, endpoint_id, queue, title, kind, source, payload, idempotency_key,
    event_id, state, owner, lease_expires_at, lease_token_hash, attempt, max_attempts,
    attempts_total, attempts_pruned, next_retry_at, result, last_note, ring_attempts,
    last_ringed_at, created_at, updated_at, claimed_at, completed_at, ready_rung_attempt
FROM todos;

CREATE TABLE todo_attempts_moving AS SELECT * FROM todo_attempts;
DROP TABLE todo_attempts;
DROP TABLE todos;
ALTER TABLE todos_new RENAME TO todos;

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
                         ('completed', 'failed', 'released', 'lease_expired', 'reaped', 'revoked',
                          'cancelled')),
    disposition        TEXT CHECK (disposition IN
                         ('done', 'retry_scheduled', 'requeued', 'dead_lettered', 'cancelled')),
    summary            TEXT,
    summary_truncated  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (todo_id, seq)
);
INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at, last_heartbeat_at, note,
    ended_at, outcome, disposition, summary, summary_truncated)
SELECT todo_id, seq, attempt, claimant, claimed_at, last_heartbeat_at, note,
    ended_at, outcome, disposition, summary, summary_truncated
FROM todo_attempts_moving;
DROP TABLE todo_attempts_moving;

-- The indexes of 0002, as they were, except retention, which now counts a
-- cancelled todo as finished.
CREATE INDEX todos_pending_by_queue ON todos (endpoint_id, queue, created_at, id)
    WHERE state = 'pending';
CREATE INDEX todos_pending_by_endpoint ON todos (endpoint_id, created_at, id)
    WHERE state = 'pending';
CREATE INDEX todos_claimed_by_endpoint ON todos (endpoint_id, lease_expires_at)
    WHERE state = 'claimed';
CREATE INDEX todos_claimed_by_lease ON todos (lease_expires_at)
    WHERE state = 'claimed';
CREATE INDEX todos_retry_by_endpoint ON todos (endpoint_id, next_retry_at)
    WHERE state = 'failed' AND next_retry_at IS NOT NULL;
CREATE INDEX todos_retry_due ON todos (next_retry_at)
    WHERE state = 'failed' AND next_retry_at IS NOT NULL;
CREATE UNIQUE INDEX todos_live_key ON todos (endpoint_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL
      AND (state IN ('pending', 'claimed') OR (state = 'failed' AND next_retry_at IS NOT NULL));
CREATE INDEX todos_terminal_by_age ON todos (completed_at)
    WHERE state IN ('done', 'cancelled') OR (state = 'failed' AND next_retry_at IS NULL);
CREATE INDEX todos_by_endpoint_created ON todos (endpoint_id, created_at, id);
CREATE UNIQUE INDEX todo_attempts_one_open ON todo_attempts (todo_id) WHERE ended_at IS NULL;
