-- A todo can be cancelled by a human (07-operator.md): a terminal state
-- `cancelled`, who cancelled it, and the attempt outcome/disposition that
-- records a cancel of a claimed todo. The CHECK constraints are the ones
-- PostgreSQL named after their columns in 0002.

ALTER TABLE todos DROP CONSTRAINT todos_state_check;
ALTER TABLE todos ADD CONSTRAINT todos_state_check
    CHECK (state IN ('pending', 'claimed', 'done', 'failed', 'cancelled'));
-- `human:<id>` while the todo is cancelled.
ALTER TABLE todos ADD COLUMN cancelled_by TEXT;

ALTER TABLE todo_attempts DROP CONSTRAINT todo_attempts_outcome_check;
ALTER TABLE todo_attempts ADD CONSTRAINT todo_attempts_outcome_check
    CHECK (outcome IN
      ('completed', 'failed', 'released', 'lease_expired', 'reaped', 'revoked', 'cancelled'));
ALTER TABLE todo_attempts DROP CONSTRAINT todo_attempts_disposition_check;
ALTER TABLE todo_attempts ADD CONSTRAINT todo_attempts_disposition_check
    CHECK (disposition IN ('done', 'retry_scheduled', 'requeued', 'dead_lettered', 'cancelled'));

-- Retention counts a cancelled todo as finished.
DROP INDEX todos_terminal_by_age;
CREATE INDEX todos_terminal_by_age ON todos (completed_at)
    WHERE state IN ('done', 'cancelled') OR (state = 'failed' AND next_retry_at IS NULL);
