-- A window budget's count in its own rows (docs/queue.md, "Admission").
-- PostgreSQL spreads it over 16 shards so concurrent claims do not wait on
-- one row; SQLite's one writer runs one claim at a time, so each level has
-- one shard (`statements::window_shards`). The window's start stays on the
-- `admission` row; `admission.window_claims` is no longer read.
CREATE TABLE admission_windows (
    endpoint_id       TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    queue             TEXT NOT NULL,
    shard             BIGINT NOT NULL,
    window_started_at BIGINT,
    claims            BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (endpoint_id, queue, shard)
);

INSERT INTO admission_windows (endpoint_id, queue, shard, window_started_at, claims)
SELECT endpoint_id, queue, 0, window_started_at, min(window_claims, max_claims_per_window)
FROM admission WHERE window_ms IS NOT NULL AND max_claims_per_window IS NOT NULL;
