-- One ring per todo in the whole cluster (04-doorbells.md): the instance that
-- rings a todo that became ready first claims it here, with the todo's
-- `attempt` at that moment (0 when created, N after N attempts and a retry).
-- NULL = no instance rang it for any readiness yet.
ALTER TABLE todos ADD COLUMN ready_rung_attempt BIGINT;
