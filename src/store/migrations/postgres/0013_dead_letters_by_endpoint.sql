-- Each endpoint's dead letters, for the work counts the board re-reads every
-- two seconds per open page and the endpoint listings show (docs/decisions.md,
-- "Work counts read the live indexes"). Those counts read the whole history
-- of the human's endpoints (`state <> 'done'`: 31 ms per read over 300 000
-- todos, growing with retention); pending and claimed todos have partial
-- indexes already, dead letters had none. A todo enters this index when it is
-- dead-lettered and leaves it when a human retries it: the agent loop's
-- updates (pending → claimed → done) never satisfy the predicate, so they
-- add no entry to it.
CREATE INDEX todos_dead_by_endpoint ON todos (endpoint_id)
    WHERE state = 'failed' AND next_retry_at IS NULL;
