-- A counted ring that no hearer could take is not counted (docs/doorbells.md,
-- "The re-ring sweep"): the sweep's one statement keeps the ring clock it
-- replaced here, and a ring every buffer refused is undone by one guarded
-- statement that puts the count and the clock back.
ALTER TABLE todos ADD COLUMN prev_ringed_at BIGINT;
