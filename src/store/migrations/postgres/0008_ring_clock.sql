-- The re-ring sweep reads only what is due (issue 14, B5; 04-doorbells.md).
--
-- Ring k+1 of a pending, push-eligible todo is due once its ring clock
-- `COALESCE(last_ringed_at, created_at)` is at least step(k) old, where k is
-- its `ring_attempts`. Keyed by (ring_attempts, clock), the sweep's due
-- condition is one index range per step (`rings.rs`, `due_condition`), so a
-- tick reads the todos that are due and nothing else: not the hosted
-- endpoints' other pending todos, and not the pages of finished history they
-- share (before: a probe of the pending index per hosted endpoint plus a heap
-- visit per pending todo, 25 000 buffers and ~37 ms with 10 000 endpoints and
-- 1 000 000 finished todos, against ~4 ms with no history).
--
-- Only rows that can ring are in it (pending, from intake): a claim leaves
-- it, so the agent loop's claim adds no entry. Ring updates change its key,
-- so they are no longer HOT; there are at most a handful per todo.
-- SQLite keeps its plan (a probe per hosted endpoint, history-independent,
-- B5 passes there) and so does not get this index: one index fewer for its
-- claims to maintain.
CREATE INDEX todos_ring_clock ON todos (ring_attempts, (COALESCE(last_ringed_at, created_at)))
    WHERE state = 'pending' AND event_id IS NOT NULL;
