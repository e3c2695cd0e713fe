-- Every foreign key's referencing column leads an index (docs/decisions.md,
-- "Foreign keys are indexed or gone"; PostgreSQL's 0012 drops its
-- `todos.event_id` key instead).
--
-- SQLite enforces a foreign key's action by looking up the referencing rows
-- of each referenced row deleted; without an index leading with the column,
-- it scans the whole referencing table each time: retention deleting 200
-- intake events with their todos scanned all 300 000 todos 200 times (8.8 s;
-- 1 ms with the index). SQLite updates an index only when a statement changes
-- one of its columns, and no transition changes `event_id`: the index costs
-- an entry when an intake todo is inserted, nothing per claim or completion.
-- It leaves out the todos that came from no event.
CREATE INDEX todos_by_event ON todos (event_id) WHERE event_id IS NOT NULL;

-- Deleting an endpoint deletes its intake events; deleting a human, its
-- webhooks.
CREATE INDEX intake_events_by_endpoint ON intake_events (endpoint_id);
CREATE INDEX webhooks_by_human ON webhooks (human_id);
