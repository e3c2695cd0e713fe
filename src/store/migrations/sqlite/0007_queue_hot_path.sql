-- The queue's hot path (issue 14), as on PostgreSQL where it applies: one
-- index fewer to maintain per claim. The reaper finds lapsed leases through
-- the per-endpoint claimed index (it holds only live claims). SQLite has no
-- per-table autovacuum or fillfactor settings (see docs/storage.md).
DROP INDEX todos_claimed_by_lease;
