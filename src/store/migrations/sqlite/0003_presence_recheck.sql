-- When the presence evaluator must next look at an endpoint: the next instant
-- its effective presence can change (written by whoever settles it, guarded on
-- the inputs it read). NULL = inputs changed since: look at the next tick.
ALTER TABLE endpoints ADD COLUMN presence_recheck_at BIGINT;
CREATE INDEX endpoints_presence_recheck ON endpoints (presence_recheck_at)
    WHERE state = 'active';
