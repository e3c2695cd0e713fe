-- Every foreign key's referencing column leads an index, or the key goes
-- (docs/decisions.md, "Foreign keys are indexed or gone").
--
-- A foreign key's action runs a query on the referencing table for each
-- referenced row deleted (`… WHERE event_id = $1`); without an index leading
-- with that column, it is a sequential scan per row. Retention deleting 1 000
-- intake events with their todos spent 22.6 s in `todos_event_id_fkey` over
-- 300 000 todos, one scan of `todos` per event; deleting one endpoint with
-- 200 intake events, 5.3 s.
--
-- 1. todos.event_id. An intake event is inserted in its todo's own
--    transaction and deleted only with it (retention deletes both in one
--    transaction; an endpoint deleted takes both), so ON DELETE SET NULL never
--    had a row to set. An index on the column would take an entry at every
--    claim and every completion of an intake todo (neither update can be HOT),
--    so the key goes instead, as 0009's did for the attempt history.
ALTER TABLE todos DROP CONSTRAINT todos_event_id_fkey;

-- 2. Deleting an endpoint deletes its intake events; deleting a human, its
--    webhooks. Both tables are written once per row, so the index costs an
--    entry per insert and nothing per update.
CREATE INDEX intake_events_by_endpoint ON intake_events (endpoint_id);
CREATE INDEX webhooks_by_human ON webhooks (human_id);
