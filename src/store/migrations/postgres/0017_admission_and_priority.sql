-- Admission control and priority (02-queue.md, "Priority, delay, schedules
-- and admission"; docs/queue.md, "Admission").
--
-- `admission` holds an endpoint's limits (`queue = ''`) and a queue's
-- (`queue` named): paused (0/1), how many todos may be claimed at once,
-- and how many claims a window of `window_ms` allows. The window's own
-- count (`window_started_at`, `window_claims`) is charged by the claim's
-- statement, so two instances cannot both spend its last claim.
CREATE TABLE admission (
    endpoint_id           TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    queue                 TEXT NOT NULL,
    paused                BIGINT NOT NULL DEFAULT 0,
    max_in_flight         BIGINT CHECK (max_in_flight >= 0),
    window_ms             BIGINT CHECK (window_ms > 0),
    max_claims_per_window BIGINT CHECK (max_claims_per_window >= 0),
    window_started_at     BIGINT,
    window_claims         BIGINT NOT NULL DEFAULT 0,
    updated_at            BIGINT NOT NULL,
    PRIMARY KEY (endpoint_id, queue)
);

-- Priority: higher first, then the oldest. The pending indexes are keyed in
-- claim order, so the claim still reads the head of one index range.
ALTER TABLE todos ADD COLUMN priority BIGINT NOT NULL DEFAULT 0;

-- In-flight slots: a claim under a `max_in_flight` takes the lowest free
-- slot number of its endpoint (and of its queue). The unique indexes are
-- what makes the limit hold across instances: a claim that read the slots
-- before another instance's claim committed fails on the index instead of
-- exceeding the limit (the store then tries again, reading afresh). Rows
-- without a slot (no limit) have no entry.
ALTER TABLE todos ADD COLUMN endpoint_slot BIGINT;
ALTER TABLE todos ADD COLUMN queue_slot BIGINT;
CREATE UNIQUE INDEX todos_endpoint_slot ON todos (endpoint_id, endpoint_slot)
    WHERE state = 'claimed' AND endpoint_slot IS NOT NULL;
CREATE UNIQUE INDEX todos_queue_slot ON todos (endpoint_id, queue, queue_slot)
    WHERE state = 'claimed' AND queue_slot IS NOT NULL;

DROP INDEX todos_pending_by_queue;
DROP INDEX todos_pending_by_endpoint;
CREATE INDEX todos_pending_by_queue ON todos (endpoint_id, queue, priority DESC, created_at, id)
    WHERE state = 'pending';
CREATE INDEX todos_pending_by_endpoint ON todos (endpoint_id, priority DESC, created_at, id)
    WHERE state = 'pending';

-- The fused claim (one statement: claim, attempt, window charge) fails
-- through this when its charge went over the window's limit, so the claim
-- is undone with it; the store reads again (`statements.rs`, OVER_BUDGET).
CREATE FUNCTION switchboard_over_budget() RETURNS BIGINT LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the window''s claims are spent' USING ERRCODE = 'SB001';
END
$$;
