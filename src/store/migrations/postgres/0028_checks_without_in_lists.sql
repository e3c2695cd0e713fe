-- SQLite's 0028 rewrites its row checks without `IN` lists (a temporary b-tree per row written
-- there); PostgreSQL's are domains and `= ANY` comparisons already (0010), and its live key's
-- predicate proves the same dedup read either way. What both drop: `admission.window_claims`,
-- unread since the window's count moved to its shards (0025).
ALTER TABLE admission DROP COLUMN window_claims;
