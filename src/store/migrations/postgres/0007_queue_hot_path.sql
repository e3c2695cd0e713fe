-- The queue's hot tables tuned for churn (issue 14; docs/storage.md, "The hot path").
--
-- Autovacuum per table: a queue table turns over its live rows constantly, so
-- a threshold proportional to its size (the default 20 %, or the 1 % before)
-- lets dead index entries pile up at the head of the pending index, and every
-- claim walks them. A fixed threshold and no cost delay make autovacuum keep
-- pace with the churn whatever the table's size; the analyze settings keep
-- the planner's picture current (plans cached on pooled connections are
-- re-planned when a table is analysed).
ALTER TABLE todos SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 5000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 5000,
    autovacuum_vacuum_cost_delay = 0,
    fillfactor = 80
);

-- Every attempt record is inserted at a claim and updated once when its
-- lease ends: room on the page (fillfactor) lets that update stay on the page.
ALTER TABLE todo_attempts SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 5000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0,
    fillfactor = 80
);

-- Fewer index entries per claim. A claim is never a HOT update (`state` is in
-- the pending indexes' predicates), so every index whose predicate the
-- claimed row satisfies gets a new entry. The reaper finds lapsed leases
-- through the per-endpoint claimed index just as well: that index holds only
-- the live claims, so scanning it whole and sorting is cheap.
DROP INDEX todos_claimed_by_lease;

-- The listings' index had exactly the pending index's key columns, so while
-- most todos were pending the planner could take it for claim_next — and a
-- plan cached on a pooled connection then walked every finished todo of the
-- endpoint on each claim (B1: 628 buffers per claim, growing). The included
-- columns make it strictly wider than the partial pending index, so the
-- claim always prefers the latter; listings filtered by state or queue can
-- check them in the index.
DROP INDEX todos_by_endpoint_created;
CREATE INDEX todos_by_endpoint_created ON todos (endpoint_id, created_at, id) INCLUDE (state, queue);
