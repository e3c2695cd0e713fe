-- A queue's activity over time, for the board's charts (docs/board.md,
-- "Queues"; domain::activity): per endpoint, queue and bucket (a minute, a
-- quarter hour or an hour), how many todos were created, completed, failed
-- and dead-lettered, and histograms of the time to claim and to complete.
-- Each instance adds what it did every few seconds (ops::activity::flush);
-- a chart reads one range of this key, never the todos.
CREATE TABLE queue_activity (
    endpoint_id       TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    span_seconds      BIGINT NOT NULL,
    bucket_at         BIGINT NOT NULL,
    queue             TEXT NOT NULL,
    created           BIGINT NOT NULL DEFAULT 0,
    completed         BIGINT NOT NULL DEFAULT 0,
    failed            BIGINT NOT NULL DEFAULT 0,
    dead_lettered     BIGINT NOT NULL DEFAULT 0,
    claim_latency     TEXT NOT NULL DEFAULT '',
    complete_latency  TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (endpoint_id, span_seconds, bucket_at, queue)
);
