-- Row checks without `IN` lists (issue 44; docs/performance.md, "B10 on SQLite: the writer's
-- time by statement"). SQLite evaluates a CHECK constraint's or a partial index's `x IN (a, b,
-- c)` (three or more constants) by building a temporary b-tree of the list for every row it
-- writes, and every claim and every complete writes a todo and an attempt: five to seven such
-- b-trees a loop of the writer's one thread. The same conditions written as `x = a OR x = b …`
-- are plain comparisons (a todo's update: 1.9 → 0.6 µs in isolation). Same rows allowed, same
-- rows indexed; the live key's predicate is `statements.rs`'s `LIVE_CONDITION` word for word
-- again, so that SQLite still matches the index to the dedup read.
--
-- SQLite cannot alter a CHECK constraint, so `todos` and `todo_attempts` are rebuilt as in 0018
-- (https://www.sqlite.org/lang_altertable.html, "other kinds of table schema changes"): the
-- attempts move to a constraint-free copy first (dropping `todos` would cascade into them), then
-- every index is recreated.
--
-- And `admission.window_claims`, unread since the window's count moved to its shards (0025),
-- goes.

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
                          CHECK (state = 'pending' OR state = 'claimed' OR state = 'done'
                                 OR state = 'failed' OR state = 'cancelled' OR state = 'delayed'),
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
    cancelled_by        TEXT,
    priority            BIGINT NOT NULL DEFAULT 0,
    endpoint_slot       BIGINT,
    queue_slot          BIGINT,
    -- When a delayed todo becomes pending (kept afterwards, for the record).
    run_at              BIGINT,
    prev_ringed_at      BIGINT
);

INSERT INTO todos_new (
    id, endpoint_id, queue, title, kind, source, payload, idempotency_key,
    event_id, state, owner, lease_expires_at, lease_token_hash, attempt, max_attempts, attempts_total,
    attempts_pruned, next_retry_at, result, last_note, ring_attempts, last_ringed_at, created_at, updated_at,
    claimed_at, completed_at, ready_rung_attempt, cancelled_by, priority, endpoint_slot, queue_slot, run_at,
    prev_ringed_at)
SELECT
    id, endpoint_id, queue, title, kind, source, payload, idempotency_key,
    event_id, state, owner, lease_expires_at, lease_token_hash, attempt, max_attempts, attempts_total,
    attempts_pruned, next_retry_at, result, last_note, ring_attempts, last_ringed_at, created_at, updated_at,
    claimed_at, completed_at, ready_rung_attempt, cancelled_by, priority, endpoint_slot, queue_slot, run_at,
    prev_ringed_at
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
    outcome            TEXT CHECK (outcome = 'completed' OR outcome = 'failed'
                         OR outcome = 'released' OR outcome = 'lease_expired' OR outcome = 'reaped'
                         OR outcome = 'revoked' OR outcome = 'cancelled'),
    disposition        TEXT CHECK (disposition = 'done' OR disposition = 'retry_scheduled'
                         OR disposition = 'requeued' OR disposition = 'dead_lettered'
                         OR disposition = 'cancelled'),
    summary            TEXT,
    summary_truncated  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (todo_id, seq)
) WITHOUT ROWID;
INSERT INTO todo_attempts (
    todo_id, seq, attempt, claimant, claimed_at, last_heartbeat_at,
    note, ended_at, outcome, disposition, summary, summary_truncated)
SELECT
    todo_id, seq, attempt, claimant, claimed_at, last_heartbeat_at,
    note, ended_at, outcome, disposition, summary, summary_truncated
FROM todo_attempts_moving;
DROP TABLE todo_attempts_moving;

CREATE INDEX todos_claimed_by_endpoint ON todos (endpoint_id, lease_expires_at)
    WHERE state = 'claimed';
CREATE INDEX todos_retry_by_endpoint ON todos (endpoint_id, next_retry_at)
    WHERE state = 'failed' AND next_retry_at IS NOT NULL;
CREATE INDEX todos_retry_due ON todos (next_retry_at)
    WHERE state = 'failed' AND next_retry_at IS NOT NULL;
CREATE UNIQUE INDEX todos_live_key ON todos (endpoint_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL
      AND (state = 'pending' OR state = 'claimed' OR state = 'delayed'
           OR (state = 'failed' AND next_retry_at IS NOT NULL));
CREATE INDEX todos_by_endpoint_created ON todos (endpoint_id, created_at, id);
CREATE INDEX todos_ring_clock ON todos (ring_attempts, COALESCE(last_ringed_at, created_at))
    WHERE state = 'pending' AND event_id IS NOT NULL;
CREATE INDEX todos_by_event ON todos (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX todos_dead_by_endpoint ON todos (endpoint_id)
    WHERE state = 'failed' AND next_retry_at IS NULL;
CREATE UNIQUE INDEX todos_endpoint_slot ON todos (endpoint_id, endpoint_slot)
    WHERE state = 'claimed' AND endpoint_slot IS NOT NULL;
CREATE UNIQUE INDEX todos_queue_slot ON todos (endpoint_id, queue, queue_slot)
    WHERE state = 'claimed' AND queue_slot IS NOT NULL;
CREATE INDEX todos_pending_by_queue ON todos (endpoint_id, queue, priority DESC, created_at, id)
    WHERE state = 'pending';
CREATE INDEX todos_pending_by_endpoint ON todos (endpoint_id, priority DESC, created_at, id)
    WHERE state = 'pending';
CREATE INDEX todos_delayed_due ON todos (run_at) WHERE state = 'delayed';
CREATE INDEX todos_delayed_by_endpoint ON todos (endpoint_id, run_at) WHERE state = 'delayed';

ALTER TABLE admission DROP COLUMN window_claims;
