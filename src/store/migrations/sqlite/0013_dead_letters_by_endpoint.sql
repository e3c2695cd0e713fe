-- Each endpoint's dead letters, for the board's and the endpoint listings'
-- work counts (docs/decisions.md, "Work counts read the live indexes"; the
-- same index as PostgreSQL's 0013). The counts read every todo of the
-- human's endpoints before; now each count reads its state's partial index.
CREATE INDEX todos_dead_by_endpoint ON todos (endpoint_id)
    WHERE state = 'failed' AND next_retry_at IS NULL;
