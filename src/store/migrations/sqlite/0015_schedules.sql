-- (The same table as PostgreSQL's 0015.)
-- Schedules (02-queue.md, "Schedules"): a todo at each occurrence of a 5-field
-- cron expression in a time zone. `next_at` is the occurrence the schedule
-- waits for; the instance that moves it on (a guarded UPDATE from the value
-- it read) creates that occurrence's todo in the same transaction, so each
-- occurrence makes one todo across instances and restarts. `paused` is 0 or 1.
CREATE TABLE schedules (
    id          TEXT PRIMARY KEY,
    endpoint_id TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    human_id    TEXT NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    queue       TEXT NOT NULL,
    cron        TEXT NOT NULL,
    tz          TEXT NOT NULL,
    title       TEXT NOT NULL,
    kind        TEXT,
    payload     TEXT,
    catch_up    TEXT NOT NULL CHECK (catch_up IN ('one', 'none')),
    paused      BIGINT NOT NULL DEFAULT 0,
    next_at     BIGINT NOT NULL,
    last_at     BIGINT,
    created_at  BIGINT NOT NULL
);
CREATE INDEX schedules_by_endpoint ON schedules (endpoint_id, created_at, id);
CREATE INDEX schedules_by_human ON schedules (human_id);
CREATE INDEX schedules_due ON schedules (next_at) WHERE paused = 0;
