-- The re-ring sweep reads only what it rings (issue 14, B5; 04-doorbells.md),
-- as PostgreSQL has since its 0008: keyed by (ring_attempts, ring clock), the
-- due condition is one index range per step, and each range is read in clock
-- order and cut at what the tick asks for (`rings.rs`, `due_by_clock`).
--
-- Before, SQLite probed the pending index once per hosted endpoint: ~12 ms a
-- tick with nothing due over 10 000 hosted endpoints, ~28 ms (p99 ~49, the
-- budget is 50) ringing 100 of 5 000 due.
--
-- Only rows that can ring are in it (pending, from intake): the agent loop's
-- claims of pulled work add and remove no entry; a claim of a pushed todo
-- removes one, and a ring moves one.
CREATE INDEX todos_ring_clock ON todos (ring_attempts, COALESCE(last_ringed_at, created_at))
    WHERE state = 'pending' AND event_id IS NOT NULL;
