-- Delayed todos (02-queue.md, "Priority, delay, schedules and admission";
-- docs/queue.md, "Delayed todos"): a todo pushed with `run_at` waits in the
-- state `delayed`, neither claimable nor ringable, until the maintenance
-- tick (or the pushing instance's timer) moves it to `pending` at `run_at`
-- by one guarded statement, and rings it then. A delayed todo's
-- idempotency key is live like a pending one's.
ALTER DOMAIN todo_state DROP CONSTRAINT todo_state_check;
ALTER DOMAIN todo_state ADD CONSTRAINT todo_state_check
    CHECK (VALUE IN ('pending', 'claimed', 'done', 'failed', 'cancelled', 'delayed'));

-- When a delayed todo becomes pending (kept afterwards, for the record).
ALTER TABLE todos ADD COLUMN run_at BIGINT;

DROP INDEX todos_live_key;
CREATE UNIQUE INDEX todos_live_key ON todos (endpoint_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL
      AND (state IN ('pending', 'claimed', 'delayed')
           OR (state = 'failed' AND next_retry_at IS NOT NULL));
CREATE INDEX todos_delayed_due ON todos (run_at) WHERE state = 'delayed';
CREATE INDEX todos_delayed_by_endpoint ON todos (endpoint_id, run_at) WHERE state = 'delayed';
